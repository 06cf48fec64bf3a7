// Extent trees of any depth: reading one, and the index levels above a row of leaves.
#include "extent_tree.h"

#include <cstring>

namespace biofs {

using namespace disk;

namespace {

struct TreeWalk {
  uint64_t owner;
  uint32_t bs;
  const ExtentBlockReader& read;
  std::vector<Extent>* ext;
  ExtentTreeShape* shape;

  // The subtree at `blk` (the root, or a node at `level`); *first: its first file block.
  std::string node(uint64_t blk, bool root, uint16_t level, uint64_t* first) {
    std::string why;
    const uint8_t* b = read(blk, &why);
    if (!b) return why;
    const auto* n = reinterpret_cast<const ExtentNode*>(b);
    if (!extent_node_ok(*n, owner, bs, root) || (!root && (n->level != level || n->nr == 0)))
      return "extent tree block " + std::to_string(blk) + " is inconsistent";
    *first = 0;
    if (n->level == 0) {
      const auto* e = reinterpret_cast<const Extent*>(b + sizeof(ExtentNode));
      if (n->nr) *first = e[0].lblk;
      ext->insert(ext->end(), e, e + n->nr);
      shape->leaves.push_back(ExtentLeaf{blk, n->nr});
      return "";
    }
    shape->index.push_back(blk);
    const uint16_t below = uint16_t(n->level - 1);
    const auto* x = reinterpret_cast<const ExtentIndex*>(b + sizeof(ExtentNode));
    const std::vector<ExtentIndex> idx(x, x + n->nr);  // copied: the reader's bytes go with its next call
    for (size_t i = 0; i < idx.size(); i++) {
      if (i > 0 && idx[i].lblk <= idx[i - 1].lblk)
        return "extent index block " + std::to_string(blk) + " is not in file block order";
      uint64_t f;
      if (std::string w = node(idx[i].child, false, below, &f); !w.empty()) return w;
      if (f != idx[i].lblk)
        return "extent index block " + std::to_string(blk) + " names file block " + std::to_string(idx[i].lblk) +
               " for a child that starts at " + std::to_string(f);
      if (i == 0) *first = f;
    }
    return "";
  }
};

}  // namespace

std::string read_extent_tree(uint64_t root, uint64_t owner, uint32_t block_size, const ExtentBlockReader& read,
                             std::vector<Extent>* ext, ExtentTreeShape* shape) {
  TreeWalk w{owner, block_size, read, ext, shape};
  uint64_t first;
  return w.node(root, true, 0, &first);
}

std::vector<uint64_t> extent_index_levels(uint64_t leaves, uint32_t per) {
  std::vector<uint64_t> levels;
  for (uint64_t n = leaves; n > 1;) {
    n = (n + per - 1) / per;
    levels.push_back(n);
  }
  return levels;
}

uint64_t extent_index_blocks(uint64_t leaves, uint32_t per) {
  uint64_t total = 0;
  for (uint64_t n : extent_index_levels(leaves, per)) total += n;
  return total;
}

void write_extent_index(std::vector<ExtentIndex> children, const std::vector<uint64_t>& blocks, uint32_t per,
                        const ExtentIndexEmit& emit) {
  const std::vector<uint64_t> levels = extent_index_levels(children.size(), per);
  // blocks: the root, then each lower level; level l's nodes follow those of the levels above.
  size_t end = blocks.size();
  for (size_t l = 0; l < levels.size(); l++) {
    const size_t first_blk = end - levels[l];
    std::vector<ExtentIndex> parents;
    parents.reserve(levels[l]);
    for (size_t q = 0; q < levels[l]; q++) {
      const size_t from = q * per, nr = std::min<size_t>(per, children.size() - from);
      const uint64_t blk = blocks[first_blk + q];
      emit(blk, uint16_t(l + 1), &children[from], nr);
      parents.push_back(ExtentIndex{children[from].lblk, blk, 0});
    }
    children = std::move(parents);
    end = first_blk;
  }
}

void init_extent_node(uint8_t* block, uint64_t owner, uint16_t level, size_t nr, uint32_t block_size) {
  auto* n = reinterpret_cast<ExtentNode*>(block);
  n->owner = owner;
  n->level = level;
  n->nr = uint16_t(nr);
  n->max = uint16_t(extents_per_node(block_size));
  n->reserved = 0;
}

uint64_t disk::extent_tree_blocks(uint64_t extents, uint32_t block_size) {
  if (extents <= INLINE_EXTENTS) return 0;
  const uint32_t per = extents_per_node(block_size);
  const uint64_t leaves = (extents + per - 1) / per;
  return leaves + extent_index_blocks(leaves, per);
}

}  // namespace biofs
