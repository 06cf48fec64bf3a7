// The filesystem core: inodes, extents, directories and file data over a BlockDevice, with
// every metadata change journaled and every byte moved as bios. POSIX-shaped calls that return
// 0 or -errno; the FUSE daemon (fuse_ops.cc) and the tests call these directly.
//
// Concurrency: one reader-writer lock over the filesystem's state, never held while waiting
// for file data. Reads and overwrites of written blocks map their blocks under the shared
// lock, count themselves in the inode's in-flight I/O (inode_dio_begin, as the kernel's direct
// I/O does) and complete asynchronously; whatever frees or rewrites blocks of a file takes the
// lock exclusive and first waits for that count to drain (inode_dio_wait). Writes that
// convert unwritten extents or extend the file over mapped blocks write their data with no
// lock held and finish their metadata under it; writes that allocate keep it throughout.
// Completion callbacks never take the lock (sync callers may wait for I/O while holding it).
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "attr_flags.h"
#include "dir.h"
#include "evict.h"
#include "extent_map.h"
#include "file.h"
#include "file_io.h"
#include "fs_info.h"
#include "inode_table.h"
#include "kiocb.h"
#include "lib/status.h"
#include "namei.h"
#include "super.h"
#include "trim.h"
#include "xattr.h"

namespace biofs {

// The face the daemon, the tools and the tests call: each operation forwards to the part that
// does it (fs_info.h: the state they share; inode_table.h, xattr.h, extent_map.h, evict.h,
// dir.h, super.h, file_io.h, file.h, namei.h: the parts, each using only those before it).
class Filesystem {
 public:
  // Mounts the filesystem on `io`'s device: checks the superblock, replays the journal,
  // marks the superblock dirty, the filesystem in *out. Ok, or io_error with one line and
  // *out null.
  static Status mount(BlockIo& io, const MountOptions& opts, std::unique_ptr<Filesystem>* out);
  ~Filesystem();  // unmounts if unmount() was not called
  // Commits, writes the superblock clean (primary and backup), flushes. 0 or -errno.
  int unmount() { return super_.unmount(); }

  int lookup(uint64_t parent, const std::string& name, struct stat* st) {  // +1 lookup count
    return namei_.lookup(parent, name, st);
  }
  uint32_t generation(uint64_t ino) { return namei_.generation(ino); }  // 0 for an unknown inode
  // Tells whoever caches the inode's attributes (MountOptions::attrs_changed) to drop them.
  void attrs_changed(uint64_t ino) {
    if (s_.opts.attrs_changed) s_.opts.attrs_changed(ino);
  }
  void forget(uint64_t ino, uint64_t nlookup) { evict_.forget(ino, nlookup); }
  int getattr(uint64_t ino, struct stat* st) { return itable_.getattr(ino, st); }
  int getattr(uint64_t ino, struct stat* st, struct timespec* btime) { return itable_.getattr(ino, st, btime); }
  // A change of owner or group clears the set-id bits of a non-directory; a truncation by a
  // caller without `fsetid` too (setattr_should_drop_suidgid).
  int setattr(uint64_t ino, int to_set, const struct stat& attr, struct stat* out, bool fsetid = true) {
    return files_.setattr(ino, to_set, attr, out, fsetid);
  }
  // `umask` is applied unless the directory has a default ACL, which then shapes the new mode and
  // becomes the new inode's ACLs (posix_acl_create; the daemon takes FUSE_CAP_DONT_MASK).
  int mknod(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev, struct stat* st,
            mode_t umask = 0) {
    return namei_.mknod(parent, name, mode, uid, gid, rdev, st, umask);
  }
  int mkdir(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, struct stat* st,
            mode_t umask = 0) {
    return namei_.mkdir(parent, name, mode, uid, gid, st, umask);
  }
  int symlink(uint64_t parent, const std::string& name, const std::string& target, uid_t uid, gid_t gid,
              struct stat* st) {
    return namei_.symlink(parent, name, target, uid, gid, st);
  }
  int readlink(uint64_t ino, std::string* target) { return namei_.readlink(ino, target); }
  int tmpfile(uint64_t parent, mode_t mode, uid_t uid, gid_t gid, struct stat* st, mode_t umask = 0) {
    return namei_.tmpfile(parent, mode, uid, gid, st, umask);
  }
  int link(uint64_t ino, uint64_t newparent, const std::string& newname, struct stat* st) {
    return namei_.link(ino, newparent, newname, st);
  }
  int unlink(uint64_t parent, const std::string& name) { return namei_.unlink(parent, name); }
  int rmdir(uint64_t parent, const std::string& name) { return namei_.rmdir(parent, name); }
  int rename(uint64_t parent, const std::string& name, uint64_t newparent, const std::string& newname,
             unsigned flags, uid_t uid = 0, gid_t gid = 0) {  // uid, gid: a whiteout's owner
    return namei_.rename(parent, name, newparent, newname, flags, uid, gid);
  }
  // Counts an open file; with `truncate` (open's O_TRUNC) cuts a regular file to 0 first,
  // as truncate does (waits for its I/O in flight, updates mtime/ctime, journaled).
  // `direct_writer`: opened for writing with O_DIRECT (the kernel's page cache is bypassed).
  // *cache_valid, if given: whether pages the kernel kept from earlier opens are still right;
  // a `reader` (opened for reading) that finds its atime due moves it at the open, or, under
  // strictatime, is told they are not, so that its reads come here and move it (atime.h).
  // The truncation drops the file's capability and, for a caller without `fsetid`, its set-id
  // bits, as do_truncate()'s notify_change() does on ext4.
  int open(uint64_t ino, bool truncate = false, bool direct_writer = false, bool* cache_valid = nullptr,
           bool fsetid = true, bool reader = false) {
    return files_.open(ino, truncate, direct_writer, cache_valid, fsetid, reader);
  }
  int release(uint64_t ino, bool direct_writer = false) {  // may free an unlinked inode
    return files_.release(ino, direct_writer);
  }
  // Reads into buf; returns bytes read (short at end of file) or -errno. The Kiocb forms
  // take the I/O's context (kiocb.h: its position, flags, poll group); the others make one.
  ssize_t read(uint64_t ino, const Kiocb& iocb, size_t size, char* buf) { return file_io_.read(ino, iocb, size, buf); }
  ssize_t write(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf) {
    return file_io_.write(ino, iocb, size, buf);
  }
  ssize_t read(uint64_t ino, uint64_t off, size_t size, char* buf) { return read(ino, Kiocb{.ki_pos = off}, size, buf); }
  ssize_t write(uint64_t ino, uint64_t off, size_t size, const char* buf) {
    return write(ino, Kiocb{.ki_pos = off}, size, buf);
  }
  // copy_file_range(2) within the filesystem: `len` bytes in 1 MiB steps, read then written as
  // bios. Returns bytes copied (short at the source's end or at an error after the first
  // step) or -errno.
  ssize_t copy_file_range(uint64_t ino_in, uint64_t off_in, uint64_t ino_out, uint64_t off_out, size_t len) {
    return file_io_.copy_file_range(ino_in, off_in, ino_out, off_out, len);
  }
  // The same, completing asynchronously: `done` runs exactly once, on the thread that ends the
  // last bio or inline (errors, holes, a write that must allocate), with the bytes moved or
  // -errno. A read's `data` is valid only during the call; it points into iocb.ki_buf when the
  // read could land there (kiocb.h). A write's `buf` is copied before write_async returns
  // unless IOCB_BUF_STAYS. A write without IOCB_KILL_SUIDGID keeps the set-id bits (root,
  // CAP_FSETID); with it, it clears S_ISUID, and S_ISGID with group exec, as the kernel's
  // file_remove_privs() does on ext4 (libfuse takes FUSE_CAP_HANDLE_KILLPRIV, so the kernel
  // leaves that to the filesystem). The FUSE daemon replies from `done` (held in place, no heap
  // allocation).
  using ReadDone = FileIo::ReadDone;
  using WriteDone = FileIo::WriteDone;
  void read_async(uint64_t ino, const Kiocb& iocb, size_t size, ReadDone done) {
    file_io_.read_async(ino, iocb, size, std::move(done));
  }
  void write_async(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, WriteDone done) {
    file_io_.write_async(ino, iocb, size, buf, std::move(done));
  }
  // A write with O_DSYNC (`datasync`) or O_SYNC semantics: it returns once the data, and what
  // reading it back needs (O_SYNC: the whole inode), is durable. generic_write_sync() after the
  // write, except that an overwrite goes out with REQ_FUA and then needs neither a flush nor,
  // unless O_SYNC and its times changed, a commit (iomap's IOMAP_DIO_WRITE_THROUGH).
  // Synchronous: the caller's thread waits (and may commit). `buf` stays put until it returns.
  ssize_t write_durable(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, bool datasync) {
    return file_io_.write_durable(ino, iocb, size, buf, datasync);
  }
  // Calls fn(name, ino, type, next_offset) for entries from `off`; fn returns false to stop.
  int readdir(uint64_t ino, uint64_t off,
              const std::function<bool(const std::string&, uint64_t, unsigned, uint64_t)>& fn) {
    return namei_.readdir(ino, off, fn);
  }
  int statfs(struct statvfs* st) { return super_.statfs(st); }
  // fallocate modes: 0 and FALLOC_FL_KEEP_SIZE (unwritten extents), FALLOC_FL_PUNCH_HOLE |
  // FALLOC_FL_KEEP_SIZE, and FALLOC_FL_ZERO_RANGE [| KEEP_SIZE] (whole blocks become
  // unwritten, as ext4 does); collapse and insert range -EOPNOTSUPP.
  int fallocate(uint64_t ino, int mode, uint64_t off, uint64_t len) { return files_.fallocate(ino, mode, off, len); }
  // SEEK_DATA / SEEK_HOLE (unwritten extents count as holes). The offset or -errno.
  int64_t lseek(uint64_t ino, uint64_t off, int whence) { return files_.lseek(ino, off, whence); }
  // Extended attributes: inline in the inode, then in one external block (xattr.cc). Names up
  // to 255 bytes (-ERANGE past that); -ENOSPC when inline area and block cannot hold the set.
  int setxattr(uint64_t ino, const std::string& name, const std::string& value, int flags) {
    return xattrs_.setxattr(ino, name, value, flags);
  }
  int getxattr(uint64_t ino, const std::string& name, std::string* value) {
    return xattrs_.getxattr(ino, name, value);
  }
  int listxattr(uint64_t ino, std::string* names) {  // NUL-terminated names, concatenated
    return xattrs_.listxattr(ino, names);
  }
  int removexattr(uint64_t ino, const std::string& name) { return xattrs_.removexattr(ino, name); }
  // `data_durable`: the file's data writes went out with FUA, so only a commit is left to do.
  int fsync(uint64_t ino, bool datasync, bool data_durable = false) {
    return super_.fsync(ino, datasync, data_durable);
  }
  int sync() { return super_.sync(); }  // commit the running transaction and flush
  int shutdown(uint32_t flags) { return super_.shutdown(flags); }  // Super::shutdown
  int set_read_only(bool read_only) { return super_.set_read_only(read_only); }  // Super::set_read_only
  int trim(const TrimRange& range, uint64_t* trimmed) { return trim_fs(s_, range, trimmed); }  // FITRIM, trim.h
  // chattr's flags (attr_flags.h): FS_IOC_GETFLAGS / SETFLAGS, and may_open()'s rules for them.
  int get_attr_flags(uint64_t ino, uint32_t* fs_flags) { return biofs::get_attr_flags(s_, itable_, ino, fs_flags); }
  int set_attr_flags(uint64_t ino, uint32_t fs_flags) { return biofs::set_attr_flags(s_, itable_, ino, fs_flags); }
  int may_open(uint64_t ino, int open_flags) { return files_.may_open(ino, open_flags); }

  const disk::SuperBlock& superblock() const { return s_.sb; }
  // Test hooks: make the next commit stop after its commit block; and drop the mount without
  // writing anything more, as a crash would.
  void crash_before_checkpoint() { s_.journal.crash_before_checkpoint = true; }
  void crash() { super_.crash(); }
  BlockIo& io() { return s_.io; }
  uint64_t commits() const { return s_.journal.commits(); }
  bool read_only() const { return s_.read_only; }  // mounted or remounted read-only
  int replayed() const { return s_.replayed; }

 private:
  Filesystem(BlockIo& io, const disk::SuperBlock& sb, const MountOptions& opts);

  // Each part is made after the parts it is given, so none calls one above it. Super's commit
  // thread and the end-io worker stop at unmount (or crash), before any part goes.
  FsInfo s_;  // first: every part holds a reference to it
  InodeTable itable_;
  Xattr xattrs_;
  ExtentMap extents_;
  Evict evict_;
  Dir dirs_;
  Super super_;
  FileIo file_io_;
  File files_;
  Namei namei_;
};

}  // namespace biofs
