// Free-space and inode allocation over the on-disk bitmaps (through the metadata cache, so
// every change is journaled). A freed block stays marked in use until the transaction that
// freed it commits: reusing it earlier could let new data overwrite a block the committed
// metadata still points at.
#pragma once

#include <cstdint>
#include <vector>

#include "format.h"
#include "meta_cache.h"

namespace biofs {

class FsAllocator {
 public:
  FsAllocator(MetaCache& cache, const disk::SuperBlock& sb) : cache_(cache), sb_(sb) {}

  // Counts the free blocks and inodes from the bitmaps. 0 or -errno.
  int load();

  // Finds up to `want` contiguous free blocks, searching from `goal`, marks them used.
  // 0 with *start/*got set, or -ENOSPC / -errno.
  int alloc_blocks(uint64_t goal, uint64_t want, uint64_t* start, uint64_t* got);
  void free_blocks_later(uint64_t start, uint64_t n);
  // Clears the bits of blocks freed since the last call (just before a commit). 0 or -errno.
  int release_pending();

  int alloc_inode(uint64_t* ino);
  int free_inode(uint64_t ino);

  uint64_t free_blocks() const { return free_blocks_; }
  uint64_t free_inodes() const { return free_inodes_; }
  uint64_t pending_blocks() const { return pending_count_; }
  // At most how many bitmap blocks release_pending() will dirty.
  uint64_t pending_bitmap_blocks() const;

 private:
  int set_bits(uint64_t bitmap_start, uint32_t magic, uint64_t first, uint64_t n, bool used);

  MetaCache& cache_;
  const disk::SuperBlock& sb_;
  uint64_t free_blocks_ = 0, free_inodes_ = 0;
  uint64_t next_block_ = 0, next_inode_ = 0;  // where the last search ended
  std::vector<std::pair<uint64_t, uint64_t>> pending_;
  uint64_t pending_count_ = 0;
};

}  // namespace biofs
