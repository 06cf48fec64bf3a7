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

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <stop_token>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocator.h"
#include "block_io.h"
#include "end_io_work.h"
#include "extent_tree.h"
#include "format.h"
#include "fs_lock.h"
#include "journal.h"
#include "kiocb.h"
#include "meta_cache.h"
#include "lib/status.h"

namespace biofs {

namespace xattr {
struct Attr;  // xattr_block.h
}

struct MountOptions {
  size_t meta_cache_bytes = 256u << 20;
  unsigned commit_interval_s = 5;  // background commit of metadata; 0: only on fsync/unmount
  bool read_only = false;
  // Called, under the filesystem's lock, when a write drops an inode's set-id bits (a writer
  // without fsetid): whoever caches the mode (the kernel, over FUSE) must drop its copy.
  std::function<void(uint64_t ino)> setid_dropped;
};

// setattr fields (FUSE_SET_ATTR_* values, so the daemon passes its mask through).
enum : int {
  SETATTR_MODE = 1 << 0, SETATTR_UID = 1 << 1, SETATTR_GID = 1 << 2, SETATTR_SIZE = 1 << 3,
  SETATTR_ATIME = 1 << 4, SETATTR_MTIME = 1 << 5, SETATTR_ATIME_NOW = 1 << 7,
  SETATTR_MTIME_NOW = 1 << 8, SETATTR_CTIME = 1 << 10,
};

class Filesystem {
 public:
  // Mounts the filesystem on `io`'s device: checks the superblock, replays the journal,
  // marks the superblock dirty, the filesystem in *out. Ok, or io_error with one line and
  // *out null.
  static Status mount(BlockIo& io, const MountOptions& opts, std::unique_ptr<Filesystem>* out);
  ~Filesystem();  // unmounts if unmount() was not called
  // Commits, writes the superblock clean (primary and backup), flushes. 0 or -errno.
  int unmount();

  int lookup(uint64_t parent, const std::string& name, struct stat* st);  // +1 lookup count
  void forget(uint64_t ino, uint64_t nlookup);
  int getattr(uint64_t ino, struct stat* st);
  // A change of owner or group clears the set-id bits of a non-directory; a truncation by a
  // caller without `fsetid` too (setattr_should_drop_suidgid).
  int setattr(uint64_t ino, int to_set, const struct stat& attr, struct stat* out, bool fsetid = true);
  // `umask` is applied unless the directory has a default ACL, which then shapes the new mode and
  // becomes the new inode's ACLs (posix_acl_create; the daemon takes FUSE_CAP_DONT_MASK).
  int mknod(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev, struct stat* st,
            mode_t umask = 0);
  int mkdir(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, struct stat* st,
            mode_t umask = 0);
  int symlink(uint64_t parent, const std::string& name, const std::string& target, uid_t uid, gid_t gid, struct stat* st);
  int readlink(uint64_t ino, std::string* target);
  int link(uint64_t ino, uint64_t newparent, const std::string& newname, struct stat* st);
  int unlink(uint64_t parent, const std::string& name);
  int rmdir(uint64_t parent, const std::string& name);
  int rename(uint64_t parent, const std::string& name, uint64_t newparent, const std::string& newname, unsigned flags);
  // Counts an open file; with `truncate` (open's O_TRUNC) cuts a regular file to 0 first,
  // as truncate does (waits for its I/O in flight, updates mtime/ctime, journaled).
  // `direct_writer`: opened for writing with O_DIRECT (the kernel's page cache is bypassed).
  // *cache_valid, if given: whether pages the kernel kept from earlier opens are still right.
  int open(uint64_t ino, bool truncate = false, bool direct_writer = false, bool* cache_valid = nullptr);
  int release(uint64_t ino, bool direct_writer = false);  // may free an unlinked inode
  // Reads into buf; returns bytes read (short at end of file) or -errno. The Kiocb forms
  // take the I/O's context (kiocb.h: its position, flags, poll group); the others make one.
  ssize_t read(uint64_t ino, const Kiocb& iocb, size_t size, char* buf);
  ssize_t write(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf);
  ssize_t read(uint64_t ino, uint64_t off, size_t size, char* buf) { return read(ino, Kiocb{.ki_pos = off}, size, buf); }
  ssize_t write(uint64_t ino, uint64_t off, size_t size, const char* buf) {
    return write(ino, Kiocb{.ki_pos = off}, size, buf);
  }
  // copy_file_range(2) within the filesystem: `len` bytes in 1 MiB steps, read then written as
  // bios. Returns bytes copied (short at the source's end or at an error after the first
  // step) or -errno.
  ssize_t copy_file_range(uint64_t ino_in, uint64_t off_in, uint64_t ino_out, uint64_t off_out, size_t len);
  // The same, completing asynchronously: `done` runs exactly once, on the thread that ends the
  // last bio or inline (errors, holes, a write that must allocate), with the bytes moved or
  // -errno. A read's `data` is valid only during the call; it points into iocb.ki_buf when the
  // read could land there (kiocb.h). A write's `buf` is copied before write_async returns
  // unless IOCB_BUF_STAYS. A write without IOCB_KILL_SUIDGID keeps the set-id bits (root,
  // CAP_FSETID); with it, it clears S_ISUID, and S_ISGID with group exec, as the kernel's
  // file_remove_privs() does on ext4 (libfuse takes FUSE_CAP_HANDLE_KILLPRIV, so the kernel
  // leaves that to the filesystem). The FUSE daemon replies from `done` (held in place, no heap
  // allocation).
  using ReadDone = InplaceFunction<void(ssize_t n, const uint8_t* data)>;
  using WriteDone = InplaceFunction<void(ssize_t n)>;
  void read_async(uint64_t ino, const Kiocb& iocb, size_t size, ReadDone done);
  void write_async(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, WriteDone done);
  // A write with O_DSYNC (`datasync`) or O_SYNC semantics: it returns once the data, and what
  // reading it back needs (O_SYNC: the whole inode), is durable. generic_write_sync() after the
  // write, except that an overwrite goes out with REQ_FUA and then needs neither a flush nor,
  // unless O_SYNC and its times changed, a commit (iomap's IOMAP_DIO_WRITE_THROUGH).
  // Synchronous: the caller's thread waits (and may commit). `buf` stays put until it returns.
  ssize_t write_durable(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf, bool datasync);
  // Calls fn(name, ino, type, next_offset) for entries from `off`; fn returns false to stop.
  int readdir(uint64_t ino, uint64_t off,
              const std::function<bool(const std::string&, uint64_t, unsigned, uint64_t)>& fn);
  int statfs(struct statvfs* st);
  // fallocate modes: 0 and FALLOC_FL_KEEP_SIZE (unwritten extents), FALLOC_FL_PUNCH_HOLE |
  // FALLOC_FL_KEEP_SIZE, and FALLOC_FL_ZERO_RANGE [| KEEP_SIZE] (whole blocks become
  // unwritten, as ext4 does); collapse and insert range -EOPNOTSUPP.
  int fallocate(uint64_t ino, int mode, uint64_t off, uint64_t len);
  // SEEK_DATA / SEEK_HOLE (unwritten extents count as holes). The offset or -errno.
  int64_t lseek(uint64_t ino, uint64_t off, int whence);
  // Extended attributes: inline in the inode, then in one external block (xattr.cc). Names up
  // to 255 bytes (-ERANGE past that); -ENOSPC when inline area and block cannot hold the set.
  int setxattr(uint64_t ino, const std::string& name, const std::string& value, int flags);
  int getxattr(uint64_t ino, const std::string& name, std::string* value);
  int listxattr(uint64_t ino, std::string* names);  // NUL-terminated names, concatenated
  int removexattr(uint64_t ino, const std::string& name);
  // `data_durable`: the file's data writes went out with FUA, so only a commit is left to do.
  int fsync(uint64_t ino, bool datasync, bool data_durable = false);
  int sync();  // commit the running transaction and flush

  const disk::SuperBlock& superblock() const { return sb_; }
  // Test hooks: make the next commit stop after its commit block; and drop the mount without
  // writing anything more, as a crash would.
  void crash_before_checkpoint() { journal_.crash_before_checkpoint = true; }
  void crash();
  BlockIo& io() { return io_; }
  uint64_t commits() const { return journal_.commits(); }
  int replayed() const { return replayed_; }

 private:
  struct InodeObj {
    uint64_t ino = 0;
    disk::Inode d{};
    // The whole extent map, sorted by lblk. Changed only by extent.cc, which notes each change
    // in `edits`, so that save_extents rewrites only the tree leaves that changed.
    std::vector<disk::Extent> ext;
    ExtentTreeShape tree;              // its tree blocks as last written (empty: inline)
    ExtentEdits edits;
    std::atomic<uint64_t> nlookup{0};  // raised under the shared lock by lookups, lowered under the exclusive one
    uint32_t open = 0;
    // The kernel's page cache of this file is stale once a direct-I/O writer (FUSE direct_io
    // bypasses and does not invalidate it) has had it open since the last buffered open.
    uint32_t direct_writers = 0;
    bool cache_stale = false;
    int8_t has_caps = -1;  // security.capability present: -1 not looked at yet, 0 no, 1 yes
    std::atomic<int> dio{0};           // file I/O in flight (inode->i_dio_count)
    // The journal transaction that last changed the inode (ext4's i_sync_tid), and the last
    // that changed what reading its data back needs: size, blocks, not only times
    // (i_datasync_tid). An inode loaded from disk may have changed in the running one.
    uint64_t sync_seq = 0, datasync_seq = 0;
    // On the orphan list: the inode before it (0: the superblock's head), kept in memory only,
    // so that taking it off is one step (ext4's in-memory s_orphan list beside the on-disk one).
    uint64_t orphan_prev = 0;
    // Directories: name -> entry, loaded on first use.
    struct DirLoc {
      uint64_t ino;
      uint64_t lblk;
      uint32_t off;
      uint8_t type;
    };
    std::unique_ptr<std::unordered_map<std::string, DirLoc>> dir;
    std::vector<uint32_t> dir_free;    // per directory block: free bytes (a hint)
  };

  Filesystem(BlockIo& io, const disk::SuperBlock& sb, const MountOptions& opts);
  int start();

  // inode.cc
  int iget(uint64_t ino, InodeObj** out);
  // The inode into its table block (dirty); `times_only`: nothing but its times changed, which
  // fdatasync need not commit.
  int isave(InodeObj* in, bool times_only = false);
  int save_extents(InodeObj* in);   // extent map into the inode or its tree, then isave
  int save_extent_tree(InodeObj* in);
  int load_extents(InodeObj* in);
  int new_inode(mode_t mode, uid_t uid, gid_t gid, InodeObj** out);
  // nlink 0, no lookups, not open: free everything. nlink 0 but still in use: put it on the
  // orphan list, so a crash before the last close frees it at the next mount.
  void maybe_free_inode(InodeObj* in);
  int orphan_add(InodeObj* in);
  int orphan_remove(InodeObj* in);
  int free_orphans();          // at mount: frees what a crash left on the orphan list
  int save_superblock_journaled();
  void fill_stat(const InodeObj* in, struct stat* st) const;
  static void touch(disk::Inode& d, bool a, bool m, bool c);

  // extent.cc
  // Physical block of file block lblk, 0 for a hole; *run: blocks mapped (or unmapped) from it.
  uint64_t map_block(const InodeObj* in, uint64_t lblk, uint64_t* run, bool* unwritten) const;
  void insert_extent(InodeObj* in, uint64_t lblk, uint64_t pblk, uint64_t len, uint32_t flags = 0);
  // Sets or clears EXTENT_UNWRITTEN over the mapped parts of [lblk, lblk + count) (cleared: the
  // range was just written; set: fallocate's zero range). Returns whether anything changed.
  bool set_unwritten(InodeObj* in, uint64_t lblk, uint64_t count, bool unwritten);
  // Unmaps [lblk, lblk + count) and frees its blocks (after the next commit).
  void punch_extents(InodeObj* in, uint64_t lblk, uint64_t count);
  void splice_extents(InodeObj* in, size_t lo, size_t hi, const disk::Extent* with, size_t n);
  // Fills the holes in a range with new blocks (marked unwritten when `unwritten`).
  // `added`, if given, receives the (lblk, count) ranges newly mapped.
  int allocate_range(InodeObj* in, uint64_t lblk, uint64_t count, bool unwritten = false,
                     std::vector<std::pair<uint64_t, uint64_t>>* added = nullptr);
  int zero_range_in_block(InodeObj* in, uint64_t byte_off, uint64_t len);  // within one block
  // Zeroes the partial blocks at the ends of [off, stop) in place; sets [*first_full,
  // *last_full) to the whole blocks between them, which the caller unmaps or marks unwritten.
  int zero_edges(InodeObj* in, uint64_t off, uint64_t stop, uint64_t* first_full, uint64_t* last_full);

  // dir.cc
  int dir_load(InodeObj* dir);
  int dir_find(InodeObj* dir, const std::string& name, InodeObj::DirLoc* loc);
  int dir_add(InodeObj* dir, const std::string& name, uint64_t ino, uint8_t type);
  int dir_remove(InodeObj* dir, const std::string& name);
  // Points the existing entry `name` at another inode in place (ext4_setent): needs no space,
  // so a rename over an existing name cannot fail half-way for want of a block.
  int dir_replace(InodeObj* dir, const std::string& name, uint64_t ino, uint8_t type);
  bool dir_empty(InodeObj* dir);

  // file_io.cc: inode_dio_begin/end/wait (include/linux/fs.h, fs/inode.c).
  static void inode_dio_begin(InodeObj* in) { in->dio.fetch_add(1, std::memory_order_relaxed); }
  static void inode_dio_end(InodeObj* in) {
    if (in->dio.fetch_sub(1, std::memory_order_acq_rel) == 1) wake_up_var(in->dio);
  }
  static void inode_dio_wait(InodeObj* in) { wait_var_event_zero(in->dio); }
  // The inode, taking the exclusive lock for a moment if it is not in memory yet.
  int iget_shared(std::shared_lock<FsLock>& shared, uint64_t ino, InodeObj** out);
  // Whether a write now would change mtime/ctime (current_time() granularity: the coarse clock).
  static bool times_need_update(const disk::Inode& d);
  void write_mapped(InodeObj* in, uint64_t first, uint64_t last, const uint8_t* buf, IoBatch* batch,
                    blk_opf_t flags = 0);
  enum class Overwrite { submitted, times_stale, not_possible };
  // Aligned writes into fallocated (unwritten) blocks: the data goes out asynchronously and the
  // extents are converted by end_io_ (end_io_work.h) once it is on disk. false: not such a write.
  struct ConvertIo;
  bool try_convert_async(std::unique_lock<FsLock>& ex, InodeObj* in, const Kiocb& iocb, uint64_t first, uint64_t last,
                         uint64_t end, const char* buf, WriteDone& done);
  void finish_conversions(std::vector<EndIoWork::Item*>& items);
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
  // convert_done (with handed_off) lets an aligned write into unwritten blocks be answered later
  // by the end-io worker (try_convert_async); null from the synchronous callers.
  ssize_t write_locked(uint64_t ino, const Kiocb& iocb, size_t size, const char* buf,
                       WriteDone* convert_done = nullptr, bool* handed_off = nullptr);
  // should_remove_suid(): clears S_ISUID, and S_ISGID when group exec is set (without it the
  // bit means mandatory locking). Returns whether the mode changed.
  static bool drop_suidgid(disk::Inode& d);
  struct FileIo;

  // file.cc
  int truncate(InodeObj* in, uint64_t size);
  int read_blocks(InodeObj* in, uint64_t lblk, uint64_t count, uint8_t* buf);

  // xattr.cc: every attribute of an inode (inline ones first; -EUCLEAN for a damaged area or
  // block); storing a set (placed inline and in the block, which is allocated or freed as
  // needed; -ENOSPC when it does not fit); the block freed with its inode.
  int xattr_load(InodeObj* in, std::vector<xattr::Attr>* all);
  int xattr_store(InodeObj* in, const std::vector<xattr::Attr>& all);
  void xattr_release_block(InodeObj* in);
  // POSIX ACLs (acl.h) kept in step with the mode: a new inode's mode and ACLs from its
  // directory's default ACL (the umask when there is none); a chmod rewrites the access ACL.
  int acl_inherit(InodeObj* dir, mode_t* mode, mode_t umask, std::vector<xattr::Attr>* attrs);
  int acl_chmod_locked(InodeObj* in);
  // An access ACL set: the mode takes its bits; one the mode says whole is not stored.
  int acl_set_access(InodeObj* in, std::vector<xattr::Attr>* attrs, const std::string& value);
  // security.capability goes with a write, a truncation or a change of owner
  // (cap_inode_killpriv), whoever makes it.
  int kill_caps(InodeObj* in);

  int make_node(uint64_t parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid, dev_t rdev,
                const std::string* symlink_target, struct stat* st, mode_t umask = 0);
  int remove_entry(uint64_t parent, const std::string& name, bool want_dir);
  // Removes `name` (naming `victim`) from `dir`: a directory must be empty and loses all its
  // links (and `dir` the one its ".." held), a file loses one. Saves the victim, not `dir`.
  int drop_entry(InodeObj* dir, const std::string& name, InodeObj* victim);
  // The link bookkeeping of losing one name: a directory loses all its links (and `dir` the
  // one its ".." held), a file one. Saves the victim.
  int drop_links(InodeObj* dir, InodeObj* victim);
  // Commits when the transaction nears the journal's capacity, or when an operation about to
  // allocate up to `need_blocks` might not find them while freed blocks wait for a commit
  // (ext4_should_retry_alloc's forced commit, done before the operation changes anything).
  int maybe_commit(uint64_t need_blocks = 4);
  int commit_locked();
  int write_superblock(uint32_t state);
  void commit_thread(std::stop_token stop);

  BlockIo& io_;
  disk::SuperBlock sb_;
  MountOptions opts_;
  Journal journal_;
  MetaCache cache_;
  FsAllocator alloc_;
  uint32_t bs_;
  FsLock lock_;
  std::unordered_map<uint64_t, std::unique_ptr<InodeObj>> inodes_;
  int replayed_ = 0;
  // A failed commit leaves memory ahead of the disk: from then on nothing more is written
  // (changes get EROFS) and unmount leaves the superblock dirty, so fsck runs (as ext4's
  // errors=remount-ro). The disk stays as of the last good commit.
  int failed_ = 0;
  bool mounted_ = false;
  std::unique_ptr<EndIoWork> end_io_;  // unwritten-extent conversion after the data (writable mounts)
  std::mutex commit_wait_lock_;           // only for commit_wait_'s sleep
  std::condition_variable_any commit_wait_;
  std::jthread committer_;  // last: stopped and joined before the members it uses go
};

}  // namespace biofs
