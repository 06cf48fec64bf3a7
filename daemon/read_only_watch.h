// Follows the mount's read-only flag: `mount -o remount,ro|rw` changes the superblock's flag in
// the kernel (reconfigure_super(), fs/super.c, Linux 6.18), and FUSE sends the daemon nothing
// (fuse_reconfigure() only syncs). A thread waits in poll() on /proc/self/mountinfo, which the
// kernel marks readable-with-priority on every mount change in the namespace, and calls back
// when this mount's superblock turns "ro" or "rw".
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "lib/status.h"

namespace biofs {

class ReadOnlyWatch {
 public:
  using Changed = std::function<void(bool read_only)>;
  // Watches the FUSE mount at `mountpoint` (absolute, as mountinfo shows it; the topmost
  // fuse mount there, just made), whose superblock is now `read_only`. Ok, or one line.
  static Status start(const std::string& mountpoint, bool read_only, Changed changed, std::unique_ptr<ReadOnlyWatch>* out);
  ~ReadOnlyWatch();  // stops the thread
  ReadOnlyWatch(const ReadOnlyWatch&) = delete;
  ReadOnlyWatch& operator=(const ReadOnlyWatch&) = delete;

 private:
  ReadOnlyWatch(int mountinfo_fd, int wake_fd, std::string dev, bool read_only, Changed changed);
  void run(std::stop_token stop);

  const int mountinfo_fd_, wake_fd_;
  const std::string dev_;  // MAJOR:MINOR of the mount's superblock
  bool read_only_;
  Changed changed_;
  std::jthread thread_;  // last: stopped before the members it uses go
};

}  // namespace biofs
