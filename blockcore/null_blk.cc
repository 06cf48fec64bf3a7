#include "null_blk.h"

#include <chrono>

#include "lib/background_thread.h"

namespace biofs {

static uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

Status NullBlk::create(const NullBlkConfig& cfg, std::unique_ptr<NullBlk>* out) {
  out->reset();
  std::unique_ptr<NullBlk> d(new NullBlk(cfg));
  if (Status s = d->init(); !s.ok()) return s;
  *out = std::move(d);
  return Status();
}

Status NullBlk::init() {
  const NullBlkConfig& cfg = cfg_;
  QueueLimits lim;
  lim.logical_block_size = cfg.block_size;
  lim.max_hw_sectors = cfg.max_sectors;
  lim.max_sectors = cfg.max_sectors;
  lim.max_segments = 128;
  lim.max_discard_sectors = UINT32_MAX >> SECTOR_SHIFT;
  lim.max_write_zeroes_sectors = UINT32_MAX >> SECTOR_SHIFT;
  TagSetConfig set;
  set.nr_hw_queues = cfg.nr_queues;
  set.queue_depth = cfg.queue_depth;
  queue_ = std::make_unique<RequestQueue>(lim, this, cfg.toggles);
  std::string why;
  if (int ret = queue_->init(set, &why); ret) return Status::from_errno(ret, why);
  bdev_.queue = queue_.get();
  bdev_.capacity = cfg.size_bytes >> SECTOR_SHIFT;
  bdev_.name = "nullb0";
  if (cfg_.irqmode == NullBlkConfig::IrqMode::timer)
    completer_ = start_background_thread("biofs-nullcq", [this](std::stop_token stop) { completion_thread(stop); });
  return Status();
}

NullBlk::~NullBlk() { stop_background_thread(completer_); }

blk_status_t NullBlk::check(const Request* rq) const {
  if (blk_rq_pos(rq) + (blk_rq_bytes(rq) >> SECTOR_SHIFT) > bdev_.capacity) return BLK_STS_IOERR;
  return BLK_STS_OK;
}

blk_status_t NullBlk::queue_rq(BlkMqHwCtx*, Request* rq, bool) {
  rq->status = check(rq);
  if (cfg_.irqmode == NullBlkConfig::IrqMode::timer) {
    RqList one;
    one.add_tail(rq);
    defer(&one);
    return BLK_STS_OK;
  }
  completed_.fetch_add(1, std::memory_order_relaxed);
  blk_mq_end_request(rq, rq->status);
  return BLK_STS_OK;
}

void NullBlk::queue_rqs(RqList* rqs) {
  if (cfg_.irqmode == NullBlkConfig::IrqMode::timer) {
    for (Request* rq = rqs->head; rq; rq = rq->rq_next) rq->status = check(rq);
    defer(rqs);
    return;
  }
  // Inline completion of the whole plug, tags freed in batches.
  IoCompBatch iob;
  uint64_t n = 0;
  while (Request* rq = rqs->pop()) {
    n++;
    const blk_status_t st = check(rq);
    if (!blk_mq_add_to_batch(rq, &iob, st)) blk_mq_end_request(rq, st);
  }
  completed_.fetch_add(n, std::memory_order_relaxed);
  blk_mq_end_request_batch(&iob);
}

void NullBlk::defer(RqList* list) {
  const uint64_t now = now_ns();
  for (Request* rq = list->head; rq; rq = rq->rq_next) rq->start_time_ns = now;
  {
    std::lock_guard guard(lock_);
    if (pending_.tail) pending_.tail->rq_next = list->head;
    else pending_.head = list->head;
    pending_.tail = list->tail;
  }
  *list = RqList{};
  wake_.notify_one();
}

// Stops when asked and nothing is pending: every deferred request ends first.
void NullBlk::completion_thread(std::stop_token stop) {
  std::unique_lock guard(lock_);
  for (;;) {
    if (pending_.empty()) {
      if (stop.stop_requested()) return;
      wake_.wait(guard, stop, [this] { return !pending_.empty(); });
      continue;
    }
    const uint64_t due = pending_.head->start_time_ns + cfg_.completion_nsec;
    const uint64_t now = now_ns();
    if (now < due) {
      if (due - now > 50'000)
        wake_.wait_for(guard, std::chrono::nanoseconds(due - now));
      else {  // too short to sleep for: spin briefly without the lock
        guard.unlock();
        std::this_thread::yield();
        guard.lock();
      }
      continue;
    }
    // Take every request that is due, complete them as one batch outside the lock.
    IoCompBatch iob;
    RqList errors;
    uint64_t n = 0;
    while (!pending_.empty() && pending_.head->start_time_ns + cfg_.completion_nsec <= now) {
      Request* rq = pending_.pop();
      n++;
      if (!blk_mq_add_to_batch(rq, &iob, rq->status)) errors.add_tail(rq);
    }
    guard.unlock();
    completed_.fetch_add(n, std::memory_order_relaxed);
    blk_mq_end_request_batch(&iob);
    while (Request* rq = errors.pop()) blk_mq_end_request(rq, rq->status);
    guard.lock();
  }
}

}  // namespace biofs
