// Extent maps: looking up a file block, adding a mapping (merged with its neighbours),
// unmapping a range, and allocating blocks for the holes in a range.
#include "extent_map.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "inode_table.h"

namespace biofs {

using namespace disk;

uint64_t ExtentMap::map_block(const InodeObj* in, uint64_t lblk, uint64_t* run, bool* unwritten) const {
  const auto& v = in->ext;
  // The last extent starting at or before lblk.
  auto it = std::upper_bound(v.begin(), v.end(), lblk, [](uint64_t l, const Extent& e) { return l < e.lblk; });
  if (it != v.begin()) {
    const Extent& e = *std::prev(it);
    if (lblk < e.lblk + e.len) {
      *run = e.lblk + e.len - lblk;
      if (unwritten) *unwritten = e.flags & EXTENT_UNWRITTEN;
      return e.pblk + (lblk - e.lblk);
    }
  }
  *run = it == v.end() ? UINT64_MAX - lblk : it->lblk - lblk;
  if (unwritten) *unwritten = false;
  return 0;
}

void ExtentMap::insert_extent(InodeObj* in, uint64_t lblk, uint64_t pblk, uint64_t len, uint32_t flags) {
  auto& v = in->ext;
  auto it = std::upper_bound(v.begin(), v.end(), lblk, [](uint64_t l, const Extent& e) { return l < e.lblk; });
  const size_t at = size_t(it - v.begin());
  if (flags) {  // unwritten extents are kept apart, merged only by set_unwritten
    v.insert(it, Extent{lblk, pblk, uint32_t(len), flags});
    in->edits.splice(at, 0, 1);
    return;
  }
  // Merge with the previous extent when both sides are contiguous.
  if (it != v.begin()) {
    Extent& p = *std::prev(it);
    if (p.lblk + p.len == lblk && p.pblk + p.len == pblk && p.flags == 0 && p.len + len <= UINT32_MAX) {
      p.len += uint32_t(len);
      if (it != v.end() && p.lblk + p.len == it->lblk && p.pblk + p.len == it->pblk && it->flags == 0 &&
          uint64_t(p.len) + it->len <= UINT32_MAX) {
        p.len += it->len;
        v.erase(it);
        in->edits.splice(at - 1, 2, 1);
      } else {
        in->edits.splice(at - 1, 1, 1);
      }
      return;
    }
  }
  if (it != v.end() && lblk + len == it->lblk && pblk + len == it->pblk && it->flags == 0 &&
      it->len + len <= UINT32_MAX) {
    it->lblk = lblk;
    it->pblk = pblk;
    it->len += uint32_t(len);
    in->edits.splice(at, 1, 1);
    return;
  }
  v.insert(it, Extent{lblk, pblk, uint32_t(len), 0});
  in->edits.splice(at, 0, 1);
}

void ExtentMap::punch_extents(InodeObj* in, uint64_t lblk, uint64_t count) {
  inode_dio_wait(in);  // a block freed here may be reused: nothing may still be reading or writing it
  const uint64_t end = count > UINT64_MAX - lblk ? UINT64_MAX : lblk + count;
  std::vector<Extent>& ext = in->ext;
  // Sorted and not overlapping: the extents meeting the range are one run [lo, hi), which
  // becomes at most a head and a tail piece.
  const size_t lo = size_t(std::partition_point(ext.begin(), ext.end(),
                                                [&](const Extent& e) { return e.lblk + e.len <= lblk; }) - ext.begin());
  size_t hi = lo;
  Extent pieces[2];
  size_t kept = 0;
  for (; hi < ext.size() && ext[hi].lblk < end; hi++) {
    const Extent& e = ext[hi];
    const uint64_t e_end = e.lblk + e.len;
    const uint64_t cut_from = std::max(e.lblk, lblk), cut_to = std::min(e_end, end);
    s_.alloc.free_blocks_later(e.pblk + (cut_from - e.lblk), cut_to - cut_from);
    in->d.blocks -= cut_to - cut_from;
    if (e.lblk < cut_from) pieces[kept++] = Extent{e.lblk, e.pblk, uint32_t(cut_from - e.lblk), e.flags};
    if (cut_to < e_end) pieces[kept++] = Extent{cut_to, e.pblk + (cut_to - e.lblk), uint32_t(e_end - cut_to), e.flags};
  }
  if (hi == lo) return;
  splice_extents(in, lo, hi, pieces, kept);
}

// Rewrites only the run of extents that meet [lblk, lblk + count), with one neighbour on each
// side so that pieces which become alike merge with them: a random write into a large
// fallocated file costs a search and one splice of the map, not a pass over all of it.
bool ExtentMap::set_unwritten(InodeObj* in, uint64_t lblk, uint64_t count, bool unwritten) {
  const uint32_t want = unwritten ? EXTENT_UNWRITTEN : 0;
  const uint64_t end = lblk + count;
  std::vector<Extent>& ext = in->ext;
  // Sorted and not overlapping: the extents meeting the range are one run [lo, hi).
  size_t lo = size_t(std::partition_point(ext.begin(), ext.end(),
                                          [&](const Extent& e) { return e.lblk + e.len <= lblk; }) - ext.begin());
  size_t hi = lo;
  bool differs = false;
  for (; hi < ext.size() && ext[hi].lblk < end; hi++) differs |= (ext[hi].flags & EXTENT_UNWRITTEN) != want;
  if (!differs) return false;
  if (lo > 0) lo--;
  if (hi < ext.size()) hi++;
  std::vector<Extent> out;
  out.reserve(hi - lo + 2);
  const auto add = [&](const Extent& e) {  // merges with the previous piece when contiguous and alike
    if (!out.empty()) {
      Extent& p = out.back();
      if (p.lblk + p.len == e.lblk && p.pblk + p.len == e.pblk && p.flags == e.flags &&
          uint64_t(p.len) + e.len <= UINT32_MAX) {
        p.len += e.len;
        return;
      }
    }
    out.push_back(e);
  };
  for (size_t k = lo; k < hi; k++) {
    const Extent& e = ext[k];
    const uint64_t e_end = e.lblk + e.len;
    if ((e.flags & EXTENT_UNWRITTEN) == want || e_end <= lblk || e.lblk >= end) {
      add(e);
      continue;
    }
    const uint64_t a = std::max(e.lblk, lblk), b = std::min(e_end, end);
    if (e.lblk < a) add(Extent{e.lblk, e.pblk, uint32_t(a - e.lblk), e.flags});
    add(Extent{a, e.pblk + (a - e.lblk), uint32_t(b - a), (e.flags & ~EXTENT_UNWRITTEN) | want});
    if (b < e_end) add(Extent{b, e.pblk + (b - e.lblk), uint32_t(e_end - b), e.flags});
  }
  splice_extents(in, lo, hi, out.data(), out.size());
  return true;
}

// Replaces entries [lo, hi) of the map with `n` others: overwrites the old run, then inserts or
// erases the difference (one move of the tail), and notes the change for save_extents.
void ExtentMap::splice_extents(InodeObj* in, size_t lo, size_t hi, const Extent* with, size_t n) {
  std::vector<Extent>& ext = in->ext;
  const size_t old_n = hi - lo, common = std::min(old_n, n);
  std::copy(with, with + common, ext.begin() + lo);
  if (n > old_n) ext.insert(ext.begin() + hi, with + common, with + n);
  else ext.erase(ext.begin() + lo + common, ext.begin() + hi);
  in->edits.splice(lo, old_n, n);
}

void ExtentMap::shift_extents(InodeObj* in, uint64_t from, int64_t by) {
  std::vector<Extent>& ext = in->ext;
  size_t lo = size_t(std::partition_point(ext.begin(), ext.end(),
                                          [&](const Extent& e) { return e.lblk + e.len <= from; }) - ext.begin());
  if (lo == ext.size()) return;
  std::vector<Extent> moved;
  moved.reserve(ext.size() - lo + 1);
  size_t k = lo;
  if (ext[lo].lblk < from) {  // straddles `from`: the head stays, the tail moves
    const Extent& e = ext[lo];
    const uint64_t head = from - e.lblk;
    moved.push_back(Extent{e.lblk, e.pblk, uint32_t(head), e.flags});
    moved.push_back(Extent{uint64_t(int64_t(from) + by), e.pblk + head, uint32_t(e.len - head), e.flags});
    k++;
  }
  for (; k < ext.size(); k++) {
    Extent e = ext[k];
    e.lblk = uint64_t(int64_t(e.lblk) + by);
    moved.push_back(e);
  }
  splice_extents(in, lo, ext.size(), moved.data(), moved.size());
}

int ExtentMap::allocate_range(InodeObj* in, uint64_t lblk, uint64_t count, bool unwritten,
                              std::vector<std::pair<uint64_t, uint64_t>>* added_out) {
  const uint64_t end = lblk + count;
  std::vector<std::pair<uint64_t, uint64_t>> added;  // to undo on failure
  for (uint64_t l = lblk; l < end;) {
    uint64_t run;
    if (map_block(in, l, &run, nullptr)) {
      l += run;
      continue;
    }
    uint64_t hole = std::min(run, end - l);
    // Goal: right after the block before this one, so sequential writes stay contiguous.
    uint64_t goal = 0, prun;
    if (l > 0) {
      if (uint64_t p = map_block(in, l - 1, &prun, nullptr)) goal = p + 1;
    }
    while (hole) {
      uint64_t start, got;
      if (int err = s_.alloc.alloc_blocks(goal, std::min<uint64_t>(hole, UINT32_MAX), &start, &got)) {
        for (auto [al, an] : added) punch_extents(in, al, an);
        return err;
      }
      insert_extent(in, l, start, got, unwritten ? EXTENT_UNWRITTEN : 0);
      added.push_back({l, got});
      in->d.blocks += got;
      l += got;
      hole -= got;
      goal = start + got;
    }
  }
  if (added_out) *added_out = std::move(added);
  return 0;
}

// An inode's extent map on disk: inline in the inode up to INLINE_EXTENTS, else an extent tree
// (extent_tree.h) of which a save rewrites only the leaves the map's edits touched, splitting
// a leaf that overflows and folding in a neighbour when one runs low, then the index above
// them: ext4's ext4_ext_insert_extent / ext4_ext_split / ext4_ext_rm_leaf, done on a whole
// map kept in memory.
int ExtentMap::save_extents(InodeObj* in) {
  Inode& d = in->d;
  if (d.flags & INODE_INLINE_DATA) return itable_.isave(in);  // the extent area holds data
  if (in->ext.size() > INLINE_EXTENTS) {
    if (int err = save_extent_tree(in)) return err;
  } else {
    for (uint64_t b : in->tree.index) s_.alloc.free_blocks_later(b, 1);
    for (const ExtentLeaf& l : in->tree.leaves) s_.alloc.free_blocks_later(l.blk, 1);
    d.blocks -= in->tree.blocks();
    in->tree = ExtentTreeShape{};
    d.flags &= ~INODE_EXTENT_TREE;
    d.extent_root = 0;
    d.nr_extents = uint16_t(in->ext.size());
    std::memset(d.extents, 0, sizeof(d.extents));
    std::copy(in->ext.begin(), in->ext.end(), d.extents);
  }
  in->edits.clear();
  return itable_.isave(in);
}

// Rewrites the run of leaves the edits since the last save touched, as many leaves as its
// extents now need (evenly filled), then the index over all leaves. On failure nothing has
// changed: the blocks the new shape needs are allocated before anything is written.
int ExtentMap::save_extent_tree(InodeObj* in) {
  Inode& d = in->d;
  ExtentTreeShape& t = in->tree;
  const std::vector<Extent>& ext = in->ext;
  const uint32_t per = extents_per_node(s_.bs);
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
  if (run + index_n > s_.journal.capacity() / 4) return -ENOSPC;
  if (levels.size() >= 2 && !(s_.sb.feature_incompat & FEATURE_INCOMPAT_DEEP_EXTENTS)) {
    s_.sb.feature_incompat |= FEATURE_INCOMPAT_DEEP_EXTENTS;  // first deep tree on this image
    if (int err = itable_.save_superblock_journaled()) return err;
  }
  std::vector<uint64_t> fresh;
  const size_t want = (run > old_run ? run - old_run : 0) + (index_n > t.index.size() ? index_n - t.index.size() : 0);
  const uint64_t goal = i < t.leaves.size() ? t.leaves[i].blk : ext.back().pblk + ext.back().len;
  while (fresh.size() < want) {
    uint64_t start, got;
    if (int err = s_.alloc.alloc_blocks(goal, want - fresh.size(), &start, &got)) {
      for (uint64_t b : fresh) s_.alloc.free_blocks_later(b, 1);
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
    Buffer* b = s_.cache.get_new(now[q].blk, BLK_EXTENT);
    init_extent_node(b->data.data(), in->ino, 0, now[q].nr, s_.bs);
    std::memcpy(b->data.data() + sizeof(ExtentNode), &ext[pos], now[q].nr * sizeof(Extent));
    pos += now[q].nr;
  }
  for (size_t q = run; q < old_run; q++) {
    s_.alloc.free_blocks_later(t.leaves[i + q].blk, 1);
    d.blocks--;
  }
  t.leaves.erase(t.leaves.begin() + i, t.leaves.begin() + j);
  t.leaves.insert(t.leaves.begin() + i, now.begin(), now.end());
  // The index: every node rewritten (a few blocks: one per `per` leaves, and the levels above).
  while (t.index.size() > index_n) {
    s_.alloc.free_blocks_later(t.index.back(), 1);
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
                         Buffer* b = s_.cache.get_new(blk, BLK_EXTENT);
                         init_extent_node(b->data.data(), in->ino, level, nr, s_.bs);
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
