#include "read_only_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "lib/background_thread.h"
#include "mountinfo.h"

namespace biofs {

namespace {

// The whole file through `fd`, from its start: mountinfo's poll() wants it read again after each event.
std::string read_all(int fd) {
  std::string text;
  char buf[8192];
  if (lseek(fd, 0, SEEK_SET) < 0) return text;
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) text.append(buf, size_t(n));
  return text;
}

// The superblock options of the mount whose device is `dev`; empty when it is gone.
std::string super_opts_of(const std::string& text, const std::string& dev) {
  std::istringstream lines(text);
  std::string line, found;
  MountEntry e;
  while (std::getline(lines, line))
    if (parse_mountinfo_line(line, &e) && e.dev == dev) found = e.super_opts;
  return found;
}

}  // namespace

Status ReadOnlyWatch::start(const std::string& mountpoint, bool read_only, Changed changed,
                            std::unique_ptr<ReadOnlyWatch>* out) {
  std::string dev;
  for (const MountEntry& e : read_mountinfo())
    if (e.mountpoint == mountpoint && e.fstype.rfind("fuse", 0) == 0) dev = e.dev;
  if (dev.empty()) return Status::io_error("remount: no FUSE mount at '" + mountpoint + "' in /proc/self/mountinfo");
  const int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(std::string("remount: /proc/self/mountinfo: ") + strerror(errno));
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return Status::io_error(std::string("remount: eventfd: ") + strerror(errno));
  }
  out->reset(new ReadOnlyWatch(fd, wake, dev, read_only, std::move(changed)));
  return Status();
}

ReadOnlyWatch::ReadOnlyWatch(int mountinfo_fd, int wake_fd, std::string dev, bool read_only, Changed changed)
    : mountinfo_fd_(mountinfo_fd), wake_fd_(wake_fd), dev_(std::move(dev)), read_only_(read_only),
      changed_(std::move(changed)) {
  read_all(mountinfo_fd_);  // the state poll() reports changes from
  thread_ = start_background_thread("biofs-remount", [this](std::stop_token stop) { run(stop); });
}

ReadOnlyWatch::~ReadOnlyWatch() {
  stop_background_thread(thread_);
  close(mountinfo_fd_);
  close(wake_fd_);
}

void ReadOnlyWatch::run(std::stop_token stop) {
  std::stop_callback wake(stop, [this] {
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof(one)) < 0) {}
  });
  while (!stop.stop_requested()) {
    pollfd fds[2] = {{mountinfo_fd_, POLLPRI, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & (POLLPRI | POLLERR))) continue;
    const std::string opts = super_opts_of(read_all(mountinfo_fd_), dev_);
    if (opts.empty()) return;  // unmounted: the daemon is on its way out
    const bool ro = has_option(opts, "ro");
    if (ro == read_only_) continue;
    read_only_ = ro;
    changed_(ro);
  }
}

}  // namespace biofs
