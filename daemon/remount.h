// `mount -o remount,ro|rw MOUNTPOINT` on a biofs mount. mount(8) hands it to the type's helper
// (mount.fuse3, or a mount.fuse.biofs), which runs `biofs SOURCE MOUNTPOINT -o ...,remount,...`:
// no daemon is started; this process changes the mount with mount(2) MS_REMOUNT, as mount(8)
// itself does for a filesystem without a helper, and waits for the daemon serving it to follow
// (read_only_watch.h). Going read-only, the daemon has then committed and written its
// superblock clean, as ext4's remount has when mount(8) returns.
#pragma once

#include <string>

#include "mount_options.h"

namespace biofs {

// The mount's flags after a remount: the kernel's MS_* bits for mount(2).
// `mount_opts` and `super_opts`: the mount's two option fields in mountinfo now; `asked`: the
// -o list's flags in their order (ro, rw, nosuid, suid, nodev, dev, noexec, exec, sync, async,
// dirsync; others are ignored): every flag the list does not name stays as it is, the atime
// flags included (the kernel keeps them when none is given).
unsigned long remount_flags(const std::string& mount_opts, const std::string& super_opts,
                            const std::vector<std::string>& asked);

// Remounts `mountpoint` as `opts` asks. 0, or mount(8)'s 32 having printed one line.
int remount(const std::string& mountpoint, const DaemonOptions& opts);

}  // namespace biofs
