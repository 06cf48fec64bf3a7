// Extent trees of any depth, as ext4's extents.c keeps them (a root, index levels, leaves of
// extents; the depth in the root, at most EXT4_MAX_EXTENT_DEPTH), shared by the filesystem
// (extent_map.cc) and fsck: reading a tree (e2fsck's scan_extent_node), the index levels a set of
// leaves needs, and the record of what changed in an in-memory map since it was written, so
// that a save rewrites the leaves that changed and not the whole tree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format.h"

namespace biofs {

struct ExtentLeaf {
  uint64_t blk;
  uint32_t nr;  // extents in it, at least one
};

// The blocks of a tree: its index nodes (root first; none when the root is the only leaf) and
// its leaves, left to right.
struct ExtentTreeShape {
  std::vector<uint64_t> index;
  std::vector<ExtentLeaf> leaves;
  uint64_t blocks() const { return index.size() + leaves.size(); }
  bool empty() const { return leaves.empty() && index.empty(); }
};

// Reads block `blk` with its header checked, or returns nullptr with *why set. The bytes need
// stay valid only until the next call.
using ExtentBlockReader = std::function<const uint8_t*(uint64_t blk, std::string* why)>;

// Walks the tree under `root`, appending its extents (in tree order) to *ext and its blocks to
// *shape. "" or why the tree cannot be used: a node's owner, level or count, a non-root node
// with no entries, or an index entry whose file block is not its child's first.
std::string read_extent_tree(uint64_t root, uint64_t owner, uint32_t block_size, const ExtentBlockReader& read,
                             std::vector<disk::Extent>* ext, ExtentTreeShape* shape);

// Index nodes per level over `leaves` leaves, each level packed `per` to a node, from level 1
// up to the root (one node); empty for a single leaf, which is the root itself.
std::vector<uint64_t> extent_index_levels(uint64_t leaves, uint32_t per);
uint64_t extent_index_blocks(uint64_t leaves, uint32_t per);

// Writes the index over `children` (each leaf's first file block and block number, left to
// right) into `blocks` (extent_index_blocks() of them: the root first, then each lower level
// left to right): emit(blk, level, entries, nr) fills one node.
using ExtentIndexEmit = std::function<void(uint64_t blk, uint16_t level, const disk::ExtentIndex* entries, size_t nr)>;
void write_extent_index(std::vector<disk::ExtentIndex> children, const std::vector<uint64_t>& blocks, uint32_t per,
                        const ExtentIndexEmit& emit);

// The node header after the block header: owner, level, entry count, capacity.
void init_extent_node(uint8_t* block, uint64_t owner, uint16_t level, size_t nr, uint32_t block_size);

// What changed in an in-memory extent map since it was last written: entries [lo, hi) of the
// map now replaced entries [lo, hi - delta) of the written one; those before are unchanged,
// those after only moved by `delta`. Each splice widens it to cover both.
struct ExtentEdits {
  size_t lo = SIZE_MAX, hi = 0;
  ptrdiff_t delta = 0;
  bool empty() const { return lo == SIZE_MAX; }
  void clear() { *this = ExtentEdits{}; }
  // Entries [at, at + old_n) of the map now became new_n entries.
  void splice(size_t at, size_t old_n, size_t new_n) {
    const ptrdiff_t d = ptrdiff_t(new_n) - ptrdiff_t(old_n);
    if (empty()) {
      lo = at;
      hi = at + new_n;
    } else {
      lo = std::min(lo, at);
      hi = size_t(ptrdiff_t(std::max(hi, at + old_n)) + d);
    }
    delta += d;
  }
};

}  // namespace biofs
