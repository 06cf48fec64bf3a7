#include "remount.h"

#include <sys/mount.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "mountinfo.h"

namespace biofs {

namespace {

struct FlagName {
  const char* set;
  const char* clear;
  unsigned long bit;
};
// The flags a remount may change: the mount's own, then the superblock's (proc_namespace.c's
// show_mnt_opts() and show_sb_opts() name them so in mountinfo).
constexpr FlagName kFlags[] = {{"ro", "rw", MS_RDONLY},         {"nosuid", "suid", MS_NOSUID},
                               {"nodev", "dev", MS_NODEV},      {"noexec", "exec", MS_NOEXEC},
                               {"sync", "async", MS_SYNCHRONOUS}, {"dirsync", nullptr, MS_DIRSYNC}};

int say(const std::string& line) {
  fprintf(stderr, "biofs: %s\n", line.c_str());
  return 32;
}

// The daemon's read_only, from its stats (user.biofs.stats); -1 when they cannot be read.
int daemon_read_only(const std::string& mountpoint) {
  std::string buf(1 << 16, '\0');
  for (int i = 0; i < 4; i++) {  // the JSON may grow between the size and the read: ERANGE
    const ssize_t n = getxattr(mountpoint.c_str(), "user.biofs.stats", buf.data(), buf.size());
    if (n < 0 && errno == ERANGE) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (n < 0) return -1;
    const auto j = nlohmann::json::parse(buf.begin(), buf.begin() + n, nullptr, false);
    if (j.is_discarded() || !j.contains("fs") || !j["fs"].contains("read_only")) return -1;
    return j["fs"]["read_only"].get<bool>() ? 1 : 0;
  }
  return -1;
}

}  // namespace

unsigned long remount_flags(const std::string& mount_opts, const std::string& super_opts,
                            const std::vector<std::string>& asked) {
  unsigned long flags = MS_REMOUNT;
  for (const FlagName& f : kFlags)
    if (has_option(mount_opts, f.set) || has_option(super_opts, f.set)) flags |= f.bit;
  for (const std::string& o : asked)
    for (const FlagName& f : kFlags) {
      if (o == f.set) flags |= f.bit;
      if (f.clear && o == f.clear) flags &= ~f.bit;
    }
  return flags;
}

int remount(const std::string& mountpoint, const DaemonOptions& opts) {
  char resolved[PATH_MAX];
  if (!realpath(mountpoint.c_str(), resolved)) return say("remount: '" + mountpoint + "': " + strerror(errno));
  const std::string mnt = resolved;
  const MountEntry* entry = nullptr;
  const std::vector<MountEntry> mounts = read_mountinfo();
  for (const MountEntry& e : mounts)
    if (e.mountpoint == mnt) entry = &e;  // the topmost
  if (!entry || entry->fstype != "fuse.biofs") return say("remount: no biofs mount at '" + mnt + "'");
  const unsigned long flags = remount_flags(entry->mount_opts, entry->super_opts, opts.fuse_opts);
  // No data: FUSE takes no option at a remount (fuse_parse_param() ignores the old API's).
  if (mount(nullptr, mnt.c_str(), nullptr, flags, nullptr) != 0) {
    const int err = errno;
    std::string why = strerror(err);
    if (err == EBUSY && (flags & MS_RDONLY)) why += " (a file is open for writing)";
    if (err == EPERM) why += " (a remount needs CAP_SYS_ADMIN)";
    return say("remount of '" + mnt + "': " + why);
  }
  // The daemon follows within milliseconds (read_only_watch.h); a going-read-only one commits first.
  const int want = (flags & MS_RDONLY) ? 1 : 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int got; (got = daemon_read_only(mnt)) != want;) {
    if (std::chrono::steady_clock::now() > deadline)
      return say("remount of '" + mnt + "': the kernel's mount is " + (want ? "read-only" : "writable") +
                 " but the daemon has not followed in 30 s" + (got < 0 ? " (its stats cannot be read)" : ""));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return 0;
}

}  // namespace biofs
