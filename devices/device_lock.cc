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
// A daemon whose mount has just gone lets go within milliseconds (it commits and closes): the
// user hears of a wait only once it is longer than that (`umount; mount` in a script says nothing).
constexpr int kSayAfterMs = 1000;

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

// The backing files of an emulated namespace: the device's own, or its stripe members'.
void backing_files(const DeviceSpec& spec, std::vector<std::string>* out) {
  if (spec.kind == DeviceSpec::Kind::emu) out->push_back(spec.emu.path);
  for (const std::string& m : spec.stripe_members) {
    DeviceSpec member;
    if (parse_device_spec(m, &member).ok()) backing_files(member, out);  // parsed once already, with the stripe
  }
}

}  // namespace

DeviceLock::~DeviceLock() {
  for (const Held& h : held_) close(h.fd);  // releases both locks
}

Status DeviceLock::acquire(const DeviceSpec& spec, bool exclusive, int wait_ms, const char* tool) {
  std::vector<std::string> files;
  backing_files(spec, &files);
  for (const std::string& path : files) {
    if (std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.path == path; })) continue;
    if (Status s = lock_file(path, exclusive, wait_ms, tool); !s.ok()) return s;
  }
  return Status();
}

Status DeviceLock::lock_file(const std::string& path, bool exclusive, int wait_ms, const char* tool) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status();  // the device layer reports a missing file in its own words
  held_.push_back({fd, path});
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(wait_ms);
  // The kernel's unmount returns before the daemon has seen it: a file still served this long
  // after the first try is mounted.
  const auto served_grace = start + std::chrono::milliseconds(std::min(wait_ms, kServedGraceMs));
  bool said = false;
  for (;;) {
    if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return Status();
    if (errno != EWOULDBLOCK) return Status::io_error(path + ": cannot lock: " + strerror(errno));
    const bool served = is_served(fd);
    if (served && std::chrono::steady_clock::now() >= served_grace) return Status::busy(path + " is in use (mounted)");
    if (std::chrono::steady_clock::now() >= deadline)
      return Status::busy(path + " is in use (a daemon shutting down, or another tool has it open)");
    // A served file is waited for silently: mounted, or just unmounted.
    if (!said && !served && std::chrono::steady_clock::now() >= start + std::chrono::milliseconds(kSayAfterMs)) {
      fprintf(stderr, "%s: waiting up to %d s more for the process holding %s to let go of it\n", tool,
              (wait_ms - kSayAfterMs + 999) / 1000, path.c_str());
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void DeviceLock::set_serving(bool on) {
  for (const Held& h : held_) {
    struct flock l = serving_range(on ? F_RDLCK : F_UNLCK);
    if (fcntl(h.fd, F_OFD_SETLK, &l) != 0)
      fprintf(stderr, "biofs: %s: cannot mark the image served: %s\n", h.path.c_str(), strerror(errno));
  }
}

}  // namespace biofs
