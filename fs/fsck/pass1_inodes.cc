// Pass 1, e2fsck/pass1.c (with pass1b.c's blocks claimed twice): the inode table read whole,
// then each inode in use, in order: its checksum (a bad one: cleared), a damaged root (a new
// empty one), the inline xattr area, inline data on a non-symlink, a symlink's size, its extent
// map (pass1_extents.cc) and each extent's flags, order and bounds, the blocks it claims
// (in inode order: a block owned twice stays with its first owner, the later one is truncated
// there), a directory's size and holes, its xattr block (pass1_xattr.cc), its block count
// and the shape of its extent tree.
#include <algorithm>
#include <cstring>

#include "fs/fsck/engine.h"
#include "fs/xattr_block.h"

namespace biofs::fsck {

using namespace disk;

bool Engine::load_inodes() {
  if (!read_inode_table(sb, [&](uint64_t blk, uint32_t n, void* buf) { return read(blk, n, buf); }, &table)) return false;
  const uint64_t n = sb.inode_count + 1;
  state.assign(n, FREE);
  dirty_ino.assign(n, 0);
  ext.assign(n, {});
  tree.assign(n, {});
  odd_tree.assign(n, 0);
  map_dirty.assign(n, 0);
  parent.assign(n, 0);
  touched.assign(n, 0);
  owned.assign(sb.block_count, 0);
  for (uint64_t b = 0; b < sb.data_start; b++) owned[b] = 1;
  owned[sb.backup_sb_block] = 1;
  return true;
}

// Pass 1: every inode's checksum and map; blocks claimed in inode order, so a block owned
// twice stays with the first owner and the later one is truncated where it claims it.
void Engine::pass1() {
  {
    const Inode& root = in(ROOT_INO);
    std::string bad;
    if (root.mode == 0) bad = "the root inode is free";
    else if (inode_crc(ROOT_INO, root) != root.checksum) bad = "the root inode fails its checksum";
    else if (!S_ISDIR(root.mode)) bad = "the root inode is not a directory";
    if (!bad.empty()) {
      fix(false, bad, "made a new empty root directory (what it held goes to lost+found)");
      make_dir_inode(ROOT_INO, 0755, 0);
      map_dirty[ROOT_INO] = 1;
    }
  }
  for (uint64_t ino = 1; ino <= sb.inode_count && !r.fatal; ino++) {
    Inode& d = in(ino);
    if (d.mode == 0) continue;
    const std::string who = "inode " + num(ino);
    if (state[ino] == LIVE && ino == ROOT_INO && map_dirty[ino]) continue;  // the new root
    if (inode_crc(ino, d) != d.checksum) {
      fix(false, who + " fails its checksum", "cleared");
      clear_inode(ino);
      continue;
    }
    state[ino] = LIVE;
    if (const uint32_t whole = xattr::inline_whole(d); whole != d.xattr_len) {
      fix(false, who + " inline xattr area is damaged (" + num(d.xattr_len) + " bytes, " + num(whole) + " in whole entries)",
          "cut after the last whole entry");
      std::memset(d.xattr + whole, 0, xattr::inline_capacity(d) - whole);  // not the block's address
      d.xattr_len = uint16_t(whole);
      dirty_ino[ino] = 1;
    }
    if ((d.flags & INODE_INLINE_DATA) && !S_ISLNK(d.mode)) {  // only symlinks keep data there
      fix(false, who + " is not a symlink but has inline data", "its map dropped");
      d.flags &= ~(INODE_INLINE_DATA | INODE_EXTENT_TREE);
      d.nr_extents = 0;
      std::memset(d.extents, 0, sizeof(d.extents));
      dirty_ino[ino] = 1;
    }
    if (S_ISLNK(d.mode)) {  // readlink refuses a target longer than these
      const uint64_t most = symlink_max_size(d);
      if (d.size > most) {
        fix(false, "symlink " + num(ino) + " has size " + num(d.size) + ", longer than its target can be", "cut to " + num(most));
        d.size = most;
        dirty_ino[ino] = 1;
      }
    }
    if (std::string why = read_map(ino); !why.empty()) {
      if (ino == ROOT_INO) {
        fix(false, "the root directory's " + why, "made a new empty root directory (what it held goes to lost+found)");
        make_dir_inode(ROOT_INO, 0755, 0);
        map_dirty[ROOT_INO] = 1;
      } else {
        fix(false, who + " " + why, "cleared");
        clear_inode(ino);
      }
      continue;
    }
    if (r.fatal) return;
    const bool had_tree = d.flags & INODE_EXTENT_TREE;
    const uint64_t old_tree = tree[ino].size();
    auto& v = ext[ino];
    uint64_t old_data = 0;
    for (const Extent& e : v) old_data += e.len;
    // The tree blocks, then the data: the first block already in use ends the map there.
    bool tree_ok = true;
    for (size_t i = 0; i < tree[ino].size() && tree_ok; i++) {
      const uint64_t t = tree[ino][i];
      tree_ok = !owned[t] && std::count(tree[ino].begin(), tree[ino].begin() + i, t) == 0;
    }
    if (!tree_ok) {
      fix(false, who + " extent tree uses a block already in use (claimed twice)", "truncated to 0 bytes");
      v.clear();
      tree[ino].clear();
      d.size = 0;
      map_dirty[ino] = dirty_ino[ino] = 1;
    }
    for (uint64_t t : tree[ino]) owned[t] = 1;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < v.size(); i++) {
      if (v[i].flags & ~EXTENT_UNWRITTEN) {
        fix(false, who + " extent at file block " + num(v[i].lblk) + " has unknown flags", "flags cleared");
        v[i].flags &= EXTENT_UNWRITTEN;
        map_dirty[ino] = dirty_ino[ino] = 1;
      }
      const Extent& e = v[i];
      std::string why;
      if (e.len == 0 || e.lblk < prev_end || e.lblk > UINT64_MAX / bs - e.len) {
        why = who + " has overlapping or empty extents at file block " + num(e.lblk);
      } else if (!in_data(e.pblk, e.len)) {
        why = who + " claims blocks " + num(e.pblk) + "+" + num(e.len) + " outside the data area";
      } else {
        for (uint64_t b = e.pblk; b < e.pblk + e.len; b++)
          if (owned[b]) {
            why = "block " + num(b) + " is claimed twice (again by " + who + ")";
            break;
          }
      }
      if (why.empty()) {
        for (uint64_t b = e.pblk; b < e.pblk + e.len; b++) owned[b] = 1;
        prev_end = e.lblk + e.len;
        continue;
      }
      const uint64_t cut = std::max(e.lblk, prev_end);
      const uint64_t size = cut > d.size / bs ? d.size : cut * bs;
      fix(false, why, who + " truncated at file block " + num(cut) + " (size " + num(d.size) + " -> " + num(size) + ")");
      d.size = size;
      v.resize(i);
      map_dirty[ino] = dirty_ino[ino] = 1;
      break;
    }
    if (S_ISDIR(d.mode)) dir_shape(ino);
    xattr_block(ino);
    if (r.fatal) return;
    // The block count, and a tree in a shape the filesystem writes (any fill of its leaves,
    // the index over them as small as it can be, a tree only above INLINE_EXTENTS extents).
    if (!map_dirty[ino]) {
      const uint64_t xb = xattr::block_of(d) ? 1 : 0;
      if (had_tree && odd_tree[ino]) {
        fix(true, who + " extent tree is not in its usual shape (" + num(old_tree) + " blocks for " + num(v.size()) + " extents)",
            "rewritten");
        map_dirty[ino] = 1;
      } else if (d.blocks != old_data + old_tree + xb) {
        fix(true, who + " says " + num(d.blocks) + " blocks but owns " + num(old_data + old_tree + xb), "corrected");
        d.blocks = old_data + old_tree + xb;
        dirty_ino[ino] = 1;
      }
    }
  }
}

// A directory's size is whole blocks, all mapped from block 0.
void Engine::dir_shape(uint64_t ino) {
  Inode& d = in(ino);
  const std::string who = "directory " + num(ino);
  if (d.size % bs) {
    fix(false, who + " size " + num(d.size) + " is not a multiple of the block size", "rounded down");
    d.size -= d.size % bs;
    dirty_ino[ino] = 1;
  }
  uint64_t covered = 0;
  for (const Extent& e : ext[ino]) {
    if (e.lblk > covered) break;
    covered = std::max<uint64_t>(covered, e.lblk + e.len);
  }
  if (covered < d.size / bs) {
    fix(false, who + " has a hole at block " + num(covered), "truncated to " + num(covered) + " blocks");
    d.size = covered * bs;
    dirty_ino[ino] = 1;
  }
  // Blocks past the end of a directory are never read: give them back.
  auto& v = ext[ino];
  const uint64_t nb = d.size / bs;
  std::vector<Extent> keep;
  for (const Extent& e : v) {
    if (e.lblk >= nb) {
      unclaim(e.pblk, e.len);
    } else if (e.lblk + e.len > nb) {
      unclaim(e.pblk + (nb - e.lblk), e.lblk + e.len - nb);
      keep.push_back(Extent{e.lblk, e.pblk, uint32_t(nb - e.lblk), e.flags});
    } else {
      keep.push_back(e);
    }
  }
  if (keep.size() != v.size() || (!keep.empty() && keep.back().len != v[keep.size() - 1].len)) {
    fix(false, who + " maps blocks past its end (block " + num(nb) + " on)", "they are given back");
    v = std::move(keep);
    map_dirty[ino] = dirty_ino[ino] = 1;
  }
}

}  // namespace biofs::fsck
