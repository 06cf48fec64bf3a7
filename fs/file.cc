// File data outside the read/write path (file_io.cc): truncation, fallocate (preallocation and
// punch hole) and SEEK_DATA/SEEK_HOLE; open, release and setattr.
#include "file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <linux/falloc.h>

#include "attr_flags.h"
#include "extent_map.h"
#include "file_io.h"
#include "inode_table.h"
#include "io_buf.h"
#include "xattr.h"

namespace biofs {

using namespace disk;

int File::truncate(InodeObj* in, uint64_t size) {
  inode_dio_wait(in);  // no I/O in flight to blocks about to be freed or zeroed
  if (size < in->d.size) {
    const uint64_t keep = (size + s_.bs - 1) / s_.bs;
    // Zero the tail of the last kept block, so growing the file later reads zeros there. First:
    // if that write fails, nothing has changed yet (blocks punched and then not saved would be
    // freed at the next commit while the inode on disk still named them).
    if (size % s_.bs) {
      uint64_t run;
      bool unwritten;
      const uint64_t p = extents_.map_block(in, size / s_.bs, &run, &unwritten);
      if (p && !unwritten) {
        IoBuf blk(s_.bs);
        if (int err = s_.io.read(p, 1, blk.data())) return err;
        std::memset(blk.data() + size % s_.bs, 0, s_.bs - size % s_.bs);
        if (int err = s_.io.write(p, 1, blk.data())) return err;
      }
    }
    extents_.punch_extents(in, keep, UINT64_MAX);
  }
  in->d.size = size;
  InodeTable::touch(in->d, false, true, true);
  return extents_.save_extents(in);
}

}  // namespace biofs

namespace biofs {

int File::zero_range_in_block(InodeObj* in, uint64_t byte_off, uint64_t len) {
  uint64_t run;
  bool unwritten;
  const uint64_t p = extents_.map_block(in, byte_off / s_.bs, &run, &unwritten);
  if (!p || unwritten || len == 0) return 0;  // reads as zeros already
  IoBuf blk(s_.bs);
  if (int err = s_.io.read(p, 1, blk.data())) return err;
  std::memset(blk.data() + byte_off % s_.bs, 0, len);
  return s_.io.write(p, 1, blk.data());
}

// The partial blocks at either end of [off, stop) are zeroed in place, before the caller
// unmaps or converts the whole blocks between them: a failed write leaves the file as it was.
int File::zero_edges(InodeObj* in, uint64_t off, uint64_t stop, uint64_t* first_full, uint64_t* last_full) {
  *first_full = (off + s_.bs - 1) / s_.bs;
  *last_full = stop / s_.bs;  // [first_full, last_full)
  if (off / s_.bs == (stop - 1) / s_.bs && (off % s_.bs || stop % s_.bs)) {
    if (*first_full >= *last_full) return zero_range_in_block(in, off, stop - off);
    return 0;
  }
  if (off % s_.bs) {
    if (int err = zero_range_in_block(in, off, s_.bs - off % s_.bs)) return err;
  }
  if (stop % s_.bs) {
    if (int err = zero_range_in_block(in, stop - stop % s_.bs, stop % s_.bs)) return err;
  }
  return 0;
}

int File::fallocate(uint64_t ino, int mode, uint64_t off, uint64_t len) {
  std::unique_lock ex(s_.lock);
  if (int err = s_.commit.maybe_commit(len / s_.bs + 8)) return err;
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (!S_ISREG(in->d.mode)) return S_ISDIR(in->d.mode) ? -EISDIR : -ENODEV;
  if (len == 0) return -EINVAL;
  if (int err = may_fallocate(in, mode)) return err;
  inode_dio_wait(in);
  const uint64_t end = off + len;
  if (end < off || end / s_.bs >= disk::MAX_FILE_BLOCKS) return -EFBIG;
  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    const uint64_t stop = std::min(end, in->d.size);
    if (off >= stop) return 0;
    uint64_t first_full, last_full;
    if (int err = zero_edges(in, off, stop, &first_full, &last_full)) return err;
    if (first_full < last_full) extents_.punch_extents(in, first_full, last_full - first_full);
    InodeTable::touch(in->d, false, true, true);
    return extents_.save_extents(in);
  }
  if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
    // ext4_zero_range: whole blocks become unwritten extents (holes among them are allocated
    // so), the partial edges are zeroed in place; nothing is written but those edges.
    uint64_t first_full = (off + s_.bs - 1) / s_.bs, last_full = end / s_.bs;
    if (first_full < last_full) {
      if (int err = extents_.allocate_range(in, first_full, last_full - first_full, true)) return err;
    }
    if (int err = zero_edges(in, off, end, &first_full, &last_full)) {
      extents_.save_extents(in);
      return err;
    }
    if (first_full < last_full) extents_.set_unwritten(in, first_full, last_full - first_full, true);
    if (!(mode & FALLOC_FL_KEEP_SIZE) && end > in->d.size) in->d.size = end;
    InodeTable::touch(in->d, false, true, true);
    return extents_.save_extents(in);
  }
  if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE)) return shift_range(in, mode, off, len);
  if (mode & ~FALLOC_FL_KEEP_SIZE) return -EOPNOTSUPP;
  if (int err = extents_.allocate_range(in, off / s_.bs, (end - 1) / s_.bs - off / s_.bs + 1, true)) {
    extents_.save_extents(in);
    return err;
  }
  if (!(mode & FALLOC_FL_KEEP_SIZE) && end > in->d.size) in->d.size = end;
  InodeTable::touch(in->d, false, false, true);
  return extents_.save_extents(in);
}

// FALLOC_FL_COLLAPSE_RANGE removes [off, off + len) and moves what follows down; INSERT_RANGE
// moves what is at off and after up by len, leaving a hole: ext4_collapse_range and
// ext4_insert_range (fs/ext4/extents.c) with vfs_fallocate()'s mode rule (fs/open.c, Linux
// 6.18). The unmapping, the moved map, the size and the times are one journal transaction: a
// crash leaves the file as it was before or as it is after. Over FUSE the kernel never sends
// either (fuse_file_fallocate(), fs/fuse/file.c); a caller of Filesystem gets them.
int File::shift_range(InodeObj* in, int mode, uint64_t off, uint64_t len) {
  if (mode != FALLOC_FL_COLLAPSE_RANGE && mode != FALLOC_FL_INSERT_RANGE) return -EOPNOTSUPP;
  if ((off | len) % s_.bs) return -EINVAL;
  const uint64_t first = off / s_.bs, count = len / s_.bs;
  if (mode == FALLOC_FL_COLLAPSE_RANGE) {
    if (off + len >= in->d.size) return -EINVAL;  // reaching EOF: a truncate, not a collapse
    extents_.punch_extents(in, first, count);
    extents_.shift_extents(in, first + count, -int64_t(count));
    in->d.size -= len;
  } else {
    if (len > disk::MAX_FILE_BLOCKS * s_.bs - in->d.size) return -EFBIG;
    if (off >= in->d.size) return -EINVAL;
    extents_.shift_extents(in, first, int64_t(count));
    in->d.size += len;
  }
  InodeTable::touch(in->d, false, true, true);
  return extents_.save_extents(in);
}

int64_t File::lseek(uint64_t ino, uint64_t off, int whence) {
  std::unique_lock ex(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  const uint64_t size = in->d.size;
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return -EINVAL;
  if (off >= size) return -ENXIO;
  for (uint64_t l = off / s_.bs; l * s_.bs < size;) {
    uint64_t run;
    bool unwritten;
    const bool data = extents_.map_block(in, l, &run, &unwritten) && !unwritten;
    const uint64_t pos = std::max(off, l * s_.bs);
    if (data == (whence == SEEK_DATA)) return int64_t(std::min(pos, size));
    if (run > (size / s_.bs + 1)) break;
    l += run;
  }
  return whence == SEEK_DATA ? -ENXIO : int64_t(size);
}

int File::setattr(uint64_t ino, int to_set, const struct stat& a, struct stat* out, bool fsetid) {
  std::unique_lock ex(s_.lock);
  if (int err = s_.commit.maybe_commit()) return err;
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (int err = may_setattr(in, to_set)) return err;
  Inode& d = in->d;
  if (to_set & SETATTR_SIZE) {
    if (S_ISDIR(d.mode)) return -EISDIR;
    if (!S_ISREG(d.mode)) return -EINVAL;
    if (int err = truncate(in, uint64_t(a.st_size))) return err;
  }
  // chown_common() kills the set-id bits of a non-directory whoever calls it; a mode given
  // in the same call is what the caller asked for, and wins.
  const bool chown = to_set & (SETATTR_UID | SETATTR_GID);
  if (((to_set & SETATTR_SIZE) && !fsetid) || (chown && !S_ISDIR(d.mode))) FileIo::drop_suidgid(d);
  if (to_set & SETATTR_MODE) {
    d.mode = (d.mode & S_IFMT) | (a.st_mode & 07777);
    if (int err = xattrs_.acl_chmod_locked(in)) return err;
  }
  if ((to_set & SETATTR_SIZE) || (chown && !S_ISDIR(d.mode))) {
    if (int err = xattrs_.kill_caps(in)) return err;
  }
  if (to_set & SETATTR_UID) d.uid = a.st_uid;
  if (to_set & SETATTR_GID) d.gid = a.st_gid;
  if (to_set & SETATTR_ATIME_NOW) InodeTable::touch(d, true, false, false);
  else if (to_set & SETATTR_ATIME) d.atime_sec = a.st_atim.tv_sec, d.atime_nsec = uint32_t(a.st_atim.tv_nsec);
  if (to_set & SETATTR_MTIME_NOW) InodeTable::touch(d, false, true, false);
  else if (to_set & SETATTR_MTIME) d.mtime_sec = a.st_mtim.tv_sec, d.mtime_nsec = uint32_t(a.st_mtim.tv_nsec);
  if (to_set & SETATTR_CTIME) d.ctime_sec = a.st_ctim.tv_sec, d.ctime_nsec = uint32_t(a.st_ctim.tv_nsec);
  else InodeTable::touch(d, false, false, true);
  if (int err = itable_.isave(in)) return err;
  itable_.fill_stat(in, out);
  return 0;
}

int File::open(uint64_t ino, bool truncate_it, bool direct_writer, bool* cache_valid, bool fsetid, bool reader) {
  std::unique_lock ex(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget(ino, &in)) return err;
  if (truncate_it && S_ISREG(in->d.mode)) {
    if (s_.read_only) return -EROFS;
    if (int err = s_.commit.maybe_commit()) return err;
    if (int err = truncate(in, 0)) return err;
    // The kernel sends no SETATTR for an atomic O_TRUNC: the truncation's killing of the
    // set-id bits (should_remove_suid) and of the capability (cap_inode_killpriv) is ours.
    if (!fsetid && FileIo::drop_suidgid(in->d) && s_.opts.attrs_changed) s_.opts.attrs_changed(in->ino);
    if (int err = xattrs_.kill_caps(in)) return err;
    if (int err = itable_.isave(in)) return err;
  }
  in->open++;
  if (direct_writer) {
    in->direct_writers++;
    in->cache_stale = true;
  } else if (cache_valid) {
    *cache_valid = !in->cache_stale;
    if (!in->direct_writers) in->cache_stale = false;  // this open drops what the kernel had
    // Reads from pages the kernel kept never reach us (atime.h). Under strictatime, where
    // every read must show, a reader's open drops them (no keep_cache) so that each read comes
    // here and moves the atime at the read, as ext4's file_accessed() does: an open that
    // reads nothing (`xfs_io -r -c fsync`, generic/622) moves nothing. Under relatime a due
    // atime moves at the open and the pages stay (`tar -x` then reading the tree stays in the
    // cache). An empty file's reads never reach us, pages or not: its reader's open moves it.
    if (*cache_valid && reader && itable_.atime_due(in)) {
      if (s_.opts.atime.mode == AtimeMode::strictatime && in->d.size != 0) {
        *cache_valid = false;
      } else {
        itable_.accessed(in);
        if (s_.opts.attrs_changed) s_.opts.attrs_changed(in->ino);
      }
    }
  }
  return 0;
}

int File::may_open(uint64_t ino, int open_flags) {
  std::shared_lock shared(s_.lock);
  InodeObj* in;
  if (int err = itable_.iget_shared(shared, ino, &in)) return err;
  return biofs::may_open(in, open_flags);
}

int File::release(uint64_t ino, bool direct_writer) {
  std::unique_lock ex(s_.lock);
  auto it = s_.inodes.find(ino);
  if (it == s_.inodes.end()) return 0;
  InodeObj* in = it->second.get();
  if (in->open) in->open--;
  if (direct_writer && in->direct_writers) in->direct_writers--;
  if (int err = s_.commit.maybe_commit()) return err;  // as forget(): a run of last closes commits as it goes
  evict_.maybe_free_inode(in);
  return 0;
}

}  // namespace biofs
