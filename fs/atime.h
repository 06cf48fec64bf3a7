// When reading a file or listing a directory moves its access time: the kernel's
// atime_needs_update() and relatime_need_update() (fs/inode.c, Linux 6.18). Over FUSE the kernel
// leaves atime to the server: fuse inodes are S_NOATIME, and after every READ and READDIR
// fuse_invalidate_atime() (fs/fuse/file.c, readdir.c) drops its cached atime and asks again.
#pragma once

#include <ctime>

#include "format.h"

namespace biofs {

// The mount's atime option: relatime (the kernel's default, and atime's), strictatime, noatime.
enum class AtimeMode { relatime, strictatime, noatime };

struct AtimePolicy {
  AtimeMode mode = AtimeMode::relatime;
  bool nodiratime = false;  // directories keep their atime whatever `mode` says
};

// Whether an access at `now` moves the inode's atime. The caller decides the rest of
// touch_atime(): nothing on a read-only or failed filesystem.
bool atime_needs_update(const disk::Inode& d, const AtimePolicy& policy, const struct timespec& now);

}  // namespace biofs
