#include "fuse_transport.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace biofs {

bool parse_fuse_uring(const std::string& value, FuseUring* out) {
  if (value == "on") return *out = FuseUring::on, true;
  if (value == "off") return *out = FuseUring::off, true;
  if (value == "auto") return *out = FuseUring::auto_, true;
  if (value == "reactor") return *out = FuseUring::on, true;
  if (value == "libfuse") return *out = FuseUring::libfuse, true;
  return false;
}

const char* fuse_uring_name(FuseUring v) {
  switch (v) {
    case FuseUring::on: return "on";
    case FuseUring::off: return "off";
    case FuseUring::auto_: return "auto";
    case FuseUring::libfuse: return "libfuse";
  }
  return "?";
}

std::string fuse_uring_param_path() {
  const char* p = getenv("BIOFS_FUSE_URING_PARAM");
  return p && *p ? p : "/sys/module/fuse/parameters/enable_uring";
}

Status decide_fuse_uring(FuseUring want, bool* use, std::string* note) {
  *use = false;
  if (want == FuseUring::off) return Status();
  const std::string path = fuse_uring_param_path();
  // Says why the transport cannot be had: an error for `on`, a fallback note for `auto`.
  auto cannot = [&](const std::string& why) {
    if (want != FuseUring::auto_)
      return Status::io_error(std::string("fuse_uring=") + fuse_uring_name(want) + ": " + why);
    *note = "fuse_uring=auto: using /dev/fuse: " + why;
    return Status();
  };
  if (want == FuseUring::libfuse && !BIOFS_LIBFUSE_HAS_URING)
    return cannot("this build's libfuse " BIOFS_LIBFUSE_VERSION " has no FUSE-over-io_uring (tools/build-libfuse.sh could not build a newer one; fuse_uring=on, the reactor, needs none)");
  std::ifstream in(path);
  std::string value;
  if (!in || !(in >> value)) return cannot("this kernel has no FUSE-over-io_uring (" + path + " not readable)");
  if (value == "Y" || value == "1") {
    *use = true;
    return Status();
  }
  if (geteuid() != 0)
    return cannot("the fuse module's enable_uring is off and only root may switch it on (" + path + ")");
  std::ofstream out(path);
  if (!(out << "Y\n") || !out.flush())
    return cannot("cannot switch on the fuse module's enable_uring (" + path + "): " + strerror(errno));
  *note = "fuse_uring: switched on the fuse module's enable_uring (" + path + ")";
  *use = true;
  return Status();
}

}  // namespace biofs
