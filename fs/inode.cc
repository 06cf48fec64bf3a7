// Inodes: reading them from the table (checked), writing them back through the journal,
// creating and freeing them. Their extent maps are read and written in inode_extents.cc.
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
  in->orphan_prev = 0;
  if (auto it = inodes_.find(sb_.orphan_head); it != inodes_.end()) it->second->orphan_prev = in->ino;
  sb_.orphan_head = in->ino;
  if (int err = isave(in)) return err;
  return save_superblock_journaled();
}

// Takes `in` off the on-disk list: its predecessor (the superblock, or the inode orphan_prev
// names; a walk from the head if that does not point at it, as for a list read from disk)
// is linked to its successor.
int Filesystem::orphan_remove(InodeObj* in) {
  if (!(in->d.flags & INODE_ORPHAN)) return 0;
  in->d.flags &= ~INODE_ORPHAN;
  const uint64_t next = in->d.next_orphan, hint = in->orphan_prev;
  in->d.next_orphan = 0;
  in->orphan_prev = 0;
  InodeObj* prev = nullptr;
  if (sb_.orphan_head != in->ino) {
    if (auto it = inodes_.find(hint); hint && it != inodes_.end() && it->second->d.next_orphan == in->ino) {
      prev = it->second.get();
    } else {
      for (uint64_t p = sb_.orphan_head, steps = 0; p && steps <= sb_.inode_count && !prev; steps++) {
        InodeObj* pi;
        if (int err = iget(p, &pi)) return err;
        if (pi->d.next_orphan == in->ino) prev = pi;
        p = pi->d.next_orphan;
      }
      if (!prev) return -EUCLEAN;  // not on the list it claims to be on
    }
  }
  if (auto it = inodes_.find(next); next && it != inodes_.end()) it->second->orphan_prev = prev ? prev->ino : 0;
  if (!prev) {
    sb_.orphan_head = next;
    return save_superblock_journaled();
  }
  prev->d.next_orphan = next;
  return isave(prev);
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
