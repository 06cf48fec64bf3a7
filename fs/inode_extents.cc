// An inode's extent map on disk: inline in the inode up to INLINE_EXTENTS, else an extent tree
// (extent_tree.h) of which a save rewrites only the leaves the map's edits touched, splitting
// a leaf that overflows and folding in a neighbour when one runs low, then the index above
// them: ext4's ext4_ext_insert_extent / ext4_ext_split / ext4_ext_rm_leaf, done on a whole
// map kept in memory.
#include <cerrno>
#include <cstring>

#include "filesystem.h"

namespace biofs {

using namespace disk;

// The extent code trusts a map to be sorted, non-overlapping, non-empty and inside the data
// area (a damaged one could make a punch walk 2^32 blocks, or free metadata blocks).
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

int Filesystem::load_extents(InodeObj* in) {
  in->ext.clear();
  in->tree = ExtentTreeShape{};
  in->edits.clear();
  if (in->d.flags & INODE_INLINE_DATA) return 0;
  if (!(in->d.flags & INODE_EXTENT_TREE)) {
    if (in->d.nr_extents > INLINE_EXTENTS) return -EUCLEAN;
    in->ext.assign(in->d.extents, in->d.extents + in->d.nr_extents);
    return check_extents(in->ext, sb_);
  }
  int io_err = 0;
  const ExtentBlockReader read = [&](uint64_t blk, std::string* why) -> const uint8_t* {
    Buffer* b;
    if (int err = cache_.get(blk, BLK_EXTENT, &b)) {
      io_err = err;
      *why = "extent tree block " + std::to_string(blk) + " cannot be read";
      return nullptr;
    }
    return b->data.data();
  };
  if (!read_extent_tree(in->d.extent_root, in->ino, bs_, read, &in->ext, &in->tree).empty())
    return io_err ? io_err : -EUCLEAN;
  return check_extents(in->ext, sb_);
}

int Filesystem::save_extents(InodeObj* in) {
  Inode& d = in->d;
  if (d.flags & INODE_INLINE_DATA) return isave(in);  // the extent area holds data
  if (in->ext.size() > INLINE_EXTENTS) {
    if (int err = save_extent_tree(in)) return err;
  } else {
    for (uint64_t b : in->tree.index) alloc_.free_blocks_later(b, 1);
    for (const ExtentLeaf& l : in->tree.leaves) alloc_.free_blocks_later(l.blk, 1);
    d.blocks -= in->tree.blocks();
    in->tree = ExtentTreeShape{};
    d.flags &= ~INODE_EXTENT_TREE;
    d.extent_root = 0;
    d.nr_extents = uint16_t(in->ext.size());
    std::memset(d.extents, 0, sizeof(d.extents));
    std::copy(in->ext.begin(), in->ext.end(), d.extents);
  }
  in->edits.clear();
  return isave(in);
}

// Rewrites the run of leaves the edits since the last save touched, as many leaves as its
// extents now need (evenly filled), then the index over all leaves. On failure nothing has
// changed: the blocks the new shape needs are allocated before anything is written.
int Filesystem::save_extent_tree(InodeObj* in) {
  Inode& d = in->d;
  ExtentTreeShape& t = in->tree;
  const std::vector<Extent>& ext = in->ext;
  const uint32_t per = extents_per_node(bs_);
  // Leaves [i, j) are rewritten to hold the map's entries [from, from + count).
  size_t i = 0, j = t.leaves.size(), from = 0, count = ext.size();
  if (!t.leaves.empty()) {
    const ExtentEdits& e = in->edits;
    if (e.empty()) return 0;
    const size_t old_lo = e.lo, old_hi = size_t(ptrdiff_t(e.hi) - e.delta);  // in the map as written
    while (i + 1 < t.leaves.size() && from + t.leaves[i].nr <= old_lo) from += t.leaves[i++].nr;
    size_t end = from + t.leaves[i].nr;
    for (j = i + 1; j < t.leaves.size() && end < old_hi; j++) end += t.leaves[j].nr;
    count = size_t(ptrdiff_t(end - from) + e.delta);
    if (count < per / 2) {  // running low: take a neighbour in
      if (j < t.leaves.size()) {
        count += t.leaves[j++].nr;
      } else if (i > 0) {
        i--;
        from -= t.leaves[i].nr;
        count += t.leaves[i].nr;
      }
    }
  }
  const size_t old_run = j - i, run = (count + per - 1) / per;
  const size_t leaves = t.leaves.size() - old_run + run;
  const std::vector<uint64_t> levels = extent_index_levels(leaves, per);
  if (levels.size() > MAX_EXTENT_DEPTH) return -EFBIG;
  size_t index_n = 0;
  for (uint64_t l : levels) index_n += l;
  // Every block rewritten is logged: a save the journal could not hold would wedge its commit.
  if (run + index_n > journal_.capacity() / 4) return -ENOSPC;
  if (levels.size() >= 2 && !(sb_.feature_incompat & FEATURE_INCOMPAT_DEEP_EXTENTS)) {
    sb_.feature_incompat |= FEATURE_INCOMPAT_DEEP_EXTENTS;  // first deep tree on this image
    if (int err = save_superblock_journaled()) return err;
  }
  std::vector<uint64_t> fresh;
  const size_t want = (run > old_run ? run - old_run : 0) + (index_n > t.index.size() ? index_n - t.index.size() : 0);
  const uint64_t goal = i < t.leaves.size() ? t.leaves[i].blk : ext.back().pblk + ext.back().len;
  while (fresh.size() < want) {
    uint64_t start, got;
    if (int err = alloc_.alloc_blocks(goal, want - fresh.size(), &start, &got)) {
      for (uint64_t b : fresh) alloc_.free_blocks_later(b, 1);
      return err;
    }
    for (uint64_t b = start; b < start + got; b++) fresh.push_back(b);
  }
  d.blocks += fresh.size();
  size_t next_fresh = 0;
  // The run's new leaves, in the old run's blocks first.
  std::vector<ExtentLeaf> now(run);
  for (size_t q = 0, pos = from; q < run; q++) {
    now[q].blk = q < old_run ? t.leaves[i + q].blk : fresh[next_fresh++];
    now[q].nr = uint32_t(count / run + (q < count % run ? 1 : 0));
    Buffer* b = cache_.get_new(now[q].blk, BLK_EXTENT);
    init_extent_node(b->data.data(), in->ino, 0, now[q].nr, bs_);
    std::memcpy(b->data.data() + sizeof(ExtentNode), &ext[pos], now[q].nr * sizeof(Extent));
    pos += now[q].nr;
  }
  for (size_t q = run; q < old_run; q++) {
    alloc_.free_blocks_later(t.leaves[i + q].blk, 1);
    d.blocks--;
  }
  t.leaves.erase(t.leaves.begin() + i, t.leaves.begin() + j);
  t.leaves.insert(t.leaves.begin() + i, now.begin(), now.end());
  // The index: every node rewritten (a few blocks: one per `per` leaves, and the levels above).
  while (t.index.size() > index_n) {
    alloc_.free_blocks_later(t.index.back(), 1);
    t.index.pop_back();
    d.blocks--;
  }
  while (t.index.size() < index_n) t.index.push_back(fresh[next_fresh++]);
  if (index_n) {
    std::vector<ExtentIndex> children;
    children.reserve(t.leaves.size());
    size_t pos = 0;
    for (const ExtentLeaf& l : t.leaves) {
      children.push_back(ExtentIndex{ext[pos].lblk, l.blk, 0});
      pos += l.nr;
    }
    write_extent_index(std::move(children), t.index, per,
                       [&](uint64_t blk, uint16_t level, const ExtentIndex* entries, size_t nr) {
                         Buffer* b = cache_.get_new(blk, BLK_EXTENT);
                         init_extent_node(b->data.data(), in->ino, level, nr, bs_);
                         std::memcpy(b->data.data() + sizeof(ExtentNode), entries, nr * sizeof(ExtentIndex));
                       });
  }
  d.flags |= INODE_EXTENT_TREE;
  d.extent_root = index_n ? t.index[0] : t.leaves[0].blk;
  d.nr_extents = 0;
  std::memset(d.extents, 0, sizeof(d.extents));
  return 0;
}

}  // namespace biofs
