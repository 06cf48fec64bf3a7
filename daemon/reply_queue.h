// Replies to FUSE-over-io_uring requests from threads that do not own the request's ring queue.
//
// libfuse 3.18 runs a request's handler in its ring queue's thread with the queue's lock held,
// and a reply from any other thread takes that lock. A block-layer completion thread that
// replied directly would wait for whatever that ring thread is doing, and the ring thread may
// itself be waiting for an I/O that only the completion thread can end (a write that allocates,
// a truncate draining direct I/O, a full tag set): a deadlock. So a completion thread replies
// in place only when it gets the lock without waiting (fuse_req_uring_trylock(), libfuse patch
// 0005: the ring thread is waiting for requests, the usual case); otherwise the reply is queued
// here and sent by one thread of their own. The completion path never waits on libfuse. The
// ring thread replies in place to what it completes itself, and /dev/fuse requests always
// reply in place (writing to /dev/fuse takes no lock).
#pragma once

#define FUSE_USE_VERSION 318
#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "blockcore/stage_clock.h"
#include "fs/block_io.h"

namespace biofs {

class ReplyQueue {
 public:
  ReplyQueue();
  ~ReplyQueue();  // sends what is queued, then stops the thread (no request may come after)
  ReplyQueue(const ReplyQueue&) = delete;
  ReplyQueue& operator=(const ReplyQueue&) = delete;

  // A read's reply: the error (result < 0) or a copy of the `result` bytes at data.
  void read_done(fuse_req_t req, ssize_t result, const uint8_t* data, StageToken t);
  // A write's reply: the error (result < 0) or the count written.
  void write_done(fuse_req_t req, ssize_t result, StageToken t);

  uint64_t queued() const { return queued_.load(std::memory_order_relaxed); }

 private:
  struct Item {
    Item* next;
    fuse_req_t req;
    ssize_t result;
    bool is_read;
    StageToken token;
    IoBuf data;
  };
  void push(Item* item);
  void run();
  static void send(Item* item);

  std::atomic<Item*> head_{nullptr};  // a lock-free stack; the thread takes it whole
  std::atomic<uint64_t> queued_{0};
  std::thread thread_;
};

}  // namespace biofs
