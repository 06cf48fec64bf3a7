// FITRIM: discarding the free space of a range of the filesystem, as fstrim(8) asks. The kernel
// twin is ext4_trim_fs() (fs/ext4/mballoc.c, Linux 6.18): the same checks of the range, the
// same reply (the bytes discarded), and free extents shorter than minlen left alone.
#pragma once

#include <cstdint>

#include "fs_info.h"

namespace biofs {

// struct fstrim_range, in bytes.
struct TrimRange {
  uint64_t start = 0, len = UINT64_MAX, minlen = 0;
};

// Discards every run of free blocks inside `r` at least r.minlen long. 0 with *trimmed (bytes
// discarded), -EINVAL for a range ext4 refuses, -EOPNOTSUPP for a device without discard,
// -EROFS on a read-only mount, or the error that stopped it.
int trim_fs(FsInfo& s, const TrimRange& r, uint64_t* trimmed);

}  // namespace biofs
