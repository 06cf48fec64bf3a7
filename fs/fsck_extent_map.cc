// Extent maps written as the filesystem writes them (inode.cc's save_extents: inline up to four
// extents, else a root over leaves), the twin of e2fsck/extents.c's rebuilding of extent trees:
// the maps pass 1 cut or found in an unusual shape, and directories that grow when lost+found
// takes entries.
#include <algorithm>
#include <cstring>

#include "fsck_internal.h"
#include "xattr_block.h"

namespace biofs::fsck {

using namespace disk;

// Writes inode `ino`'s map as the filesystem does (inline up to four extents, else a tree),
// reusing its tree blocks and allocating more if it must. false: no space.
bool Repair::set_map(uint64_t ino) {
  Inode& d = in(ino);
  auto& v = ext[ino];
  auto& t = tree[ino];
  const uint32_t per = extents_per_node(bs);
  const uint64_t need = extent_tree_blocks(v.size(), bs);
  while (t.size() > need) {
    unclaim(t.back(), 1);
    t.pop_back();
  }
  while (t.size() < need) {
    const uint64_t b = alloc_block(v.empty() ? 0 : v.back().pblk + v.back().len);
    if (!b) return false;
    t.push_back(b);
  }
  uint64_t data = 0;
  for (const Extent& e : v) data += e.len;
  d.blocks = data + t.size() + (xattr::block_of(d) ? 1 : 0);
  dirty_ino[ino] = 1;
  if (d.flags & INODE_INLINE_DATA) {  // the extent area holds data: no map at all
    d.flags &= ~INODE_EXTENT_TREE;
    return true;
  }
  std::memset(d.extents, 0, sizeof(d.extents));
  if (need == 0) {
    d.flags &= ~INODE_EXTENT_TREE;
    d.extent_root = 0;
    d.nr_extents = uint16_t(v.size());
    std::copy(v.begin(), v.end(), d.extents);
    return true;
  }
  auto node = [&](uint64_t blk, uint16_t level, uint16_t nr) {
    IoBuf b(bs);
    auto* n = reinterpret_cast<ExtentNode*>(b.data());
    n->h.magic = BLK_EXTENT;
    n->h.blocknr = blk;
    n->owner = ino;
    n->level = level;
    n->nr = nr;
    n->max = uint16_t(per);
    return b;
  };
  if (need == 1) {
    IoBuf b = node(t[0], 0, uint16_t(v.size()));
    std::memcpy(b.data() + sizeof(ExtentNode), v.data(), v.size() * sizeof(Extent));
    tree_out[t[0]] = std::move(b);
  } else {
    IoBuf root = node(t[0], 1, uint16_t(need - 1));
    auto* idx = reinterpret_cast<ExtentIndex*>(root.data() + sizeof(ExtentNode));
    for (size_t i = 0; i + 1 < need; i++) {
      const size_t first = i * per, count = std::min<size_t>(per, v.size() - first);
      idx[i] = ExtentIndex{v[first].lblk, t[i + 1], 0};
      IoBuf b = node(t[i + 1], 0, uint16_t(count));
      std::memcpy(b.data() + sizeof(ExtentNode), &v[first], count * sizeof(Extent));
      tree_out[t[i + 1]] = std::move(b);
    }
    tree_out[t[0]] = std::move(root);
  }
  d.flags |= INODE_EXTENT_TREE;
  d.extent_root = t[0];
  d.nr_extents = 0;
  return true;
}

// The maps pass 1 changed, written in the filesystem's shape: they only shrink, so nothing is
// allocated.
void Repair::rewrite_maps() {
  for (uint64_t ino = 1; ino <= sb.inode_count; ino++)
    if (map_dirty[ino] && state[ino] == LIVE) set_map(ino);
}

}  // namespace biofs::fsck
