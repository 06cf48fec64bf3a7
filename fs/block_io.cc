#include "block_io.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#ifndef BIOFS_SANITIZER_BUILD
#include <tbb/scalable_allocator.h>
#endif

namespace biofs {

// I/O buffers come and go with every file I/O, up to 1 MiB each: TBB's scalable allocator
// keeps freed large blocks for reuse, where glibc would mmap and munmap them (a page fault and
// a zeroed page per 4 KiB, every time). Sanitizer builds use malloc, which they can see.
static void* io_buf_alloc(size_t bytes) {
#ifdef BIOFS_SANITIZER_BUILD
  void* p = nullptr;
  return posix_memalign(&p, PAGE_SIZE, bytes) ? nullptr : p;
#else
  return scalable_aligned_malloc(bytes, PAGE_SIZE);
#endif
}
static void io_buf_free(void* p) {
#ifdef BIOFS_SANITIZER_BUILD
  free(p);
#else
  scalable_aligned_free(p);
#endif
}

IoBuf::IoBuf(size_t bytes, bool zero) : n_(bytes) {
  p_ = static_cast<uint8_t*>(io_buf_alloc(bytes ? bytes : PAGE_SIZE));
  if (!p_) throw std::bad_alloc();
  if (zero) std::memset(p_, 0, bytes);
}
IoBuf& IoBuf::operator=(IoBuf&& o) noexcept {
  if (this != &o) {
    if (p_) io_buf_free(p_);
    p_ = o.p_, n_ = o.n_;
    o.p_ = nullptr, o.n_ = 0;
  }
  return *this;
}
IoBuf::~IoBuf() {
  if (p_) io_buf_free(p_);
}

// Bios carry at most this much; the queue splits further to its own limits.
static constexpr uint32_t kMaxBioBytes = 1u << 20;

IoBatch::~IoBatch() {
  if (!queued_.empty()) queued_.clear();
  if (!async_) wait();
}

void IoBatch::rw_bytes(bool write, uint64_t byte_off, uint32_t len, void* buf, blk_opf_t flags) {
  uint8_t* p = static_cast<uint8_t*>(buf);
  while (len) {
    const uint32_t n = len < kMaxBioBytes ? len : kMaxBioBytes;
    queued_.push_back({write, byte_off >> SECTOR_SHIFT, n, p, flags});
    byte_off += n;
    p += n;
    len -= n;
  }
}

void IoBatch::read(uint64_t blk, uint32_t count, void* buf) {
  const uint64_t bs = io_->block_size();
  rw_bytes(false, blk * bs, uint32_t(count * bs), buf);
}

void IoBatch::write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags) {
  const uint64_t bs = io_->block_size();
  rw_bytes(true, blk * bs, uint32_t(count * bs), const_cast<void*>(buf), flags);
}

void IoBatch::flush(blk_opf_t flags) { queued_.push_back({true, 0, 0, nullptr, flags | REQ_OP_FLUSH}); }

void IoBatch::end_io(Bio* bio) {
  auto* b = static_cast<IoBatch*>(bio->bi_private);
  const blk_status_t st = bio->bi_status;
  bio_put(bio);  // before the count drops: a waiter may free the batch right after
  b->done_one(st);
}

void IoBatch::done_one(blk_status_t st) {
  if (st != BLK_STS_OK) {
    // Whatever the device said (medium error, timeout, transport), the caller sees EIO, as a
    // kernel filesystem reports a failed bio; the device's own line names the cause.
    int expected = 0;
    status_.compare_exchange_strong(expected, -EIO);
    io_->errors.fetch_add(1, std::memory_order_relaxed);
  }
  if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (async_) {
    // Moved out first: the callback may destroy this batch.
    Callback fn = std::move(callback_);
    BlkPollGroup* group = poll_group_;
    fn(status_.load());
    if (group) group->pending.fetch_sub(1, std::memory_order_release);  // after the callback ran
    return;
  }
  std::lock_guard g(lock_);
  finished_ = true;
  cv_.notify_all();
}

// A flush, or a write a flush goes before: blk-flush sequences it, and it completes unpolled.
bool IoBatch::has_flush(const Queue& todo) {
  for (const Pending& p : todo)
    if ((p.flags & REQ_PREFLUSH) || bio_op_of(p.flags) == REQ_OP_FLUSH) return true;
  return false;
}

void IoBatch::submit() {
  if (queued_.empty()) {
    if (async_) {
      Callback fn = std::move(callback_);
      fn(status_.load());
    }
    return;
  }
  // The count covers every bio before the first is submitted, so an inline completion of an
  // early bio cannot finish the batch. Only a batch someone waits for needs `finished_` (and its
  // lock: a mutex round trip is 130 instructions, 4% of a read).
  if (!async_) {
    std::lock_guard g(lock_);
    finished_ = false;
  }
  // With a callback, the last bio's completion may destroy the batch (inside submit_bio or
  // blk_finish_plug): nothing below touches `this` once the bios are out.
  const Queue todo = std::move(queued_);
  queued_.clear();
  outstanding_.fetch_add(int(todo.size()), std::memory_order_relaxed);
  BlockIo* io = io_;
  BlockDevice* bdev = io->bdev();
  // An asynchronous batch of a thread that polls (blockcore/blk_poll.h) is counted in its group
  // and polled. A synchronous one is polled by its waiter where the queue has poll queues, the
  // thread polls already (a FUSE ring thread: blk_poll_thread_polls()) and no bio is a flush
  // sequence (those complete the usual way, so the waiter sleeps for them).
  blk_opf_t polled = 0;
  if (async_) {
    if (BlkPollGroup* g = blk_poll_group_current(); g && g->q == bdev->queue) {
      poll_group_ = g;
      g->pending.fetch_add(1, std::memory_order_relaxed);
      polled = REQ_POLLED;
    }
  } else if (bdev->queue && bdev->queue->nr_poll_queues() && blk_poll_thread_polls() && !has_flush(todo)) {
    poll_hctx_ = bdev->queue->map_queue(REQ_POLLED);
    polled = REQ_POLLED;
  }
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, uint16_t(todo.size() < 32 ? todo.size() : 32));
  for (const Pending& p : todo) {
    const bool flush = bio_op_of(p.flags) == REQ_OP_FLUSH;
    const blk_opf_t op = flush ? p.flags : ((p.write ? REQ_OP_WRITE : REQ_OP_READ) | p.flags | polled);
    Bio* bio = bio_alloc_bioset(bdev, flush ? 0 : 1, op, GFP_KERNEL, &io->bio_set());
    if (!flush) bio_add_virt(bio, p.buf, p.len);
    bio->bi_iter.bi_sector = p.sector;
    bio->bi_end_io = end_io;
    bio->bi_private = this;
    io->bios.fetch_add(1, std::memory_order_relaxed);
    io->bytes.fetch_add(p.len, std::memory_order_relaxed);
    submit_bio(bio);
  }
  blk_finish_plug(&plug);
}

int IoBatch::wait() {
  if (!queued_.empty()) submit();
  sched_submit_work();  // an outer plug (a FUSE ring batch's) kept the bios
  if (BlkMqHwCtx* hctx = std::exchange(poll_hctx_, nullptr)) {
    blk_poll_until(hctx, [this] {
      std::lock_guard g(lock_);
      return finished_;
    });
  }
  {
    std::unique_lock g(lock_);
    cv_.wait(g, [this] { return finished_; });
  }
  const int st = status_.load();
  status_.store(0);
  return st;
}

BlockIo::BlockIo(BlockDevice* bdev, uint32_t block_size, BioCache bio_cache)
    : bdev_(bdev),
      block_size_(block_size),
      bs_(64, 0, BIOSET_NEED_BVECS | bio_cache_flags(bio_cache) | (bio_cache != BioCache::off ? BIOSET_TRIM_IDLE : 0u)) {}

int BlockIo::read(uint64_t blk, uint32_t count, void* buf) {
  IoBatch b(this);
  b.read(blk, count, buf);
  return b.wait();
}

int BlockIo::write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags) {
  IoBatch b(this);
  b.write(blk, count, buf, flags);
  return b.wait();
}

int BlockIo::flush() {
  IoBatch b(this);
  b.flush();
  return b.wait();
}

}  // namespace biofs
