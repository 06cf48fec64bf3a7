// FUSE_SYNCFS, answered before libfuse sees it. The kernel sends it from sync(2) and syncfs(2)
// only to a fuseblk mount on this 6.18 kernel (fuse_sync_fs(), fs/fuse/inode.c: `fc->sync_fs`),
// and libfuse 3.18 has no operation for it: it answers ENOSYS, after which the kernel never
// sends it again. So the daemon's reads of /dev/fuse (a custom io) and the reactor's ring
// entries answer it themselves, with the filesystem's sync (commit and flush).
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace biofs {

// The filesystem's sync for a FUSE_SYNCFS: 0 or -errno. `userdata`: the session's.
using SyncFsFn = int (*)(void* userdata);

// Whether a request is FUSE_SYNCFS (a whole fuse_in_header of `len` bytes at `buf`).
bool is_syncfs_request(const void* buf, size_t len);

// A custom io's read of /dev/fuse (fuse_session_custom_io): the next request for libfuse; each
// FUSE_SYNCFS on the way is answered here (`sync` run, its reply written to `fd`).
ssize_t read_answering_syncfs(int fd, void* buf, size_t len, SyncFsFn sync, void* userdata);

}  // namespace biofs
