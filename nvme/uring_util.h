// Small io_uring helpers shared by the two transports: ring set-up with one-line errors, and
// getting a submission entry when the ring may be full.
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

}  // namespace biofs
