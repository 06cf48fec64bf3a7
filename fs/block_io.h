// The filesystem's only way to the disk: whole fs blocks read and written as bios through
// submit_bio(), synchronously or in batches. A batch runs under a plug so its bios reach the
// driver together (blk_start_plug/blk_finish_plug), and completes when its last bio ends —
// inline or on a completion thread, whichever the device does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>
#include <cstdint>
#include <memory>

#include "blockcore/bio_set.h"
#include "blockcore/blk_mq.h"
#include "blockcore/blk_poll.h"
#include "inplace_function.h"
#include "small_vector.h"

namespace biofs {

// Page-aligned memory for I/O: the device may need its dma_alignment (and O_DIRECT-backed
// namespaces need a 4 KiB one), which plain new[] does not give.
class IoBuf {
 public:
  IoBuf() = default;
  explicit IoBuf(size_t bytes, bool zero = true);  // zero-filled unless told otherwise
  IoBuf(IoBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  IoBuf& operator=(IoBuf&& o) noexcept;
  ~IoBuf();
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

class BlockIo;

// A set of bios that complete together. Add I/Os, then submit(); wait() returns 0 or the first
// error as -errno. With a callback, the last completion calls it (from whatever thread ended the
// last bio) instead of anyone waiting; the batch must then outlive that call.
class IoBatch {
 public:
  explicit IoBatch(BlockIo* io) : io_(io) {}
  ~IoBatch();  // waits for anything submitted and not yet waited for
  IoBatch(const IoBatch&) = delete;
  IoBatch& operator=(const IoBatch&) = delete;

  // Queues `count` blocks at fs block `blk` to or from `buf` (aligned to 512 bytes at least).
  void read(uint64_t blk, uint32_t count, void* buf);
  void write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags = 0);
  // A byte-granular form for callers that address sectors (superblock at byte 0).
  void rw_bytes(bool write, uint64_t byte_off, uint32_t len, void* buf, blk_opf_t flags = 0);
  void flush(blk_opf_t flags = REQ_PREFLUSH);
  // The last completion calls fn (0 or -errno) and nobody waits; fn may destroy the batch.
  using Callback = InplaceFunction<void(int)>;
  void on_complete(Callback fn) {
    callback_ = std::move(fn);
    async_ = true;
  }
  // Submits everything queued, under one plug, and returns without waiting for the device: a
  // write with REQ_PREFLUSH is held by blk-flush until its pre-flush completes
  // (blockcore/blk_flush.h). With a callback, the batch may already have completed (and been
  // destroyed by it) when this returns; an empty batch calls the callback at once.
  void submit();
  int wait();

 private:
  struct Pending {
    bool write;
    uint64_t sector;
    uint32_t len;
    uint8_t* buf;
    blk_opf_t flags;
  };
  static void end_io(Bio* bio);
  void done_one(blk_status_t st);

  using Queue = SmallVector<Pending, 4>;  // a 4 KiB read or write is one bio
  static bool has_flush(const Queue& todo);

  BlockIo* io_;
  Queue queued_;
  std::atomic<int> outstanding_{0};
  std::atomic<int> status_{0};  // first error as -errno
  // The waiter sleeps on a condition variable that the last completion signals with the lock
  // held, so the batch may be destroyed as soon as wait() returns.
  std::mutex lock_;
  std::condition_variable cv_;
  bool finished_ = true;
  Callback callback_;
  bool async_ = false;
  BlkPollGroup* poll_group_ = nullptr;  // the submitter's group, when it polls
  // A synchronous batch whose bios went to the submitter's poll queue: wait() reaps it there
  // instead of sleeping until a completion thread ends it.
  BlkMqHwCtx* poll_hctx_ = nullptr;
};

class BlockIo {
 public:
  // bio_cache: whether the fs's bio set keeps a per-thread bio cache, and its put form (the
  // `bio_cache=` toggle).
  BlockIo(BlockDevice* bdev, uint32_t block_size, BioCache bio_cache = BioCache::on);
  BlockIo(const BlockIo&) = delete;
  BlockIo& operator=(const BlockIo&) = delete;

  BlockDevice* bdev() const { return bdev_; }
  uint32_t block_size() const { return block_size_; }
  void set_block_size(uint32_t bs) { block_size_ = bs; }
  uint64_t device_bytes() const { return bdev_->capacity << SECTOR_SHIFT; }
  uint64_t nr_blocks() const { return device_bytes() / block_size_; }
  BioSet& bio_set() { return bs_; }

  // Synchronous forms: 0 or -errno.
  int read(uint64_t blk, uint32_t count, void* buf);
  int write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags = 0);
  int flush();  // REQ_OP_FLUSH | REQ_PREFLUSH: everything completed before is durable after

  // Counters for the tools: bios and bytes submitted, errors seen, and the overwrites whose
  // data was copied into a buffer of the daemon's own (not submitted from the caller's).
  std::atomic<uint64_t> bios{0}, bytes{0}, errors{0}, write_copies{0};

 private:
  BlockDevice* bdev_;
  uint32_t block_size_;
  BioSet bs_;
};

}  // namespace biofs
