// An inode's extent map: looking up a file block, adding a mapping (merged with its
// neighbours), unmapping a range, allocating blocks for the holes in a range; and the map on
// disk, inline in the inode or an extent tree (fs/ext4/extents.c).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "fs_info.h"
#include "inode_table.h"

namespace biofs {

class ExtentMap {
 public:
  ExtentMap(FsInfo& s, InodeTable& itable) : s_(s), itable_(itable) {}

  // Physical block of file block lblk, 0 for a hole; *run: blocks mapped (or unmapped) from it.
  uint64_t map_block(const InodeObj* in, uint64_t lblk, uint64_t* run, bool* unwritten) const;
  void insert_extent(InodeObj* in, uint64_t lblk, uint64_t pblk, uint64_t len, uint32_t flags = 0);
  // Sets or clears EXTENT_UNWRITTEN over the mapped parts of [lblk, lblk + count) (cleared: the
  // range was just written; set: fallocate's zero range). Returns whether anything changed.
  bool set_unwritten(InodeObj* in, uint64_t lblk, uint64_t count, bool unwritten);
  // Unmaps [lblk, lblk + count) and frees its blocks (after the next commit).
  void punch_extents(InodeObj* in, uint64_t lblk, uint64_t count);
  void splice_extents(InodeObj* in, size_t lo, size_t hi, const disk::Extent* with, size_t n);
  // Moves every mapping at or after file block `from` by `by` blocks (ext4_ext_shift_extents):
  // left (by < 0) once a collapse has unmapped the blocks before them, right for an insert, which
  // first splits an extent that straddles `from` (ext4_split_extent_at).
  void shift_extents(InodeObj* in, uint64_t from, int64_t by);
  // Fills the holes in a range with new blocks (marked unwritten when `unwritten`).
  // `added`, if given, receives the (lblk, count) ranges newly mapped.
  int allocate_range(InodeObj* in, uint64_t lblk, uint64_t count, bool unwritten = false,
                     std::vector<std::pair<uint64_t, uint64_t>>* added = nullptr);

  int save_extents(InodeObj* in);   // extent map into the inode or its tree, then isave
  int save_extent_tree(InodeObj* in);

 private:
  FsInfo& s_;
  InodeTable& itable_;
};

}  // namespace biofs
