// Counterpart of polled I/O in the kernel: blk-mq's poll queues (HCTX_TYPE_POLL, nvme's
// poll_queues: no completion interrupt), bio_poll()/blk_mq_poll(), and the submitter's side that
// io_uring's IOPOLL gives them (io_do_iopoll: the task that submitted reaps its own completions).
//
// A thread that will wait for its I/O anyway opens a BlkPollGroup and names it in the I/O's
// context (fs/kiocb.h's ki_poll, io_uring's IOCB_HIPRI kiocb): the layer that builds the bios
// marks them REQ_POLLED and counts each I/O in the group; they go to the thread's poll queue,
// and blk_poll_group_wait() reaps there until all of it has ended: no completion thread is
// woken, and the completion callbacks (the FUSE reply) run in the submitting thread.
// Differences from the kernel, both because pollers here outnumber CPUs: a poll queue belongs
// to a thread (the first poll queue free in turn, not the CPU's), and a poller that finds
// nothing sleeps until its queue has a completion (BlkMqOps::poll_wait) instead of spinning.
#pragma once

#include <atomic>

#include "blk_mq.h"

namespace biofs {

struct BlkPollGroup {
  std::atomic<unsigned> pending{0};  // submissions counted in the group and not yet ended
  RequestQueue* q = nullptr;         // the queue the group polls
};

// Opens `g` on q. False when q has no poll queues: the I/O then completes the usual way.
bool blk_poll_group_start(BlkPollGroup* g, RequestQueue* q);
// Reaps the thread's poll queue until every submission counted in `g` has ended (a submission
// that ends elsewhere, e.g. on a default queue, is waited for too).
void blk_poll_group_wait(BlkPollGroup* g);

// Whether the calling thread has taken a poll queue (its first polled submission does). Only
// such a thread polls its synchronous waits (fs/block_io.h): one that merely waits now and then
// would otherwise take a poll queue too and share it with a thread that polls all the time.
bool blk_poll_thread_polls();

// blk_mq_poll(): reaps a poll queue and ends what it found; with `wait`, sleeps first until the
// queue has a completion (bounded). Returns the requests ended.
int blk_mq_poll(BlkMqHwCtx* hctx, bool wait);

// Reaps `hctx` (a poll queue) until done() holds: the loop of blk_poll_group_wait() and of a
// synchronous waiter that polls (fs/block_io.h; the kernel's sync polled direct I/O, whose
// waiter calls bio_poll() until its bio has ended). What ends elsewhere (a submission the block
// layer did not poll) is waited for in short sleeps.
void blk_poll_backoff();
template <class Done>
void blk_poll_until(BlkMqHwCtx* hctx, Done&& done) {
  while (!done()) {
    if (blk_mq_poll(hctx, false)) continue;
    if (done()) break;
    if (blk_mq_poll(hctx, true)) continue;
    blk_poll_backoff();
  }
}

// A synchronous wait for I/O counted in `g`: what went to the thread's poll queue is reaped
// by the waiter until done() holds (no completion thread reaps a poll queue; the kernel's sync
// polled I/O inside an io_uring IOPOLL task reaps the same way).
template <class Done>
void blk_poll_group_wait_for(BlkPollGroup* g, Done&& done) {
  blk_poll_until(g->q->map_queue(REQ_POLLED), done);
}

}  // namespace biofs
