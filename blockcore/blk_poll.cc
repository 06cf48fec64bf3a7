// Counterpart of bio_poll()/blk_mq_poll() (block/blk-mq.c) and the submitter's reaping of
// io_uring's IOPOLL (io_uring/rw.c, io_do_iopoll).
#include "blk_poll.h"

#include "schedule.h"

#include <chrono>
#include <thread>

namespace biofs {

bool blk_poll_group_start(BlkPollGroup* g, RequestQueue* q) {
  if (!q || !q->nr_poll_queues()) return false;
  g->pending.store(0, std::memory_order_relaxed);
  g->q = q;
  return true;
}

int blk_mq_poll(BlkMqHwCtx* hctx, bool wait) {
  // bio_poll(): what is to be polled for may still sit in the caller's plug.
  if (BlkPlug* plug = current_plug()) [[unlikely]]
    blk_flush_plug(plug);
  BlkMqOps* ops = hctx->queue->ops();
  IoCompBatch iob;
  int n = ops->poll(hctx, &iob);
  if (!n && wait) {
    schedule([&] { ops->poll_wait(hctx); });
    n = ops->poll(hctx, &iob);
  }
  blk_mq_end_request_batch(&iob);
  return n;
}

void blk_poll_backoff() { std::this_thread::sleep_for(std::chrono::microseconds(20)); }

void blk_poll_group_wait(BlkPollGroup* g) {
  if (!g->pending.load(std::memory_order_acquire)) return;
  blk_poll_until(g->q->map_queue(REQ_POLLED), [g] { return !g->pending.load(std::memory_order_acquire); });
}

}  // namespace biofs
