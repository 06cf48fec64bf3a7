// File reads and writes as bios over the extent map, completing asynchronously (iomap's
// direct I/O, fs/iomap/direct-io.c, and ext4's write paths); the synchronous and durable forms
// over them, and copy_file_range's loop.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "extent_map.h"
#include "fs_info.h"
#include "inplace_function.h"
#include "io_batch.h"
#include "kiocb.h"
#include "super.h"
#include "xattr.h"

namespace biofs {

class FileIo {
 public:
  using ReadDone = InplaceFunction<void(ssize_t n, const uint8_t* data)>;
  using WriteDone = InplaceFunction<void(ssize_t n), 64>;  // the daemon's reply and a direct write's ticket

  FileIo(FsInfo& s, InodeTable& itable, ExtentMap& extents, Xattr& xattrs, Super& super)
      : s_(s), itable_(itable), extents_(extents), xattrs_(xattrs), super_(super) {}

  ssize_t read(uint64_t ino, const Kiocb& iocb, size_t size, char* buf);
  ssize_t write(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf);
  ssize_t copy_file_range(uint64_t ino_in, uint64_t off_in, uint64_t ino_out, uint64_t off_out, size_t len);
  void read_async(uint64_t ino, const Kiocb& iocb, size_t size, ReadDone done);
  void write_async(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, WriteDone done);
  ssize_t write_durable(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, bool datasync);
  // Whole blocks [lblk, lblk + count) of a file into buf, synchronously (holes and unwritten
  // blocks read as zeros): for a symlink's target and the ends of an unaligned write.
  int read_blocks(InodeObj* in, uint64_t lblk, uint64_t count, uint8_t* buf);

  // end_io's batch (end_io_work.h): the queued conversions of unwritten extents.
  void finish_conversions(std::vector<EndIoWork::Item*>& items);
  // should_remove_suid(): clears S_ISUID, and S_ISGID when group exec is set (without it the
  // bit means mandatory locking). Returns whether the mode changed.
  static bool drop_suidgid(disk::Inode& d);

 private:
  // Whether a write now would change mtime/ctime (current_time() granularity: the coarse clock).
  static bool times_need_update(const disk::Inode& d);
  void write_mapped(InodeObj* in, uint64_t first, uint64_t last, const uint8_t* buf, IoBatch* batch,
                    blk_opf_t flags = 0);
  enum class Overwrite { submitted, times_stale, not_possible };
  // Aligned writes into fallocated (unwritten) blocks: the data goes out asynchronously and the
  // extents are converted by end_io (end_io_work.h) once it is on disk. false: not such a write.
  struct ConvertIo;
  bool try_convert_async(std::unique_lock<FsLock>& ex, InodeObj* in, const Kiocb& iocb, uint64_t first, uint64_t last,
                         uint64_t end, const char* buf, WriteDone& done);
  // The metadata of a write whose data is on disk, under the exclusive lock: unwritten extents
  // converted, size, set-id bits, capabilities, times.
  ssize_t finish_write(InodeObj* in, uint64_t first, uint64_t n, uint64_t end, size_t size, bool fsetid, bool extents_changed);
  // finish_write() without the save: sets *extents_changed when it converted extents.
  int update_after_write(InodeObj* in, uint64_t first, uint64_t n, uint64_t end, bool fsetid, bool* extents_changed);
  Overwrite try_overwrite_async(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, WriteDone& done,
                                bool check_times);
  // write_async, saying whether the write went out as an overwrite (its bios carry REQ_FUA
  // under IOCB_DSYNC).
  bool write_iter(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, WriteDone done);
  int update_file_times(uint64_t ino);
  void touch_atime(uint64_t ino);  // under the exclusive lock: a due atime moved (atime.h)
  // convert_done (with handed_off) lets an aligned write into unwritten blocks be answered later
  // by the end-io worker (try_convert_async); null from the synchronous callers.
  ssize_t write_locked(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf,
                       WriteDone* convert_done = nullptr, bool* handed_off = nullptr);
  struct Dio;

  FsInfo& s_;
  InodeTable& itable_;
  ExtentMap& extents_;
  Xattr& xattrs_;
  Super& super_;
};

}  // namespace biofs
