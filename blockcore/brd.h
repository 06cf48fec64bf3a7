// Counterpart of drivers/block/brd.c: a RAM-backed blk-mq device that keeps its data. Pages are
// allocated on first write; a read of a sector never written returns zeros. Requests complete
// inline in the submitter's dispatch, so a test or a filesystem can run on it without NVMe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "blk_mq.h"
#include "lib/status.h"

namespace biofs {

class BrdDevice : public BlkMqOps {
 public:
  // brd_alloc(): a device of `bytes` (rounded down to whole logical blocks of `lbs` bytes) into
  // *out. Ok, or one line: invalid_argument if lbs is not a power of two between 512 and 4096,
  // bytes < lbs, or the queue refuses a setting (nr_queues, queue_depth).
  static Status create(uint64_t bytes, unsigned lbs, Toggles toggles, unsigned nr_queues, unsigned queue_depth,
                       std::unique_ptr<BrdDevice>* out);
  // The same with 512-byte blocks, one hardware queue of 128 tags.
  static Status create(uint64_t bytes, std::unique_ptr<BrdDevice>* out) {
    return create(bytes, 512, Toggles{}, 1, 128, out);
  }
  ~BrdDevice() override;

  BlockDevice* bdev() { return &bdev_; }
  RequestQueue* queue() { return queue_.get(); }
  uint64_t bytes() const { return bdev_.capacity << SECTOR_SHIFT; }
  uint64_t pages_allocated() const;  // memory actually held, in PAGE_SIZE pages
  uint64_t flushes() const { return flushes_; }

  // Test hooks: copy bytes straight in or out of the backing store, bypassing the queue
  // (to corrupt an image, or to look at what a write left behind).
  void poke(uint64_t offset, const void* src, uint64_t len);
  void peek(uint64_t offset, void* dst, uint64_t len) const;
  // Test hook: sees every write as it lands (byte offset, data, length), in order — what a
  // crash test replays a prefix of. Called with the device lock held: it must not do I/O.
  using WriteObserver = std::function<void(uint64_t offset, const uint8_t* data, uint32_t len)>;
  // Test hook: writes (and flushes) fail with BLK_STS_IOERR, touching nothing, while set.
  void set_fail_writes(bool fail) {
    std::lock_guard g(lock_);
    fail_writes_ = fail;
  }
  void set_write_observer(WriteObserver fn) {
    std::lock_guard g(lock_);
    observer_ = std::move(fn);
  }

  blk_status_t queue_rq(BlkMqHwCtx* hctx, Request* rq, bool last) override;
  void queue_rqs(RqList* rqs) override;

 private:
  BrdDevice() = default;
  Status init(uint64_t bytes, unsigned lbs, Toggles toggles, unsigned nr_queues, unsigned queue_depth);
  blk_status_t do_request(Request* rq);
  void copy(uint64_t offset, uint8_t* mem, uint32_t len, bool write);
  void copy_from_store(uint64_t offset, uint8_t* dst, uint64_t len) const;

  std::unique_ptr<RequestQueue> queue_;
  BlockDevice bdev_;
  mutable std::mutex lock_;  // guards pages_ (brd's xarray); data copies happen under it
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> pages_;
  uint64_t flushes_ = 0;
  WriteObserver observer_;
  bool fail_writes_ = false;
};

}  // namespace biofs
