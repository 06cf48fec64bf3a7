// Inodes: reading them from the table (checked), writing them back through the journal,
// their extent maps (inline or in an extent tree), creating and freeing them.
#include <cerrno>
#include <cstring>
#include <ctime>

#include "filesystem.h"

namespace biofs {

using namespace disk;

void Filesystem::touch(Inode& d, bool a, bool m, bool c) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);  // current_time(): the coarse clock, as the kernel
  if (a) d.atime_sec = now.tv_sec, d.atime_nsec = uint32_t(now.tv_nsec);
  if (m) d.mtime_sec = now.tv_sec, d.mtime_nsec = uint32_t(now.tv_nsec);
  if (c) d.ctime_sec = now.tv_sec, d.ctime_nsec = uint32_t(now.tv_nsec);
}

static void table_pos(const SuperBlock& sb, uint64_t ino, uint64_t* blk, uint32_t* off) {
  const uint64_t ipb = sb.block_size / INODE_SIZE;
  *blk = sb.inode_table_start + (ino - 1) / ipb;
  *off = uint32_t((ino - 1) % ipb) * INODE_SIZE;
}

int Filesystem::iget(uint64_t ino, InodeObj** out) {
  if (auto it = inodes_.find(ino); it != inodes_.end()) {
    *out = it->second.get();
    return 0;
  }
  if (ino == 0 || ino > sb_.inode_count) return -ESTALE;
  uint64_t blk;
  uint32_t off;
  table_pos(sb_, ino, &blk, &off);
  Buffer* b;
  if (int err = cache_.get(blk, 0, &b)) return err;
  auto in = std::make_unique<InodeObj>();
  in->ino = ino;
  std::memcpy(&in->d, b->data.data() + off, INODE_SIZE);
  if (in->d.mode == 0) return -ESTALE;
  if (inode_crc(ino, in->d) != in->d.checksum) return -EUCLEAN;
  if (int err = load_extents(in.get())) return err;
  in->sync_seq = in->datasync_seq = journal_.sequence();
  *out = in.get();
  inodes_[ino] = std::move(in);
  return 0;
}

int Filesystem::isave(InodeObj* in, bool times_only) {
  in->sync_seq = journal_.sequence();  // the running transaction's number
  if (!times_only) in->datasync_seq = in->sync_seq;
  uint64_t blk;
  uint32_t off;
  table_pos(sb_, in->ino, &blk, &off);
  Buffer* b;
  if (int err = cache_.get(blk, 0, &b)) return err;
  in->d.checksum = inode_crc(in->ino, in->d);
  std::memcpy(b->data.data() + off, &in->d, INODE_SIZE);
  cache_.mark_dirty(b);
  return 0;
}

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
  in->tree.clear();
  if (in->d.flags & INODE_INLINE_DATA) return 0;
  if (!(in->d.flags & INODE_EXTENT_TREE)) {
    if (in->d.nr_extents > INLINE_EXTENTS) return -EUCLEAN;
    in->ext.assign(in->d.extents, in->d.extents + in->d.nr_extents);
    return check_extents(in->ext, sb_);
  }
  Buffer* b;
  if (int err = cache_.get(in->d.extent_root, BLK_EXTENT, &b)) return err;
  auto* root = reinterpret_cast<const ExtentNode*>(b->data.data());
  if (!extent_node_ok(*root, in->ino, bs_, true)) return -EUCLEAN;
  in->tree.push_back(in->d.extent_root);
  auto load_leaf = [&](const uint8_t* node) {
    const auto* n = reinterpret_cast<const ExtentNode*>(node);
    const auto* e = reinterpret_cast<const Extent*>(node + sizeof(ExtentNode));
    in->ext.insert(in->ext.end(), e, e + n->nr);
  };
  if (root->level == 0) {
    load_leaf(b->data.data());
    return check_extents(in->ext, sb_);
  }
  // Copy the index: reading the leaves may evict nothing (trim runs between operations only),
  // but keep it simple and safe.
  const auto* first = reinterpret_cast<const ExtentIndex*>(b->data.data() + sizeof(ExtentNode));
  const std::vector<ExtentIndex> idx(first, first + root->nr);  // nr may be 0: no memcpy(nullptr)
  for (const ExtentIndex& x : idx) {
    Buffer* leaf;
    if (int err = cache_.get(x.child, BLK_EXTENT, &leaf)) return err;
    auto* n = reinterpret_cast<const ExtentNode*>(leaf->data.data());
    if (!extent_node_ok(*n, in->ino, bs_, false)) return -EUCLEAN;
    in->tree.push_back(x.child);
    load_leaf(leaf->data.data());
  }
  return check_extents(in->ext, sb_);
}

int Filesystem::save_extents(InodeObj* in) {
  Inode& d = in->d;
  if (d.flags & INODE_INLINE_DATA) return isave(in);  // the extent area holds data
  const size_t n = in->ext.size();
  const uint32_t per = extents_per_node(bs_);
  const size_t need = extent_tree_blocks(n, bs_);
  if (need > 1 + per) return -EFBIG;  // a root indexes `per` leaves at most
  // Every tree block is rewritten (and logged) when the map changes: a tree the journal could
  // not log in one transaction would wedge the next commit.
  if (need > journal_.capacity() / 4) return -ENOSPC;
  // Grow or shrink the set of tree blocks to what the map needs.
  while (in->tree.size() > need) {
    alloc_.free_blocks_later(in->tree.back(), 1);
    in->tree.pop_back();
    d.blocks--;
  }
  while (in->tree.size() < need) {
    uint64_t start, got;
    const uint64_t goal = in->ext.empty() ? 0 : in->ext.back().pblk + in->ext.back().len;
    if (int err = alloc_.alloc_blocks(goal, 1, &start, &got)) return err;
    in->tree.push_back(start);
    d.blocks++;
  }
  if (need == 0) {
    d.flags &= ~INODE_EXTENT_TREE;
    d.extent_root = 0;
    d.nr_extents = uint16_t(n);
    std::memset(d.extents, 0, sizeof(d.extents));
    std::copy(in->ext.begin(), in->ext.end(), d.extents);
    return isave(in);
  }
  auto write_leaf = [&](uint64_t blk, size_t first, size_t count) {
    Buffer* b = cache_.get_new(blk, BLK_EXTENT);
    auto* node = reinterpret_cast<ExtentNode*>(b->data.data());
    node->owner = in->ino;
    node->level = 0;
    node->nr = uint16_t(count);
    node->max = uint16_t(per);
    std::memcpy(b->data.data() + sizeof(ExtentNode), &in->ext[first], count * sizeof(Extent));
  };
  if (need == 1) {
    write_leaf(in->tree[0], 0, n);
  } else {
    Buffer* r = cache_.get_new(in->tree[0], BLK_EXTENT);
    auto* root = reinterpret_cast<ExtentNode*>(r->data.data());
    root->owner = in->ino;
    root->level = 1;
    root->nr = uint16_t(need - 1);
    root->max = uint16_t(per);
    auto* idx = reinterpret_cast<ExtentIndex*>(r->data.data() + sizeof(ExtentNode));
    for (size_t i = 0; i + 1 < need; i++) {
      const size_t first = i * per;
      idx[i] = ExtentIndex{in->ext[first].lblk, in->tree[i + 1], 0};
      write_leaf(in->tree[i + 1], first, std::min<size_t>(per, n - first));
    }
  }
  d.flags |= INODE_EXTENT_TREE;
  d.extent_root = in->tree[0];
  d.nr_extents = 0;
  std::memset(d.extents, 0, sizeof(d.extents));
  return isave(in);
}

int Filesystem::new_inode(mode_t mode, uid_t uid, gid_t gid, InodeObj** out) {
  uint64_t ino;
  if (int err = alloc_.alloc_inode(&ino)) return err;
  uint64_t blk;
  uint32_t off;
  table_pos(sb_, ino, &blk, &off);
  Buffer* b;
  if (int err = cache_.get(blk, 0, &b)) {
    alloc_.free_inode(ino);
    return err;
  }
  const auto* old = reinterpret_cast<const Inode*>(b->data.data() + off);
  // The bitmap called it free but the slot is in use: a damaged bitmap. Its bit stays set, so
  // the number is not offered again; replacing the live inode would corrupt the tree.
  if (old->mode != 0 || inodes_.count(ino)) return -EUCLEAN;
  auto in = std::make_unique<InodeObj>();
  in->ino = ino;
  in->d.generation = old->generation + 1;  // a reused number is a different file to NFS/FUSE
  in->d.mode = mode;
  in->d.uid = uid;
  in->d.gid = gid;
  touch(in->d, true, true, true);
  in->d.btime_sec = in->d.mtime_sec;
  in->d.btime_nsec = in->d.mtime_nsec;
  *out = in.get();
  inodes_[ino] = std::move(in);
  return 0;
}

int Filesystem::save_superblock_journaled() {
  Buffer* b;
  if (int err = cache_.get(0, 0, &b)) return err;
  sb_.checksum = superblock_crc(sb_);
  std::memcpy(b->data.data(), &sb_, sizeof(sb_));
  cache_.mark_dirty(b);
  return 0;
}

int Filesystem::orphan_add(InodeObj* in) {
  if (in->d.flags & INODE_ORPHAN) return 0;
  in->d.flags |= INODE_ORPHAN;
  in->d.next_orphan = sb_.orphan_head;
  sb_.orphan_head = in->ino;
  if (int err = isave(in)) return err;
  return save_superblock_journaled();
}

int Filesystem::orphan_remove(InodeObj* in) {
  if (!(in->d.flags & INODE_ORPHAN)) return 0;
  in->d.flags &= ~INODE_ORPHAN;
  const uint64_t next = in->d.next_orphan;
  in->d.next_orphan = 0;
  if (sb_.orphan_head == in->ino) {
    sb_.orphan_head = next;
    return save_superblock_journaled();
  }
  for (uint64_t p = sb_.orphan_head, steps = 0; p && steps <= sb_.inode_count; steps++) {
    InodeObj* pi;
    if (int err = iget(p, &pi)) return err;
    if (pi->d.next_orphan == in->ino) {
      pi->d.next_orphan = next;
      return isave(pi);
    }
    p = pi->d.next_orphan;
  }
  return -EUCLEAN;  // not on the list it claims to be on
}

int Filesystem::free_orphans() {
  for (uint64_t steps = 0; sb_.orphan_head; steps++) {
    InodeObj* in;
    int err = iget(sb_.orphan_head, &in);
    // Every step takes the head off the list; one that cannot (an inode not marked orphan, the
    // root, a list longer than the table) would loop forever.
    if (!err && (!(in->d.flags & INODE_ORPHAN) || in->ino == ROOT_INO || steps > sb_.inode_count)) err = -EUCLEAN;
    if (err) {
      sb_.orphan_head = 0;  // a broken list: drop it, fsck finds what it held
      save_superblock_journaled();
      return err;
    }
    in->nlookup = 0;
    in->open = 0;
    if (in->d.nlink) {
      if (int err = orphan_remove(in)) return err;
      isave(in);
    }
    maybe_free_inode(in);
    if (int err = maybe_commit()) return err;
  }
  return 0;
}

void Filesystem::maybe_free_inode(InodeObj* in) {
  if (in->ino == ROOT_INO) return;
  if (in->nlookup || in->open) {
    if (in->d.nlink == 0) orphan_add(in);
    return;
  }
  const uint64_t ino = in->ino;
  if (in->d.nlink == 0) {
    orphan_remove(in);
    punch_extents(in, 0, UINT64_MAX);
    save_extents(in);  // frees the tree blocks
    xattr_release_block(in);
    const uint32_t gen = in->d.generation;
    std::memset(&in->d, 0, sizeof(in->d));
    in->d.generation = gen;
    uint64_t blk;
    uint32_t off;
    table_pos(sb_, ino, &blk, &off);
    Buffer* b;
    if (cache_.get(blk, 0, &b) == 0) {
      std::memcpy(b->data.data() + off, &in->d, INODE_SIZE);  // mode 0: a free slot
      cache_.mark_dirty(b);
    }
    alloc_.free_inode(ino);
  }
  inodes_.erase(ino);  // an inode still linked is just evicted from memory
}

void Filesystem::fill_stat(const InodeObj* in, struct stat* st) const {
  std::memset(st, 0, sizeof(*st));
  const Inode& d = in->d;
  st->st_ino = in->ino;
  st->st_mode = d.mode;
  st->st_nlink = d.nlink;
  st->st_uid = d.uid;
  st->st_gid = d.gid;
  st->st_rdev = d.rdev;
  st->st_size = off_t(d.size);
  st->st_blksize = bs_;
  st->st_blocks = blkcnt_t(d.blocks * (bs_ / 512));
  st->st_atim = {d.atime_sec, long(d.atime_nsec)};
  st->st_mtim = {d.mtime_sec, long(d.mtime_nsec)};
  st->st_ctim = {d.ctime_sec, long(d.ctime_nsec)};
}

}  // namespace biofs
