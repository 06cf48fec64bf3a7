// IoBatch: the bios of one filesystem operation; the kernel twin is blk_next_bio() /
// bio_chain_and_submit() (block/bio.c, v6.18).
#pragma once

#include <cstdint>

#include "blockcore/bio_set.h"
#include "blockcore/blk_mq.h"
#include "blockcore/blk_poll.h"
#include "blockcore/schedule.h"
#include "inplace_function.h"
#include "io_target.h"

namespace biofs {

// A set of bios that complete together, built as the caller maps its blocks and chained as
// the kernel chains the bios of one operation (blk_next_bio() / bio_chain_and_submit(),
// block/bio.c, v6.18): each new bio becomes the parent of the one before, which is submitted
// then, so the last one ends only after every other has, carrying the first error any of them
// saw, and the submitter never holds more than one bio it has not submitted (a bio_set's
// reserve guarantees progress only so). A plug gathers them until submit() sends the last
// one: a synchronous batch's own, an asynchronous batch's caller's (or an outer one).
// wait() returns 0 or -errno. With a callback, the last completion calls it (from whatever
// thread ended the last bio) instead of anyone waiting; the batch must then outlive that call.
class IoBatch {
 public:
  // poll: the group an asynchronous batch is counted in (fs/kiocb.h's ki_poll): its bios go
  // REQ_POLLED to the thread's poll queue, and the group's opener reaps them.
  explicit IoBatch(IoTarget* io, BlkPollGroup* poll = nullptr) : io_(io), poll_group_(poll) {}
  ~IoBatch();  // submits what was built, and waits for a synchronous batch
  IoBatch(const IoBatch&) = delete;
  IoBatch& operator=(const IoBatch&) = delete;

  // The last completion calls fn (0 or -errno) and nobody waits; fn may destroy the batch.
  // Set before the first I/O is added: it decides how the bios are built.
  using Callback = InplaceFunction<void(int)>;
  void on_complete(Callback fn);
  // Builds bios for `count` blocks at fs block `blk` to or from `buf` (aligned to 512 bytes at
  // least).
  void read(uint64_t blk, uint32_t count, void* buf);
  void write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags = 0);
  // A byte-granular form for callers that address sectors (superblock at byte 0).
  void rw_bytes(bool write, uint64_t byte_off, uint32_t len, void* buf, blk_opf_t flags = 0);
  void flush(blk_opf_t flags = REQ_PREFLUSH);
  // REQ_OP_DISCARD of `count` blocks at `blk` (blkdev_issue_discard()): bios with a size and
  // no data, split by the queue to max_discard_sectors.
  void discard(uint64_t blk, uint64_t count);
  // Submits the last bio and returns without waiting for the device: a write with
  // REQ_PREFLUSH is held by blk-flush until its pre-flush completes (blockcore/blk_flush.h).
  // With a callback, the batch may already have completed (and been destroyed by it) when this
  // returns; an empty batch calls the callback at once.
  void submit();
  int wait();

 private:
  void add_bio(blk_opf_t op, uint64_t sector, uint8_t* buf, uint32_t len);
  void submit_one(Bio* bio);
  static void end_io(Bio* bio);

  IoTarget* io_;
  BlkPollGroup* poll_group_;
  // A synchronous batch plugs its own bios from the first to submit() (an asynchronous one
  // may be gone by then: its caller plugs).
  BlkPlug plug_;
  Bio* last_ = nullptr;     // built and not yet submitted: the parent of every bio before it
  bool polled_ = false;     // whether the bios go REQ_POLLED (decided at the first one)
  int status_ = 0;          // the batch's result as -errno, set by end_io
  Callback callback_;
  bool async_ = false;
  bool in_flight_ = false;  // submitted, and (synchronous) not yet waited for
  // The waiter sleeps on a completion that end_io completes under its lock, so the batch may
  // be destroyed as soon as wait() returns.
  Completion done_;
  // A synchronous batch whose bios went to the submitter's poll queue: wait() reaps it there
  // instead of sleeping until a completion thread ends it.
  BlkMqHwCtx* poll_hctx_ = nullptr;
};

}  // namespace biofs
