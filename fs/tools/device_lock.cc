#include "device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace biofs {

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) close(fd_);  // releases the lock
}

std::string DeviceLock::acquire(const std::string& spec, bool exclusive, int wait_ms) {
  std::string path;
  if (spec.rfind("emu:", 0) == 0) path = spec.substr(4, spec.find(',') == std::string::npos ? std::string::npos : spec.find(',') - 4);
  else if (spec.find(':') == std::string::npos || spec.find('/') < spec.find(':')) path = spec;
  if (path.empty()) return "";
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return "";  // the device layer reports a missing file in its own words
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    if (flock(fd_, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return "";
    if (errno != EWOULDBLOCK) return path + ": cannot lock: " + strerror(errno);
    if (std::chrono::steady_clock::now() >= deadline) return path + " is in use (mounted, or another tool has it open)";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace biofs
