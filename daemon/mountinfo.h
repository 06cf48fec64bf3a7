// /proc/self/mountinfo (proc(5)), read as the kernel writes it (show_mountinfo(), fs/proc_namespace.c,
// Linux 6.18): a remount changes a mount's line there, and poll() on the file says when.
#pragma once

#include <string>
#include <vector>

namespace biofs {

struct MountEntry {
  std::string dev;          // "MAJOR:MINOR" of the filesystem (st_dev of its files)
  std::string mountpoint;   // unescaped (the kernel writes a space as \040)
  std::string mount_opts;   // the mount's own flags: rw|ro, nosuid, nodev, noexec, atime...
  std::string fstype;       // "fuse.biofs"
  std::string source;
  std::string super_opts;   // the superblock's: rw|ro first, then the filesystem's own
};

// One line of mountinfo; false when it is not one.
bool parse_mountinfo_line(const std::string& line, MountEntry* out);
// Every mount this process sees, in the kernel's order (a later one covers an earlier one at
// the same mount point).
std::vector<MountEntry> read_mountinfo(const char* path = "/proc/self/mountinfo");
// Whether a comma-separated option list holds `opt` as a whole item.
bool has_option(const std::string& list, const std::string& opt);

}  // namespace biofs
