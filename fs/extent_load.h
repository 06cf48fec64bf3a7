// An inode's extent map read into memory when the inode is (ext4_iget()'s ext4_ext_check_inode,
// fs/ext4/inode.c and extents.c, v6.18): inline in the inode or an extent tree through the
// metadata cache, then checked, since the extent code trusts what it holds.
#pragma once

#include "format.h"
#include "inode_obj.h"
#include "meta_cache.h"

namespace biofs {

// Fills in->ext and in->tree from in->d. 0; -EUCLEAN for a map that is not sorted,
// non-overlapping, non-empty and inside the data area; or the cache's -errno.
int load_extents(MetaCache& cache, const disk::SuperBlock& sb, InodeObj* in);

}  // namespace biofs
