// File data outside the read/write path (file_io.h): opening and closing, attributes
// (setattr's size, mode, owner and times), block reads for metadata-like callers, truncation,
// fallocate (preallocation, punch hole, zero range) and SEEK_DATA/SEEK_HOLE.
#pragma once

#include <sys/stat.h>

#include <cstdint>

#include "attr_flags.h"
#include "evict.h"
#include "file_io.h"
#include "fs_info.h"

namespace biofs {

class File {
 public:
  File(FsInfo& s, InodeTable& itable, ExtentMap& extents, Xattr& xattrs, FileIo& file_io, Evict& evict)
      : s_(s), itable_(itable), extents_(extents), xattrs_(xattrs), file_io_(file_io), evict_(evict) {}

  int setattr(uint64_t ino, int to_set, const struct stat& attr, struct stat* out, bool fsetid);
  int open(uint64_t ino, bool truncate, bool direct_writer, bool* cache_valid, bool fsetid, bool reader);
  int release(uint64_t ino, bool direct_writer);
  int may_open(uint64_t ino, int open_flags);  // attr_flags.h
  int fallocate(uint64_t ino, int mode, uint64_t off, uint64_t len);
  int64_t lseek(uint64_t ino, uint64_t off, int whence);

  int truncate(InodeObj* in, uint64_t size);
  int zero_range_in_block(InodeObj* in, uint64_t byte_off, uint64_t len);  // within one block
  // Zeroes the partial blocks at the ends of [off, stop) in place; sets [*first_full,
  // *last_full) to the whole blocks between them, which the caller unmaps or marks unwritten.
  int zero_edges(InodeObj* in, uint64_t off, uint64_t stop, uint64_t* first_full, uint64_t* last_full);
  int shift_range(InodeObj* in, int mode, uint64_t off, uint64_t len);  // collapse or insert

 private:
  FsInfo& s_;
  InodeTable& itable_;
  ExtentMap& extents_;
  Xattr& xattrs_;
  FileIo& file_io_;
  Evict& evict_;
};

}  // namespace biofs
