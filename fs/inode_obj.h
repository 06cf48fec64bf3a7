// An inode in memory (the kernel's struct inode with ext4's ext4_inode_info): the on-disk
// inode, its whole extent map, its directory index, and the counts of its users and of its
// I/O in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "blockcore/schedule.h"
#include "extent_tree.h"
#include "format.h"

namespace biofs {

struct InodeObj {
  uint64_t ino = 0;
  disk::Inode d{};
  // The whole extent map, sorted by lblk. Changed only by extent_map.cc, which notes each change
  // in `edits`, so that save_extents rewrites only the tree leaves that changed.
  std::vector<disk::Extent> ext;
  ExtentTreeShape tree;              // its tree blocks as last written (empty: inline)
  ExtentEdits edits;
  std::atomic<uint64_t> nlookup{0};  // raised under the shared lock by lookups, lowered under the exclusive one
  uint32_t open = 0;
  // The kernel's page cache of this file is stale once a direct-I/O writer (FUSE direct_io
  // bypasses and does not invalidate it) has had it open since the last buffered open.
  uint32_t direct_writers = 0;
  bool cache_stale = false;
  int8_t has_caps = -1;  // security.capability present: -1 not looked at yet, 0 no, 1 yes
  std::atomic<int> dio{0};           // file I/O in flight (inode->i_dio_count)
  // The journal transaction that last changed the inode (ext4's i_sync_tid), and the last
  // that changed what reading its data back needs: size, blocks, not only times
  // (i_datasync_tid). An inode loaded from disk may have changed in the running one.
  uint64_t sync_seq = 0, datasync_seq = 0;
  // On the orphan list: the inode before it (0: the superblock's head), kept in memory only,
  // so that taking it off is one step (ext4's in-memory s_orphan list beside the on-disk one).
  uint64_t orphan_prev = 0;
  // Directories: name -> entry, loaded on first use.
  struct DirLoc {
    uint64_t ino;
    uint64_t lblk;
    uint32_t off;
    uint8_t type;
  };
  std::unique_ptr<std::unordered_map<std::string, DirLoc>> dir;
  std::vector<uint32_t> dir_free;    // per directory block: free bytes (a hint)
};

// inode_dio_begin/end/wait (include/linux/fs.h, fs/inode.c).
inline void inode_dio_begin(InodeObj* in) { in->dio.fetch_add(1, std::memory_order_relaxed); }
inline void inode_dio_end(InodeObj* in) {
  if (in->dio.fetch_sub(1, std::memory_order_acq_rel) == 1) wake_up_var(in->dio);
}
inline void inode_dio_wait(InodeObj* in) { wait_var_event_zero(in->dio); }

}  // namespace biofs
