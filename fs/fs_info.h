// The mount's shared state, which every part of the filesystem holds a reference to: the
// device, the superblock, the lock, the in-memory inodes, the allocator, the journal and its
// metadata cache (the kernel's struct super_block with ext4's ext4_sb_info). The parts
// themselves are not here: each is given the parts it calls when it is made (filesystem.h),
// and only parts made before it, so no two call each other.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

#include "allocator.h"
#include "atime.h"
#include "block_io.h"
#include "commit_policy.h"
#include "end_io_work.h"
#include "format.h"
#include "fs_lock.h"
#include "inode_obj.h"
#include "journal.h"
#include "meta_cache.h"

namespace biofs {

struct MountOptions {
  size_t meta_cache_bytes = 256u << 20;
  unsigned commit_interval_s = 5;  // background commit of metadata; 0: only on fsync/unmount
  bool read_only = false;  // at mount; FsInfo::read_only follows remounts
  bool norecovery = false;  // with read_only: the journal is not replayed (ext4's norecovery, noload)
  AtimePolicy atime;  // relatime, strictatime or noatime; nodiratime
  // Called, under the filesystem's lock, when an inode's attributes change where the kernel
  // does not expect it (a write by a writer without fsetid drops the set-id bits; an open moves
  // the atime): whoever caches them (the kernel, over FUSE) must drop its copy.
  std::function<void(uint64_t ino)> attrs_changed;
};

struct FsInfo {
  FsInfo(BlockIo& dev, const disk::SuperBlock& super_block, const MountOptions& options)
      : io(dev), sb(super_block), opts(options), journal(io, sb), cache(io, sb, journal, options.meta_cache_bytes),
        alloc(cache, sb), commit(journal, cache, alloc), bs(super_block.block_size), read_only(options.read_only) {}
  FsInfo(const FsInfo&) = delete;
  FsInfo& operator=(const FsInfo&) = delete;

  BlockIo& io;
  disk::SuperBlock sb;
  MountOptions opts;
  Journal journal;
  MetaCache cache;
  FsAllocator alloc;
  CommitPolicy commit;  // when the running transaction commits; whether writing has stopped
  uint32_t bs;
  // Nothing is written: mounted or remounted read-only (Super::set_read_only). Changed under
  // the exclusive lock; read under either.
  std::atomic<bool> read_only;
  FsLock lock;
  std::unordered_map<uint64_t, std::unique_ptr<InodeObj>> inodes;
  int replayed = 0;
  bool mounted = false;
  std::unique_ptr<EndIoWork> end_io;  // unwritten-extent conversion after the data (writable mounts)
};

}  // namespace biofs
