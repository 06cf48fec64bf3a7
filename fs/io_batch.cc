#include "io_batch.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <utility>


namespace biofs {

// Bios carry at most this much; the queue splits further to its own limits.
static constexpr uint32_t kMaxBioBytes = 1u << 20;

IoBatch::~IoBatch() {
  if (last_) submit();
  if (!async_ && in_flight_) wait();
}

void IoBatch::on_complete(Callback fn) {
  assert(!last_ && !in_flight_ && "the callback is set before the batch's first I/O");
  callback_ = std::move(fn);
  async_ = true;
}

// blk_next_bio(): the new bio becomes the parent of the one before, which goes out now.
void IoBatch::add_bio(blk_opf_t op, uint64_t sector, uint8_t* buf, uint32_t len) {
  IoTarget* io = io_;
  BlockDevice* bdev = io->bdev();
  if (!last_ && !in_flight_) {
    // An asynchronous batch with a poll group is counted in it and polled. A synchronous one
    // is polled by its waiter where the queue has poll queues and the thread polls already (a
    // FUSE ring thread: blk_poll_thread_polls()).
    if (async_) {
      if (poll_group_ && poll_group_->q == bdev->queue) {
        poll_group_->pending.fetch_add(1, std::memory_order_relaxed);
        polled_ = true;
      } else {
        poll_group_ = nullptr;
      }
    } else {
      polled_ = bdev->queue && bdev->queue->nr_poll_queues() && blk_poll_thread_polls();
      in_flight_ = true;
      done_.reinit_completion();
      blk_start_plug(&plug_);  // ignored under the caller's plug
    }
  }
  // A flush, or a write a flush goes before, is sequenced by blk-flush and completes unpolled.
  const bool flush = (op & REQ_PREFLUSH) || bio_op_of(op) == REQ_OP_FLUSH;
  if (polled_ && !flush) {
    op |= REQ_POLLED;
    if (!async_) poll_hctx_ = bdev->queue->map_queue(REQ_POLLED);
  }
  Bio* bio = bio_alloc_bioset(bdev, buf ? 1 : 0, op, GFP_KERNEL, &io->bio_set());
  if (buf) bio_add_virt(bio, buf, len);
  else bio->bi_iter.bi_size = len;  // a discard's range (a flush's 0)
  bio->bi_iter.bi_sector = sector;
  if (Bio* prev = std::exchange(last_, bio)) {
    bio_chain(prev, bio);
    submit_one(prev);
  }
}

void IoBatch::submit_one(Bio* bio) {
  io_->bios.fetch_add(1, std::memory_order_relaxed);
  io_->bytes.fetch_add(bio->bi_iter.bi_size, std::memory_order_relaxed);
  submit_bio(bio);
}

void IoBatch::rw_bytes(bool write, uint64_t byte_off, uint32_t len, void* buf, blk_opf_t flags) {
  uint8_t* p = static_cast<uint8_t*>(buf);
  const blk_opf_t op = (write ? REQ_OP_WRITE : REQ_OP_READ) | flags;
  while (len) {
    const uint32_t n = len < kMaxBioBytes ? len : kMaxBioBytes;
    add_bio(op, byte_off >> SECTOR_SHIFT, p, n);
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

void IoBatch::flush(blk_opf_t flags) { add_bio(REQ_OP_FLUSH | flags, 0, nullptr, 0); }

void IoBatch::discard(uint64_t blk, uint64_t count) {
  constexpr uint64_t kMaxDiscardBytes = 1u << 30;  // bi_size is 32 bits
  uint64_t off = blk * io_->block_size(), left = count * io_->block_size();
  while (left) {
    const uint64_t n = std::min(left, kMaxDiscardBytes);
    add_bio(REQ_OP_DISCARD, off >> SECTOR_SHIFT, nullptr, uint32_t(n));
    off += n;
    left -= n;
  }
}

// The last bio's end_io: every bio of the batch has ended, and its status is the first error.
void IoBatch::end_io(Bio* bio) {
  auto* b = static_cast<IoBatch*>(bio->bi_private);
  const blk_status_t st = bio->bi_status;
  bio_put(bio);
  // Whatever the device said (medium error, timeout, transport), the caller sees EIO, as a
  // kernel filesystem reports a failed bio; the device's own line names the cause.
  b->status_ = st == BLK_STS_OK ? 0 : -EIO;
  if (st != BLK_STS_OK) b->io_->errors.fetch_add(1, std::memory_order_relaxed);
  if (!b->async_) return b->done_.complete();
  // Moved out first: the callback may destroy this batch.
  Callback fn = std::move(b->callback_);
  BlkPollGroup* group = b->poll_group_;
  fn(b->status_);
  if (group) group->pending.fetch_sub(1, std::memory_order_release);  // after the callback ran
}

void IoBatch::submit() {
  Bio* last = std::exchange(last_, nullptr);
  if (!last) {
    if (async_ && callback_) {
      Callback fn = std::move(callback_);
      fn(status_);
    }
    return;
  }
  last->bi_end_io = end_io;
  last->bi_private = this;
  if (async_) {
    // Its completion may destroy the batch (inside submit_bio, or in the caller's
    // blk_finish_plug): nothing touches `this` after it.
    return submit_one(last);
  }
  submit_one(last);
  blk_finish_plug(&plug_);
}

int IoBatch::wait() {
  if (last_) submit();
  if (!in_flight_) return 0;  // nothing was built
  if (BlkMqHwCtx* hctx = std::exchange(poll_hctx_, nullptr))
    blk_poll_until(hctx, [this] { return done_.completion_done(); });
  done_.wait_for_completion();  // sleeps through schedule(): the caller's plug is dispatched first
  in_flight_ = false;
  poll_hctx_ = nullptr;
  return std::exchange(status_, 0);
}

}  // namespace biofs
