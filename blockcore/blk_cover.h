// The completion cover: a thread that runs anyway reaps a hardware queue's completions in place
// of the driver's completion thread. biofs's own; in the kernel a completion interrupt runs on
// the submitting CPU and needs no thread to wake, and the nearest twin is io-wq
// (io_uring/io-wq.c, v6.18: a worker about to sleep has another one woken in its place,
// io_wq_worker_sleeping()).
//
// A FUSE reactor (daemon/fuse_reactor.h) submits the bios of its CPU's requests to its CPU's
// default hardware queue and waits in its own ring anyway. Covering that queue, it polls the
// driver's completion descriptor in that ring and reaps there, so a completion wakes one
// thread (the reactor, which also answers the request) instead of the completion thread and
// then the reactor. Rules:
// - One thread covers a queue at a time (blk_cover_claim: the first to claim it).
// - While a thread covers the queue, the driver's completion thread stands down
//   (BlkMqOps::set_covered(true)); it takes over before the covering thread sleeps anywhere
//   but in its ring: schedule() (schedule.h) calls blk_cover_pause() through sched_submit_work(), and the thread covers again
//   with blk_cover_resume() when it is back.
// - The completion thread still looks now and then while it stands down (nvme_driver.h), so
//   a sleep that skipped schedule() delays completions, never loses them.
#pragma once

#include "blk_mq.h"

namespace biofs {

// While a thread covers a queue, the driver's completion thread stands down and looks at the
// queue every this many milliseconds (NvmeDriverConfig::cover_look_ms). What it reaps then is a
// cover miss: a covering thread that slept without going through schedule(), or a completion
// that came before the thread, covering again, was back in its ring.
inline constexpr unsigned COVER_LOOK_MS = 2;

// Claims `hctx` for the calling thread, which covers it from now on (see blk_cover_resume).
// False, and nothing claimed, when the driver has no completion descriptor for it, another
// thread has it, or this thread covers a queue already.
bool blk_cover_claim(BlkMqHwCtx* hctx);
// Gives the claimed queue back to its completion thread for good (a reactor ending).
void blk_cover_release();
// The calling thread's claimed queue, or nullptr; and its completion descriptor.
BlkMqHwCtx* blk_cover_hctx();
int blk_cover_fd();
// The thread is back where it waits for completions: it covers its queue again.
void blk_cover_resume();
// The thread may sleep elsewhere: the completion thread takes over (schedule()).
void blk_cover_pause();
// Reaps the claimed queue and ends what it found; returns the requests ended.
int blk_cover_reap();

}  // namespace biofs
