// An inode's extent map read and checked as the inode is (extent_load.h).
#include "extent_load.h"

#include <cerrno>
#include <string>
#include <vector>

#include "extent_tree.h"

namespace biofs {

using namespace disk;

// A damaged map could make a punch walk 2^32 blocks, or free metadata blocks.
static int check_extents(const std::vector<Extent>& v, const SuperBlock& sb) {
  uint64_t next = 0;
  for (const Extent& e : v) {
    if (e.len == 0 || (e.flags & ~EXTENT_UNWRITTEN) || e.lblk < next || e.lblk + e.len < e.lblk ||
        e.pblk < sb.data_start || e.pblk >= sb.block_count || e.len > sb.block_count - e.pblk)
      return -EUCLEAN;
    next = e.lblk + e.len;
  }
  return 0;
}

int load_extents(MetaCache& cache, const SuperBlock& sb, InodeObj* in) {
  in->ext.clear();
  in->tree = ExtentTreeShape{};
  in->edits.clear();
  if (in->d.flags & INODE_INLINE_DATA) return 0;
  if (!(in->d.flags & INODE_EXTENT_TREE)) {
    if (in->d.nr_extents > INLINE_EXTENTS) return -EUCLEAN;
    in->ext.assign(in->d.extents, in->d.extents + in->d.nr_extents);
    return check_extents(in->ext, sb);
  }
  int io_err = 0;
  const ExtentBlockReader read = [&](uint64_t blk, std::string* why) -> const uint8_t* {
    Buffer* b;
    if (int err = cache.get(blk, BLK_EXTENT, &b)) {
      io_err = err;
      *why = "extent tree block " + std::to_string(blk) + " cannot be read";
      return nullptr;
    }
    return b->data.data();
  };
  if (!read_extent_tree(in->d.extent_root, in->ino, sb.block_size, read, &in->ext, &in->tree).empty())
    return io_err ? io_err : -EUCLEAN;
  return check_extents(in->ext, sb);
}

}  // namespace biofs
