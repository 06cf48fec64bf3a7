// Inodes: reading them from the table (checked, with their extent maps: extent_load.cc),
// writing them back through the journal, creating them and freeing their slots. When an inode
// is freed, or only dropped from memory, is evict.cc's to say.
#include "inode_table.h"

#include <cerrno>
#include <cstring>
#include <ctime>

#include "extent_load.h"

namespace biofs {

using namespace disk;

void InodeTable::touch(Inode& d, bool a, bool m, bool c) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);  // current_time(): the coarse clock, as the kernel
  if (a) d.atime_sec = now.tv_sec, d.atime_nsec = uint32_t(now.tv_nsec);
  if (m) d.mtime_sec = now.tv_sec, d.mtime_nsec = uint32_t(now.tv_nsec);
  if (c) d.ctime_sec = now.tv_sec, d.ctime_nsec = uint32_t(now.tv_nsec);
}

bool InodeTable::atime_due(const InodeObj* in) const {
  if (s_.commit.failed() || s_.read_only) return false;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return atime_needs_update(in->d, s_.opts.atime, now);
}

void InodeTable::accessed(InodeObj* in) {
  if (!atime_due(in)) return;
  touch(in->d, true, false, false);
  (void)isave(in, true);
}

static void table_pos(const SuperBlock& sb, uint64_t ino, uint64_t* blk, uint32_t* off) {
  const uint64_t ipb = sb.block_size / INODE_SIZE;
  *blk = sb.inode_table_start + (ino - 1) / ipb;
  *off = uint32_t((ino - 1) % ipb) * INODE_SIZE;
}

int InodeTable::iget(uint64_t ino, InodeObj** out) {
  if (auto it = s_.inodes.find(ino); it != s_.inodes.end()) {
    *out = it->second.get();
    return 0;
  }
  if (ino == 0 || ino > s_.sb.inode_count) return -ESTALE;
  uint64_t blk;
  uint32_t off;
  table_pos(s_.sb, ino, &blk, &off);
  Buffer* b;
  if (int err = s_.cache.get(blk, 0, &b)) return err;
  auto in = std::make_unique<InodeObj>();
  in->ino = ino;
  std::memcpy(&in->d, b->data.data() + off, INODE_SIZE);
  if (in->d.mode == 0) return -ESTALE;
  if (inode_crc(ino, in->d) != in->d.checksum) return -EUCLEAN;
  if (int err = load_extents(s_.cache, s_.sb, in.get())) return err;
  in->sync_seq = in->datasync_seq = s_.journal.sequence();
  *out = in.get();
  s_.inodes[ino] = std::move(in);
  return 0;
}

int InodeTable::isave(InodeObj* in, bool times_only) {
  in->sync_seq = s_.journal.sequence();  // the running transaction's number
  if (!times_only) in->datasync_seq = in->sync_seq;
  uint64_t blk;
  uint32_t off;
  table_pos(s_.sb, in->ino, &blk, &off);
  Buffer* b;
  if (int err = s_.cache.get(blk, 0, &b)) return err;
  in->d.checksum = inode_crc(in->ino, in->d);
  std::memcpy(b->data.data() + off, &in->d, INODE_SIZE);
  s_.cache.mark_dirty(b);
  return 0;
}

int InodeTable::new_inode(mode_t mode, uid_t uid, gid_t gid, InodeObj** out) {
  uint64_t ino;
  if (int err = s_.alloc.alloc_inode(&ino)) return err;
  uint64_t blk;
  uint32_t off;
  table_pos(s_.sb, ino, &blk, &off);
  Buffer* b;
  if (int err = s_.cache.get(blk, 0, &b)) {
    s_.alloc.free_inode(ino);
    return err;
  }
  const auto* old = reinterpret_cast<const Inode*>(b->data.data() + off);
  // The bitmap called it free but the slot is in use: a damaged bitmap. Its bit stays set, so
  // the number is not offered again; replacing the live inode would corrupt the tree.
  if (old->mode != 0 || s_.inodes.count(ino)) return -EUCLEAN;
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
  s_.inodes[ino] = std::move(in);
  return 0;
}

int InodeTable::save_superblock_journaled() {
  Buffer* b;
  if (int err = s_.cache.get(0, 0, &b)) return err;
  s_.sb.checksum = superblock_crc(s_.sb);
  std::memcpy(b->data.data(), &s_.sb, sizeof(s_.sb));
  s_.cache.mark_dirty(b);
  return 0;
}

int InodeTable::orphan_add(InodeObj* in) {
  if (in->d.flags & INODE_ORPHAN) return 0;
  in->d.flags |= INODE_ORPHAN;
  in->d.next_orphan = s_.sb.orphan_head;
  in->orphan_prev = 0;
  if (auto it = s_.inodes.find(s_.sb.orphan_head); it != s_.inodes.end()) it->second->orphan_prev = in->ino;
  s_.sb.orphan_head = in->ino;
  if (int err = isave(in)) return err;
  return save_superblock_journaled();
}

// Takes `in` off the on-disk list: its predecessor (the superblock, or the inode orphan_prev
// names; a walk from the head if that does not point at it, as for a list read from disk)
// is linked to its successor.
int InodeTable::orphan_remove(InodeObj* in) {
  if (!(in->d.flags & INODE_ORPHAN)) return 0;
  in->d.flags &= ~INODE_ORPHAN;
  const uint64_t next = in->d.next_orphan, hint = in->orphan_prev;
  in->d.next_orphan = 0;
  in->orphan_prev = 0;
  InodeObj* prev = nullptr;
  if (s_.sb.orphan_head != in->ino) {
    if (auto it = s_.inodes.find(hint); hint && it != s_.inodes.end() && it->second->d.next_orphan == in->ino) {
      prev = it->second.get();
    } else {
      for (uint64_t p = s_.sb.orphan_head, steps = 0; p && steps <= s_.sb.inode_count && !prev; steps++) {
        InodeObj* pi;
        if (int err = iget(p, &pi)) return err;
        if (pi->d.next_orphan == in->ino) prev = pi;
        p = pi->d.next_orphan;
      }
      if (!prev) return -EUCLEAN;  // not on the list it claims to be on
    }
  }
  if (auto it = s_.inodes.find(next); next && it != s_.inodes.end()) it->second->orphan_prev = prev ? prev->ino : 0;
  if (!prev) {
    s_.sb.orphan_head = next;
    return save_superblock_journaled();
  }
  prev->d.next_orphan = next;
  return isave(prev);
}

// ext4_free_inode(): the slot zeroed but for its generation (the next inode made there takes
// the one after it), written back, its bit freed.
void InodeTable::free_inode(InodeObj* in) {
  const uint32_t gen = in->d.generation;
  std::memset(&in->d, 0, sizeof(in->d));
  in->d.generation = gen;
  uint64_t blk;
  uint32_t off;
  table_pos(s_.sb, in->ino, &blk, &off);
  Buffer* b;
  if (s_.cache.get(blk, 0, &b) == 0) {
    std::memcpy(b->data.data() + off, &in->d, INODE_SIZE);  // mode 0: a free slot
    s_.cache.mark_dirty(b);
  }
  s_.alloc.free_inode(in->ino);
}

void InodeTable::fill_stat(const InodeObj* in, struct stat* st) const {
  std::memset(st, 0, sizeof(*st));
  const Inode& d = in->d;
  st->st_ino = in->ino;
  st->st_mode = d.mode;
  st->st_nlink = d.nlink;
  st->st_uid = d.uid;
  st->st_gid = d.gid;
  st->st_rdev = d.rdev;
  st->st_size = off_t(d.size);
  st->st_blksize = s_.bs;
  st->st_blocks = blkcnt_t(d.blocks * (s_.bs / 512));
  st->st_atim = {d.atime_sec, long(d.atime_nsec)};
  st->st_mtim = {d.mtime_sec, long(d.mtime_nsec)};
  st->st_ctim = {d.ctime_sec, long(d.ctime_nsec)};
}

int InodeTable::iget_shared(std::shared_lock<FsLock>& shared, uint64_t ino, InodeObj** out) {
  if (auto it = s_.inodes.find(ino); it != s_.inodes.end()) {
    *out = it->second.get();
    return 0;
  }
  // Not in memory: load it under the exclusive lock, then look again under the shared one.
  shared.unlock();
  {
    std::unique_lock ex(s_.lock);
    InodeObj* in;
    if (int err = iget(ino, &in)) {
      ex.unlock();
      shared.lock();
      return err;
    }
  }
  shared.lock();
  auto it = s_.inodes.find(ino);
  if (it == s_.inodes.end()) return -ESTALE;
  *out = it->second.get();
  return 0;
}

int InodeTable::getattr(uint64_t ino, struct stat* st) {
  struct timespec btime;
  return getattr(ino, st, &btime);
}

int InodeTable::getattr(uint64_t ino, struct stat* st, struct timespec* btime) {
  std::shared_lock shared(s_.lock);
  InodeObj* in;
  if (int err = iget_shared(shared, ino, &in)) return err;
  fill_stat(in, st);
  *btime = {in->d.btime_sec, long(in->d.btime_nsec)};
  return 0;
}

}  // namespace biofs
