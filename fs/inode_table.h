// The inodes in memory and on disk (fs/ext4/inode.c, ialloc.c, orphan.c): reading one from the
// table (checked), writing it back through the journal, creating it and freeing its slot, the
// orphan list, and the attributes a stat shows. When an inode is freed is evict.h's to say.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <mutex>
#include <shared_mutex>

#include "fs_info.h"

namespace biofs {

class InodeTable {
 public:
  explicit InodeTable(FsInfo& s) : s_(s) {}

  int getattr(uint64_t ino, struct stat* st);
  // getattr and the birth time (statx's STATX_BTIME: when the inode was made, kept on disk).
  int getattr(uint64_t ino, struct stat* st, struct timespec* btime);

  int iget(uint64_t ino, InodeObj** out);
  // The inode, taking the exclusive lock for a moment if it is not in memory yet.
  int iget_shared(std::shared_lock<FsLock>& shared, uint64_t ino, InodeObj** out);
  // The inode into its table block (dirty); `times_only`: nothing but its times changed, which
  // fdatasync need not commit.
  int isave(InodeObj* in, bool times_only = false);
  int new_inode(mode_t mode, uid_t uid, gid_t gid, InodeObj** out);
  // The slot of an inode nothing links or holds: zeroed but for its generation, its bit freed
  // (its blocks and xattr block are freed first: Evict::maybe_free_inode).
  void free_inode(InodeObj* in);
  int orphan_add(InodeObj* in);
  int orphan_remove(InodeObj* in);
  int save_superblock_journaled();
  void fill_stat(const InodeObj* in, struct stat* st) const;
  static void touch(disk::Inode& d, bool a, bool m, bool c);
  // Whether a read or a listing now would move the atime: as the mount's policy says
  // (atime.h), never on a read-only or failed filesystem.
  bool atime_due(const InodeObj* in) const;
  // touch_atime() for a read or a listing, under the exclusive lock. As there, nothing fails
  // for it: a time that cannot be saved leaves the metadata cache's error for the next commit.
  void accessed(InodeObj* in);

 private:
  FsInfo& s_;
};

}  // namespace biofs
