// Pass 1's reading of an inode's extent map, e2fsck/pass1.c's scan_extent_node: the inline
// extents (four at most), or a tree of a root and at most one level of leaves, each block's
// place, header, checksum, owner, level and entry count checked. A map it cannot use clears the
// inode, or for the root makes a new empty one (pass1()).
#include "fsck_internal.h"

namespace biofs::fsck {

using namespace disk;

// An extent tree block as fsck reads it (the root, or a leaf under it): header, checksum, owner,
// level, count. "" or why not.
std::string Repair::tree_block(uint64_t ino, uint64_t blk, bool root, IoBuf* out) {
  if (!in_data(blk, 1)) return "extent tree block " + num(blk) + " is outside the data area";
  *out = IoBuf(bs);
  if (!read(blk, 1, out->data())) return "extent tree block " + num(blk) + " cannot be read";
  const auto* n = reinterpret_cast<const ExtentNode*>(out->data());
  if (!block_header_ok(out->data(), bs, BLK_EXTENT, blk))
    return "extent tree block " + num(blk) + " fails its checksum or header check";
  if (!extent_node_ok(*n, ino, bs, root))
    return "extent tree block " + num(blk) + " is inconsistent";
  return "";
}

// Reads inode `ino`'s extent map into ext/tree. "" or why it is unusable.
std::string Repair::read_map(uint64_t ino) {
  const Inode& d = in(ino);
  if (d.flags & INODE_INLINE_DATA) return "";
  if (!(d.flags & INODE_EXTENT_TREE)) {
    if (d.nr_extents > INLINE_EXTENTS) return "has " + num(d.nr_extents) + " inline extents";
    ext[ino].assign(d.extents, d.extents + d.nr_extents);
    return "";
  }
  IoBuf root;
  if (std::string why = tree_block(ino, d.extent_root, true, &root); !why.empty()) return why;
  if (r.fatal) return "";
  tree[ino].push_back(d.extent_root);
  const auto* rn = reinterpret_cast<const ExtentNode*>(root.data());
  auto leaf = [&](const IoBuf& b) {
    const auto* n = reinterpret_cast<const ExtentNode*>(b.data());
    const auto* e = reinterpret_cast<const Extent*>(b.data() + sizeof(ExtentNode));
    ext[ino].insert(ext[ino].end(), e, e + n->nr);
  };
  if (rn->level == 0) {
    leaf(root);
    return "";
  }
  const auto* idx = reinterpret_cast<const ExtentIndex*>(root.data() + sizeof(ExtentNode));
  for (uint16_t i = 0; i < rn->nr; i++) {
    IoBuf lb;
    if (std::string why = tree_block(ino, idx[i].child, false, &lb); !why.empty()) return why;
    if (r.fatal) return "";
    tree[ino].push_back(idx[i].child);
    leaf(lb);
  }
  return "";
}

}  // namespace biofs::fsck
