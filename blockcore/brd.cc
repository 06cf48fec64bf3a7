#include "brd.h"

#include <algorithm>
#include <cstring>

namespace biofs {

Status BrdDevice::create(uint64_t bytes, unsigned lbs, Toggles toggles, unsigned nr_queues, unsigned queue_depth,
                         std::unique_ptr<BrdDevice>* out) {
  out->reset();
  std::unique_ptr<BrdDevice> d(new BrdDevice());
  if (Status s = d->init(bytes, lbs, toggles, nr_queues, queue_depth); !s.ok()) return s;
  *out = std::move(d);
  return Status();
}

Status BrdDevice::init(uint64_t bytes, unsigned lbs, Toggles toggles, unsigned nr_queues, unsigned queue_depth) {
  if (lbs < 512 || lbs > 4096 || (lbs & (lbs - 1)))
    return Status::invalid_argument("brd: logical block size " + std::to_string(lbs) +
                                    " is not a power of two from 512 to 4096");
  bytes -= bytes % lbs;
  if (bytes == 0) return Status::invalid_argument("brd: size is smaller than one logical block");
  QueueLimits lim;
  lim.logical_block_size = lbs;
  lim.max_hw_sectors = 2048;  // 1 MiB requests, as brd's BLK_DEF_MAX_SECTORS-ish default
  lim.max_sectors = 2048;
  lim.max_segments = 256;
  lim.max_write_zeroes_sectors = UINT32_MAX >> SECTOR_SHIFT;
  lim.max_discard_sectors = UINT32_MAX >> SECTOR_SHIFT;
  // Unlike the kernel's brd, this test disk says it has a write cache so that every flush the
  // filesystem sends reaches it and is counted (flushes(), fail_writes()).
  lim.write_cache = true;
  TagSetConfig set;
  set.nr_hw_queues = nr_queues;
  set.queue_depth = queue_depth;
  queue_ = std::make_unique<RequestQueue>(lim, this, toggles);
  std::string why;
  if (int ret = queue_->init(set, &why); ret) return Status::from_errno(ret, why);
  bdev_.queue = queue_.get();
  bdev_.capacity = bytes >> SECTOR_SHIFT;
  bdev_.name = "ram0";
  return Status();
}

BrdDevice::~BrdDevice() = default;

uint64_t BrdDevice::pages_allocated() const {
  std::lock_guard g(lock_);
  return pages_.size();
}

// Copies between memory and the store, one store page at a time. A write allocates the page;
// a read of a missing page yields zeros (brd_do_bvec / copy_from_brd).
void BrdDevice::copy(uint64_t offset, uint8_t* mem, uint32_t len, bool write) {
  while (len) {
    const uint64_t idx = offset >> PAGE_SHIFT;
    const uint32_t in = uint32_t(offset & (PAGE_SIZE - 1));
    const uint32_t n = std::min<uint32_t>(len, PAGE_SIZE - in);
    if (write) {
      auto& page = pages_[idx];
      if (!page) {
        page.reset(new uint8_t[PAGE_SIZE]);
        std::memset(page.get(), 0, PAGE_SIZE);
      }
      std::memcpy(page.get() + in, mem, n);
    } else {
      auto it = pages_.find(idx);
      if (it == pages_.end()) std::memset(mem, 0, n);
      else std::memcpy(mem, it->second.get() + in, n);
    }
    offset += n;
    mem += n;
    len -= n;
  }
}

void BrdDevice::copy_from_store(uint64_t offset, uint8_t* dst, uint64_t len) const {
  while (len) {
    const uint64_t idx = offset >> PAGE_SHIFT;
    const uint32_t in = uint32_t(offset & (PAGE_SIZE - 1));
    const uint64_t n = std::min<uint64_t>(len, PAGE_SIZE - in);
    auto it = pages_.find(idx);
    if (it == pages_.end()) std::memset(dst, 0, n);
    else std::memcpy(dst, it->second.get() + in, n);
    offset += n;
    dst += n;
    len -= n;
  }
}

void BrdDevice::poke(uint64_t offset, const void* src, uint64_t len) {
  std::lock_guard g(lock_);
  copy(offset, static_cast<uint8_t*>(const_cast<void*>(src)), uint32_t(len), true);
}

void BrdDevice::peek(uint64_t offset, void* dst, uint64_t len) const {
  std::lock_guard g(lock_);
  copy_from_store(offset, static_cast<uint8_t*>(dst), len);
}

blk_status_t BrdDevice::do_request(Request* rq) {
  const req_op op = req_op_of(rq);
  if (op == REQ_OP_FLUSH) {  // RAM has no volatile cache: nothing to do but count it
    std::lock_guard g(lock_);
    if (fail_writes_) return BLK_STS_IOERR;
    flushes_++;
    return BLK_STS_OK;
  }
  if (blk_rq_pos(rq) + (blk_rq_bytes(rq) >> SECTOR_SHIFT) > bdev_.capacity) return BLK_STS_IOERR;
  std::lock_guard g(lock_);
  if (fail_writes_ && op != REQ_OP_READ) return BLK_STS_IOERR;
  if (rq->cmd_flags & REQ_PREFLUSH) flushes_++;
  if (op == REQ_OP_DISCARD || op == REQ_OP_WRITE_ZEROES) {
    // Whole pages are dropped (they read back as zeros); partial pages are zeroed.
    uint64_t off = blk_rq_pos(rq) << SECTOR_SHIFT;
    uint64_t left = blk_rq_bytes(rq);
    static const uint8_t zeros[PAGE_SIZE] = {};
    while (left) {
      const uint32_t in = uint32_t(off & (PAGE_SIZE - 1));
      const uint32_t n = uint32_t(std::min<uint64_t>(left, PAGE_SIZE - in));
      if (n == PAGE_SIZE) pages_.erase(off >> PAGE_SHIFT);
      else if (pages_.count(off >> PAGE_SHIFT)) copy(off, const_cast<uint8_t*>(zeros), n, true);
      off += n;
      left -= n;
    }
    return BLK_STS_OK;
  }
  if (op != REQ_OP_READ && op != REQ_OP_WRITE) return BLK_STS_NOTSUPP;
  const bool write = op == REQ_OP_WRITE;
  for (Bio* bio = rq->bio; bio; bio = bio->bi_next) {
    uint64_t off = bio->bi_iter.bi_sector << SECTOR_SHIFT;
    bio_for_each_segment(bio, [&](const BioVec& seg) {
      copy(off, seg.bv_page + seg.bv_offset, seg.bv_len, write);
      if (write && observer_) observer_(off, seg.bv_page + seg.bv_offset, seg.bv_len);
      off += seg.bv_len;
    });
  }
  return BLK_STS_OK;
}

blk_status_t BrdDevice::queue_rq(BlkMqHwCtx*, Request* rq, bool) {
  blk_mq_end_request(rq, do_request(rq));
  return BLK_STS_OK;
}

void BrdDevice::queue_rqs(RqList* rqs) {
  IoCompBatch iob;
  while (Request* rq = rqs->pop()) {
    const blk_status_t st = do_request(rq);
    if (!blk_mq_add_to_batch(rq, &iob, st)) blk_mq_end_request(rq, st);
  }
  blk_mq_end_request_batch(&iob);
}

}  // namespace biofs
