// Extent maps written in a shape the filesystem writes (fs/extent_map.cc: inline up to four
// extents, else a tree; here its leaves packed full), the twin of e2fsck/extents.c's rebuilding of extent trees:
// the maps pass 1 cut or found in an unusual shape, and directories that grow when lost+found
// takes entries.
#include <algorithm>
#include <cstring>

#include "fs/extent_tree.h"
#include "fs/fsck/engine.h"
#include "fs/io_buf.h"
#include "fs/xattr_block.h"

namespace biofs::fsck {

using namespace disk;

// Writes inode `ino`'s map as the filesystem does (inline up to four extents, else a tree),
// reusing its tree blocks and allocating more if it must. false: no space.
bool Engine::set_map(uint64_t ino) {
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
  // t: the index blocks (root first), then the leaves, packed full.
  const uint64_t leaves = (v.size() + per - 1) / per, index_n = need - leaves;
  auto node = [&](uint64_t blk, uint16_t level, size_t nr, const void* entries, size_t entry_size) {
    IoBuf b(bs);
    auto* n = reinterpret_cast<ExtentNode*>(b.data());
    n->h.magic = BLK_EXTENT;
    n->h.blocknr = blk;
    init_extent_node(b.data(), ino, level, nr, bs);
    std::memcpy(b.data() + sizeof(ExtentNode), entries, nr * entry_size);
    tree_out[blk] = std::move(b);
  };
  std::vector<ExtentIndex> children;
  for (uint64_t l = 0; l < leaves; l++) {
    const size_t first = l * per, count = std::min<size_t>(per, v.size() - first);
    node(t[index_n + l], 0, count, &v[first], sizeof(Extent));
    children.push_back(ExtentIndex{v[first].lblk, t[index_n + l], 0});
  }
  const std::vector<uint64_t> index(t.begin(), t.begin() + index_n);
  write_extent_index(std::move(children), index, per, [&](uint64_t blk, uint16_t level, const ExtentIndex* e, size_t nr) {
    node(blk, level, nr, e, sizeof(ExtentIndex));
  });
  if (index_n > 1 && !(sb.feature_incompat & FEATURE_INCOMPAT_DEEP_EXTENTS)) {
    sb.feature_incompat |= FEATURE_INCOMPAT_DEEP_EXTENTS;
    sb_fix = true;
  }
  d.flags |= INODE_EXTENT_TREE;
  d.extent_root = t[0];
  d.nr_extents = 0;
  return true;
}

// The maps pass 1 changed, written in the filesystem's shape: they only shrink, so nothing is
// allocated.
void Engine::rewrite_maps() {
  for (uint64_t ino = 1; ino <= sb.inode_count; ino++)
    if (map_dirty[ino] && state[ino] == LIVE) set_map(ino);
}

}  // namespace biofs::fsck
