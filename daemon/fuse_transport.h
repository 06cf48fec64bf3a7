// The FUSE transport: /dev/fuse (a worker read()s a request and write()s its reply) or
// FUSE-over-io_uring (libfuse >= 3.18: one ring queue per CPU, whose thread fetches requests and
// commits replies as io_uring commands). The kernel offers the second only when the fuse
// module's `enable_uring` parameter is set; root may set it at run time.
#pragma once

#include <string>

namespace biofs {

// on: libfuse's ring (its ring threads; needs tools/libfuse-patches); reactor: biofs's own ring
// side (fuse_reactor.h), on any libfuse.
enum class FuseUring { off, on, auto_, reactor };

// "on", "off", "auto" or "reactor".
bool parse_fuse_uring(const std::string& value, FuseUring* out);
const char* fuse_uring_name(FuseUring v);

// Where the kernel's switch is; BIOFS_FUSE_URING_PARAM overrides it (tests).
std::string fuse_uring_param_path();

// Decides, before mounting, whether to ask for the io_uring transport. `on` fails (returns the
// one line that stops the mount) when the kernel cannot offer it; `auto` falls back to /dev/fuse
// and says why in *note. When the parameter is off and we are root, it is switched on, and
// *note says so. *use: whether to ask the kernel for it at INIT.
std::string decide_fuse_uring(FuseUring want, bool* use, std::string* note);

}  // namespace biofs
