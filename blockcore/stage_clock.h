// Time stamps along one I/O, sampled: the userspace stand-in for the kernel's rq->start_time_ns /
// io_start_time_ns and the block tracepoints (block_bio_queue, block_getrq, block_plug,
// block_rq_issue, block_rq_complete) that blktrace turns into per-stage latencies.
//
// One I/O in N (stage_clock_set_sample(), default 64; the environment's BIOFS_STAGE_SAMPLE at
// start, 0 turns it off) is traced on its submitting thread: each stamp records the time since
// the previous stamp into that stage's histogram (percpu_stat.h). Unsampled I/O pays one
// thread-local load and a branch per stamp; nothing on the hot path takes a lock.
//
// A trace starts at an upper-layer request (a filesystem request: stage_request_received) or, where nothing above the block
// layer started one, at a bio allocation. A request trace stamps every bio of its request and ends
// at stage_request_reply (or at the thread's next stage_request_received). A bio-started trace stamps
// that one bio up to its tag, then only the plug flush and the submission that carry it, and
// ends once they are dispatched, or at the bio's final put if it never is. The device's share
// crosses threads in the request (io_start_time_ns).
//
// Rates: 1 request in N (N = BIOFS_STAGE_SAMPLE, 64), and 1 bio-started trace in
// N * BIO_SAMPLE_FACTOR bios: a bio alloc+put pair costs ~15 ns, so a trace's half dozen clock
// reads (~20 ns each here) must be that rare to stay under 1% of it.
//
// For the filesystem: call `StageToken t = stage_request_received();` first thing in a request
// handler and `stage_request_reply(t);` where the reply is sent, on whatever thread sends it.
#pragma once

#include <cstdint>
#include <ctime>

#include "percpu_stat.h"
#include "request.h"

namespace biofs {

enum : uint8_t {
  TRACE_BIO = 1,       // stamps the per-bio stages (allocation, split, tag)
  TRACE_DISPATCH = 2,  // stamps the plug flush and the submission
};
struct StageTrace {
  uint8_t on = 0;      // TRACE_* bits
  bool from_request = false;
  uint32_t countdown = 0;       // bios until the next sample
  uint32_t request_countdown = 0;  // requests until the next sample: a count of its own, so
                                // that one bio per request cannot lock the sampling onto bios
  uint64_t start_ns = 0;
  uint64_t last_ns = 0;
  const void* bio = nullptr;    // the bio a bio-started trace follows (ends at its final put)
};
extern constinit thread_local StageTrace tls_stage;

inline uint64_t stage_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

inline constexpr unsigned BIO_SAMPLE_FACTOR = 128;
// 1 in n requests (n * BIO_SAMPLE_FACTOR bios) is traced; 0 stops tracing (threads pick
// the new value up at their next sample).
void stage_clock_set_sample(unsigned n);
unsigned stage_clock_sample();

// ---- the upper layer's side (a filesystem request and its reply) ----
struct StageToken {
  uint64_t start_ns = 0;  // 0: this request is not sampled
};
StageToken stage_request_received();
void stage_request_reply(StageToken token);

// ---- the block layer and the driver ----
void stage_trace_maybe_start();  // out of line: the sampling decision
void stage_mark_slow(Stage stage);
void stage_rqs_submitted_slow(Request* first);
void stage_rq_completed_slow(Request* rq);
void stage_dispatched_slow();

// At the top of bio_alloc_bioset: starts a trace for 1 bio in N when none is running.
inline void stage_bio_alloc_begin() {
  StageTrace& t = tls_stage;
  if (!t.on && t.countdown-- == 0) [[unlikely]]
    stage_trace_maybe_start();
}
// The allocation stamp. True when a bio-started trace from here on follows `bio`: the caller
// flags the bio BIO_STAGE_TRACED, and its final put calls stage_bio_put_slow() (a bio put
// without being submitted, by an error path or a benchmark, must not leave the thread traced).
// The put side thus costs nothing new: bio_put() tests that flag with BIO_REFFED.
bool stage_bio_allocated_slow(Stage stage, const void* bio);
void stage_bio_put_slow(const void* bio);
// A per-bio stamp (split, tag): the time since the trace's previous stamp.
inline void stage_mark(Stage stage) {
  if (tls_stage.on & TRACE_BIO) [[unlikely]]
    stage_mark_slow(stage);
}
// The plug flush stamp.
inline void stage_mark_flush() {
  if (tls_stage.on) [[unlikely]]
    stage_mark_slow(STAGE_PLUG_FLUSH);
}
// The driver handed these requests (a list from `first` through rq_next) to the device.
inline void stage_rqs_submitted(Request* first) {
  if (tls_stage.on) [[unlikely]]
    stage_rqs_submitted_slow(first);
}
// The core saw the request complete (any thread).
inline void stage_rq_completed(Request* rq) {
  if (rq->io_start_time_ns) [[unlikely]]
    stage_rq_completed_slow(rq);
}
// A plug flush or a direct dispatch finished: ends a trace that a bio allocation started.
inline void stage_dispatched() {
  if (tls_stage.on) [[unlikely]]
    stage_dispatched_slow();
}

}  // namespace biofs
