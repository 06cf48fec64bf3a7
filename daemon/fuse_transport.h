// The FUSE transport: /dev/fuse (a worker read()s a request and write()s its reply) or
// FUSE-over-io_uring (kernel 6.14+: one ring queue per CPU, whose thread fetches requests and
// commits replies as io_uring commands), served by biofs's reactor (fuse_reactor.h) or by
// libfuse's own ring threads (libfuse >= 3.18, the A/B baseline). The kernel offers the ring
// only when the fuse module's `enable_uring` parameter is set; root may set it at run time.
#pragma once

#include <string>

#include "lib/status.h"

namespace biofs {

// on: biofs's own ring side, the reactor (fuse_reactor.h), on any libfuse ("reactor" is another
// name for it); libfuse: libfuse's ring threads, stock, each read and write run to completion on
// the ring thread that took it (data_requests.cc: stock libfuse's ring takes no reply from another
// thread safely); auto: the reactor where the kernel has the ring, else /dev/fuse.
enum class FuseUring { off, on, auto_, libfuse };

// "on" (or "reactor"), "off", "auto" or "libfuse".
bool parse_fuse_uring(const std::string& value, FuseUring* out);
const char* fuse_uring_name(FuseUring v);

// Where the kernel's switch is; BIOFS_FUSE_URING_PARAM overrides it (tests).
std::string fuse_uring_param_path();

// Decides, before mounting, whether to ask for the io_uring transport. `on` fails (an error
// holding the one line that stops the mount) when the kernel cannot offer it; `auto` falls back to /dev/fuse
// and says why in *note. When the parameter is off and we are root, it is switched on, and
// *note says so. *use: whether to ask the kernel for it at INIT.
Status decide_fuse_uring(FuseUring want, bool* use, std::string* note);

}  // namespace biofs
