// One daemon or tool at a time per backing file: an flock on each file that a parsed device
// string names (emu:PATH or a plain PATH, and every such member of a stripe:DEV+DEV), so a
// second mount, or mkfs on a mounted image, is refused instead of two writers corrupting it.
// nvme:, null: and ram: devices are not locked here (a real namespace is the kernel's to
// arbitrate).
//
// The kernel's unmount returns before the daemon has written its last commit and released the
// file, so a script's `fusermount3 -u MNT; fsck.biofs IMG` would race it. A daemon therefore
// also holds a second lock (an OFD read lock on byte 0) while it serves a mount: a tool that
// finds the file locked but not served waits, bounded, for the daemon that is shutting down,
// saying so in one line; a file that is still served after 2 s (the window in which an
// unmount has returned but the daemon has not yet seen it) is "in use".
#pragma once

#include <string>
#include <vector>

#include "device_string.h"
#include "lib/status.h"

namespace biofs {

class DeviceLock {
 public:
  DeviceLock() = default;
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;
  // Takes the locks, in the order the string names the files. While a holder is not serving a
  // mount (a daemon shutting down, or another tool), waits up to wait_ms for it, printing one
  // line "TOOL: waiting ..." to stderr first. Ok, or one line naming the file: busy when
  // another process holds it, io_error when it cannot be locked.
  Status acquire(const DeviceSpec& spec, bool exclusive, int wait_ms, const char* tool);
  // The daemon: serving a mount from now on / no longer (it is shutting down).
  void set_serving(bool on);

 private:
  struct Held {
    int fd;
    std::string path;
  };
  Status lock_file(const std::string& path, bool exclusive, int wait_ms, const char* tool);
  std::vector<Held> held_;
};

}  // namespace biofs
