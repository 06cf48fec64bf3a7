// One daemon or tool at a time per backing file: an flock on the file that a device string
// names (emu:PATH or a plain PATH), so a second mount, or mkfs on a mounted image, is refused
// instead of two writers corrupting it. nvme: and null: devices are not locked here (a real
// namespace is the kernel's to arbitrate).
//
// The kernel's unmount returns before the daemon has written its last commit and released the
// file, so a script's `fusermount3 -u MNT; fsck.biofs IMG` would race it. A daemon therefore
// also holds a second lock (an OFD read lock on byte 0) while it serves a mount: a tool that
// finds the file locked but not served waits, bounded, for the daemon that is shutting down,
// saying so in one line; a file that is still served after 2 s (the window in which an
// unmount has returned but the daemon has not yet seen it) is "in use".
#pragma once

#include <string>

namespace biofs {

class DeviceLock {
 public:
  DeviceLock() = default;
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;
  // Takes the lock. While the holder is not serving a mount (a daemon shutting down, or
  // another tool), waits up to wait_ms, printing one line "TOOL: waiting ..." to stderr first.
  // "" or one line.
  std::string acquire(const std::string& spec, bool exclusive, int wait_ms, const char* tool);
  // The daemon: serving a mount from now on / no longer (it is shutting down).
  void set_serving(bool on);

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace biofs
