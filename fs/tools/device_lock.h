// One daemon or tool at a time per backing file: an flock on the file that a device string
// names (emu:PATH or a plain PATH), so a second mount, or mkfs on a mounted image, is refused
// instead of two writers corrupting it. nvme: and null: devices are not locked here (a real
// namespace is the kernel's to arbitrate).
#pragma once

#include <string>

namespace biofs {

class DeviceLock {
 public:
  DeviceLock() = default;
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;
  // Takes the lock, waiting up to wait_ms for a daemon that is still shutting down.
  // "" or one line.
  std::string acquire(const std::string& spec, bool exclusive, int wait_ms);

 private:
  int fd_ = -1;
};

}  // namespace biofs
