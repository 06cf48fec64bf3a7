// Counterpart of drivers/block/null_blk: a blk-mq device that moves no data. Requests complete
// inline in the submitter's dispatch (irqmode=none, batched through an io_comp_batch), or from a
// completion thread completion_nsec after dispatch (irqmode=timer), which is also what makes
// tags come back out of order and batches come back partial.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <stop_token>
#include <thread>

#include "blk_mq.h"
#include "lib/status.h"

namespace biofs {

struct NullBlkConfig {
  unsigned nr_queues = 1;        // submit_queues
  unsigned queue_depth = 128;    // hw_queue_depth
  unsigned block_size = 512;     // bs
  uint64_t size_bytes = 1ull << 40;
  enum class IrqMode { none, timer } irqmode = IrqMode::none;
  uint64_t completion_nsec = 10'000;
  uint32_t max_sectors = 2048;
  Toggles toggles;
};

class NullBlk : public BlkMqOps {
 public:
  // null_add_dev(): the queue and, in timer mode, the completion thread, into *out. Ok, or the
  // queue's one line (invalid_argument for a setting it refuses: "qd=0: expected 1..65536").
  static Status create(const NullBlkConfig& cfg, std::unique_ptr<NullBlk>* out);
  ~NullBlk() override;  // waits for outstanding timer completions

  BlockDevice* bdev() { return &bdev_; }
  RequestQueue* queue() { return queue_.get(); }
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }

  blk_status_t queue_rq(BlkMqHwCtx* hctx, Request* rq, bool last) override;
  void queue_rqs(RqList* rqs) override;

 private:
  explicit NullBlk(const NullBlkConfig& cfg) : cfg_(cfg) {}
  Status init();
  blk_status_t check(const Request* rq) const;
  void defer(RqList* list);  // timer mode: hand to the completion thread
  void completion_thread(std::stop_token stop);

  NullBlkConfig cfg_;
  std::unique_ptr<RequestQueue> queue_;
  BlockDevice bdev_;
  std::atomic<uint64_t> completed_{0};
  // Timer mode: requests wait in submission order, each until start_time_ns + completion_nsec.
  std::mutex lock_;
  std::condition_variable_any wake_;
  RqList pending_;
  std::jthread completer_;  // last: stopped (after the requests it holds end) before the rest goes
};

}  // namespace biofs
