// Pass 1's reading of an inode's extent map, e2fsck/pass1.c's scan_extent_node: the inline
// extents (four at most), or a tree of any depth (extent_tree.cc), each block's place, header,
// checksum, owner, level and entry count checked. A map it cannot use clears the inode, or for
// the root makes a new empty one (pass1()).
#include "fs/extent_tree.h"
#include "fs/fsck/engine.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

using namespace disk;

// An extent tree block as fsck reads it: in the data area, readable, its header and checksum.
// "" or why not.
std::string Engine::tree_block(uint64_t blk, IoBuf* out) {
  if (!in_data(blk, 1)) return "extent tree block " + num(blk) + " is outside the data area";
  *out = IoBuf(bs);
  if (!read(blk, 1, out->data())) return "extent tree block " + num(blk) + " cannot be read";
  if (!block_header_ok(out->data(), bs, BLK_EXTENT, blk))
    return "extent tree block " + num(blk) + " fails its checksum or header check";
  return "";
}

// Reads inode `ino`'s extent map into ext/tree, and whether its tree has the shape the
// filesystem writes into odd_tree. "" or why it is unusable.
std::string Engine::read_map(uint64_t ino) {
  const Inode& d = in(ino);
  if (d.flags & INODE_INLINE_DATA) return "";
  if (!(d.flags & INODE_EXTENT_TREE)) {
    if (d.nr_extents > INLINE_EXTENTS) return "has " + num(d.nr_extents) + " inline extents";
    ext[ino].assign(d.extents, d.extents + d.nr_extents);
    return "";
  }
  IoBuf buf;
  const ExtentBlockReader read = [&](uint64_t blk, std::string* why) -> const uint8_t* {
    *why = tree_block(blk, &buf);
    return why->empty() ? buf.data() : nullptr;
  };
  ExtentTreeShape shape;
  if (std::string why = read_extent_tree(d.extent_root, ino, bs, read, &ext[ino], &shape); !why.empty()) {
    ext[ino].clear();
    return r.fatal ? "" : why;  // a device error ends the run; it says nothing of the map
  }
  tree[ino] = shape.index;
  for (const ExtentLeaf& l : shape.leaves) tree[ino].push_back(l.blk);
  odd_tree[ino] = ext[ino].size() <= INLINE_EXTENTS ||
                  shape.index.size() != extent_index_blocks(shape.leaves.size(), extents_per_node(bs));
  if (shape.index.size() > 1 && !(sb.feature_incompat & FEATURE_INCOMPAT_DEEP_EXTENTS)) {
    fix(false, "inode " + num(ino) + " has a deep extent tree: the superblock lacks the deep extent feature", "feature set");
    sb.feature_incompat |= FEATURE_INCOMPAT_DEEP_EXTENTS;
    sb_fix = true;
  }
  return "";
}

}  // namespace biofs::fsck
