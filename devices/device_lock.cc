#include "device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace biofs {

namespace {

constexpr int kServedGraceMs = 2000;

// The "serving" lock: byte 0, as an OFD lock (independent of the flock on the same file).
struct flock serving_range(short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 1;
  return l;
}

bool is_served(int fd) {
  struct flock l = serving_range(F_WRLCK);
  return fcntl(fd, F_OFD_GETLK, &l) == 0 && l.l_type != F_UNLCK;
}

}  // namespace

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) close(fd_);  // releases both locks
}

std::string DeviceLock::acquire(const std::string& spec, bool exclusive, int wait_ms, const char* tool) {
  if (spec.rfind("emu:", 0) == 0) path_ = spec.substr(4, spec.find(',') == std::string::npos ? std::string::npos : spec.find(',') - 4);
  else if (spec.find(':') == std::string::npos || spec.find('/') < spec.find(':')) path_ = spec;
  if (path_.empty()) return "";
  fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return "";  // the device layer reports a missing file in its own words
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(wait_ms);
  // The kernel's unmount returns before the daemon has seen it: a file still served this long
  // after the first try is mounted.
  const auto served_grace = start + std::chrono::milliseconds(std::min(wait_ms, kServedGraceMs));
  bool said = false;
  for (;;) {
    if (flock(fd_, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return "";
    if (errno != EWOULDBLOCK) return path_ + ": cannot lock: " + strerror(errno);
    const bool served = is_served(fd_);
    if (served && std::chrono::steady_clock::now() >= served_grace) return path_ + " is in use (mounted)";
    if (std::chrono::steady_clock::now() >= deadline)
      return path_ + " is in use (a daemon shutting down, or another tool has it open)";
    if (!said && !served) {  // a served file is waited for silently: mounted, or just unmounted
      fprintf(stderr, "%s: waiting up to %d s for the process holding %s to let go of it\n", tool,
              (wait_ms + 999) / 1000, path_.c_str());
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void DeviceLock::set_serving(bool on) {
  if (fd_ < 0) return;
  struct flock l = serving_range(on ? F_RDLCK : F_UNLCK);
  if (fcntl(fd_, F_OFD_SETLK, &l) != 0) fprintf(stderr, "biofs: %s: cannot mark the image served: %s\n", path_.c_str(), strerror(errno));
}

}  // namespace biofs
