// Counterpart of bio_poll()/blk_mq_poll() (block/blk-mq.c) and the submitter's reaping of
// io_uring's IOPOLL (io_uring/rw.c, io_do_iopoll).
#include "blk_poll.h"

#include <chrono>
#include <thread>

namespace biofs {

namespace {
thread_local BlkPollGroup* tls_group = nullptr;
}  // namespace

bool blk_poll_group_start(BlkPollGroup* g, RequestQueue* q) {
  if (!q || !q->nr_poll_queues() || tls_group) return false;
  g->pending.store(0, std::memory_order_relaxed);
  g->q = q;
  tls_group = g;
  return true;
}

BlkPollGroup* blk_poll_group_current() { return tls_group; }

int blk_mq_poll(BlkMqHwCtx* hctx, bool wait) {
  BlkMqOps* ops = hctx->queue->ops();
  IoCompBatch iob;
  int n = ops->poll(hctx, &iob);
  if (!n && wait) {
    ops->poll_wait(hctx);
    n = ops->poll(hctx, &iob);
  }
  blk_mq_end_request_batch(&iob);
  return n;
}

void blk_poll_backoff() { std::this_thread::sleep_for(std::chrono::microseconds(20)); }

void blk_poll_group_wait(BlkPollGroup* g) {
  if (tls_group == g) tls_group = nullptr;
  if (!g->pending.load(std::memory_order_acquire)) return;
  sched_submit_work();
  blk_poll_until(g->q->map_queue(REQ_POLLED), [g] { return !g->pending.load(std::memory_order_acquire); });
}

}  // namespace biofs
