// A device's side of tracing (docs/tracing.md): device numbers for the block tracepoints and
// blktrace files of every queue under the device (blockcore/blk_trace.h); the daemon's
// `-o trace=DIR` and `biofs-bench fsio --trace DIR` both come here.
#pragma once

#include <string>

#include "devices/open_device.h"
#include "lib/status.h"

namespace biofs {

// `dir` made absolute (empty stays empty), for a daemon about to leave its working directory;
// one line naming it if it does not resolve.
Status resolve_trace_dir(const std::string& dir, std::string* out);
// Numbers the device's queues 259,0, 259,1, ... (the USDT probes' and records' dev) and, when
// `dir` is not empty, starts blktrace on each: DIR/biofs.blktrace.N for one queue, DIR/biofsK.*
// for a stripe's K-th member. Read with `blkparse -i biofs -D DIR`.
Status start_block_trace(Device& dev, const std::string& dir);
// Stops tracing: what is buffered goes to the files. One line per queue that dropped records
// (a ring full because the writer fell behind), for stderr; empty otherwise.
std::string stop_block_trace(Device& dev);

}  // namespace biofs
