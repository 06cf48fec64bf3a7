// Small io_uring helpers shared by the two transports: ring set-up with one-line errors,
// submitting when the ring may be busy, waiting, and draining the completion ring.
#pragma once

#include <liburing.h>

#include <string>

namespace biofs {

// io_uring_queue_init_params() that explains a failure in one line: "" or the reason, naming
// `what` (the device string). Tries `flags`, then `flags` without `optional` bits if the
// kernel refuses them.
std::string uring_init(io_uring* ring, unsigned entries, io_uring_params* p, unsigned optional,
                       const std::string& what);

// Submits what is queued, retrying while the kernel is busy. Returns io_uring_submit()'s
// result (>= 0) or the last error.
int uring_submit(io_uring* ring);

// Blocks until the ring has a completion, for at most REAP_WAIT_MS where the kernel can bound
// the wait without a timeout SQE (IORING_FEAT_EXT_ARG), so that a reaper that finds nothing
// left to wait for comes back. Returns io_uring_wait_cqe*()'s result.
inline constexpr long REAP_WAIT_MS = 10;
int uring_wait(io_uring* ring);

// Drains the completion ring: fn(user_data, res) for each CQE that carries data (a wake() NOP
// carries none), returning how many requests that CQE finished. When a pass finds nothing it
// enters the kernel once — GETEVENTS on an IOPOLL ring, where nothing completes otherwise, else
// a peek that flushes an overflowed CQ — and looks again. Returns the requests finished.
template <typename Fn>
int uring_reap(io_uring* ring, Fn&& fn) {
  int done = 0;
  bool entered = false;
  for (;;) {
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(ring, head, cqe) {
      seen++;
      if (void* data = io_uring_cqe_get_data(cqe)) done += fn(data, cqe->res);
    }
    io_uring_cq_advance(ring, seen);
    if (done || seen || entered) return done;
    entered = true;
    if (ring->flags & IORING_SETUP_IOPOLL)
      io_uring_get_events(ring);
    else if (io_uring_peek_cqe(ring, &cqe) != 0)
      return done;
  }
}

}  // namespace biofs
