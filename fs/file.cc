// File data outside the read/write path (file_io.cc): block reads for metadata-like callers,
// truncation, fallocate (preallocation and punch hole) and SEEK_DATA/SEEK_HOLE.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <linux/falloc.h>

#include "filesystem.h"

namespace biofs {

using namespace disk;

int Filesystem::read_blocks(InodeObj* in, uint64_t lblk, uint64_t count, uint8_t* buf) {
  IoBatch batch(&io_);
  for (uint64_t l = lblk; l < lblk + count;) {
    uint64_t run;
    bool unwritten;
    const uint64_t p = map_block(in, l, &run, &unwritten);
    run = std::min(run, lblk + count - l);
    if (p && !unwritten) batch.read(p, uint32_t(run), buf + (l - lblk) * bs_);
    else std::memset(buf + (l - lblk) * bs_, 0, run * bs_);
    l += run;
  }
  return batch.wait();
}

int Filesystem::truncate(InodeObj* in, uint64_t size) {
  inode_dio_wait(in);  // no I/O in flight to blocks about to be freed or zeroed
  if (size < in->d.size) {
    const uint64_t keep = (size + bs_ - 1) / bs_;
    // Zero the tail of the last kept block, so growing the file later reads zeros there. First:
    // if that write fails, nothing has changed yet (blocks punched and then not saved would be
    // freed at the next commit while the inode on disk still named them).
    if (size % bs_) {
      uint64_t run;
      bool unwritten;
      const uint64_t p = map_block(in, size / bs_, &run, &unwritten);
      if (p && !unwritten) {
        IoBuf blk(bs_);
        if (int err = io_.read(p, 1, blk.data())) return err;
        std::memset(blk.data() + size % bs_, 0, bs_ - size % bs_);
        if (int err = io_.write(p, 1, blk.data())) return err;
      }
    }
    punch_extents(in, keep, UINT64_MAX);
  }
  in->d.size = size;
  touch(in->d, false, true, true);
  return save_extents(in);
}

}  // namespace biofs

namespace biofs {

int Filesystem::zero_range_in_block(InodeObj* in, uint64_t byte_off, uint64_t len) {
  uint64_t run;
  bool unwritten;
  const uint64_t p = map_block(in, byte_off / bs_, &run, &unwritten);
  if (!p || unwritten || len == 0) return 0;  // reads as zeros already
  IoBuf blk(bs_);
  if (int err = io_.read(p, 1, blk.data())) return err;
  std::memset(blk.data() + byte_off % bs_, 0, len);
  return io_.write(p, 1, blk.data());
}

// The partial blocks at either end of [off, stop) are zeroed in place, before the caller
// unmaps or converts the whole blocks between them: a failed write leaves the file as it was.
int Filesystem::zero_edges(InodeObj* in, uint64_t off, uint64_t stop, uint64_t* first_full, uint64_t* last_full) {
  *first_full = (off + bs_ - 1) / bs_;
  *last_full = stop / bs_;  // [first_full, last_full)
  if (off / bs_ == (stop - 1) / bs_ && (off % bs_ || stop % bs_)) {
    if (*first_full >= *last_full) return zero_range_in_block(in, off, stop - off);
    return 0;
  }
  if (off % bs_) {
    if (int err = zero_range_in_block(in, off, bs_ - off % bs_)) return err;
  }
  if (stop % bs_) {
    if (int err = zero_range_in_block(in, stop - stop % bs_, stop % bs_)) return err;
  }
  return 0;
}

int Filesystem::fallocate(uint64_t ino, int mode, uint64_t off, uint64_t len) {
  std::unique_lock ex(lock_);
  if (int err = maybe_commit(len / bs_ + 8)) return err;
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  if (!S_ISREG(in->d.mode)) return S_ISDIR(in->d.mode) ? -EISDIR : -ENODEV;
  if (len == 0) return -EINVAL;
  inode_dio_wait(in);
  const uint64_t end = off + len;
  if (end < off || end / bs_ >= (1ull << 40)) return -EFBIG;
  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    const uint64_t stop = std::min(end, in->d.size);
    if (off >= stop) return 0;
    uint64_t first_full, last_full;
    if (int err = zero_edges(in, off, stop, &first_full, &last_full)) return err;
    if (first_full < last_full) punch_extents(in, first_full, last_full - first_full);
    touch(in->d, false, true, true);
    return save_extents(in);
  }
  if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
    // ext4_zero_range: whole blocks become unwritten extents (holes among them are allocated
    // so), the partial edges are zeroed in place; nothing is written but those edges.
    uint64_t first_full = (off + bs_ - 1) / bs_, last_full = end / bs_;
    if (first_full < last_full) {
      if (int err = allocate_range(in, first_full, last_full - first_full, true)) return err;
    }
    if (int err = zero_edges(in, off, end, &first_full, &last_full)) {
      save_extents(in);
      return err;
    }
    if (first_full < last_full) set_unwritten(in, first_full, last_full - first_full, true);
    if (!(mode & FALLOC_FL_KEEP_SIZE) && end > in->d.size) in->d.size = end;
    touch(in->d, false, true, true);
    return save_extents(in);
  }
  if (mode & ~FALLOC_FL_KEEP_SIZE) return -EOPNOTSUPP;
  if (int err = allocate_range(in, off / bs_, (end - 1) / bs_ - off / bs_ + 1, true)) {
    save_extents(in);
    return err;
  }
  if (!(mode & FALLOC_FL_KEEP_SIZE) && end > in->d.size) in->d.size = end;
  touch(in->d, false, false, true);
  return save_extents(in);
}

int64_t Filesystem::lseek(uint64_t ino, uint64_t off, int whence) {
  std::unique_lock ex(lock_);
  InodeObj* in;
  if (int err = iget(ino, &in)) return err;
  const uint64_t size = in->d.size;
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return -EINVAL;
  if (off >= size) return -ENXIO;
  for (uint64_t l = off / bs_; l * bs_ < size;) {
    uint64_t run;
    bool unwritten;
    const bool data = map_block(in, l, &run, &unwritten) && !unwritten;
    const uint64_t pos = std::max(off, l * bs_);
    if (data == (whence == SEEK_DATA)) return int64_t(std::min(pos, size));
    if (run > (size / bs_ + 1)) break;
    l += run;
  }
  return whence == SEEK_DATA ? -ENXIO : int64_t(size);
}

}  // namespace biofs
