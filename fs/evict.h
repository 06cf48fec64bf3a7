// The end of an inode's life (fs/inode.c's iput_final() and evict(), ext4_evict_inode(), and
// ext4_orphan_cleanup() in fs/ext4/orphan.c, v6.18): when nothing holds an inode any more it
// leaves memory, and if no name links it either its blocks, its xattr block and its slot are
// freed; an unlinked inode still open or looked up waits on the orphan list, which the next
// mount empties if a crash came first.
#pragma once

#include <cstdint>

#include "extent_map.h"
#include "fs_info.h"
#include "inode_table.h"
#include "xattr.h"

namespace biofs {

class Evict {
 public:
  Evict(FsInfo& s, InodeTable& itable, ExtentMap& extents, Xattr& xattrs)
      : s_(s), itable_(itable), extents_(extents), xattrs_(xattrs) {}

  // The kernel drops `nlookup` of the lookups it counted; the inode goes when none are left.
  void forget(uint64_t ino, uint64_t nlookup);
  // nlink 0, no lookups, not open: free everything. nlink 0 but still in use: put it on the
  // orphan list, so a crash before the last close frees it at the next mount. Otherwise the
  // inode, if nothing holds it, only leaves memory.
  void maybe_free_inode(InodeObj* in);
  int free_orphans();  // at mount: frees what a crash left on the orphan list

 private:
  FsInfo& s_;
  InodeTable& itable_;
  ExtentMap& extents_;
  Xattr& xattrs_;
};

}  // namespace biofs
