#include "fuse_ops.h"

#include "live_toggles.h"

#include "data_requests.h"
#include "page_dropper.h"
#include "fuse_compat.h"
#include "fuse_reactor.h"
#include "stats.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace biofs {

namespace {

// libfuse's ring threads (fuse_uring=libfuse) are cancelled when the session loop ends (stock
// 3.18.3's fuse_uring_stop), at whatever cancellation point a handler waits in: a handler
// unwound half done leaves its request unanswered, its I/O's callback writing to a stack frame
// that is gone (HeldReply) and its locks held. As libfuse's /dev/fuse workers handle requests
// with cancellation disabled, a ring thread disables it at its first request, for good: it
// still ends, woken by the eventfd that fuse_uring_stop() writes.
thread_local bool tls_cancel_checked = false;
FuseContext* CTX(fuse_req_t req) {
  if (!tls_cancel_checked) [[unlikely]] {
    tls_cancel_checked = true;
    if (fuse_req_on_ring(req)) pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
  }
  return static_cast<FuseContext*>(fuse_req_userdata(req));
}
Filesystem* FS(fuse_req_t req) { return CTX(req)->fs; }

// Whether the caller may keep set-id bits over a write or truncation (CAP_FSETID): libfuse
// passes the uid, not capabilities, so root.
bool may_keep_setid(fuse_req_t req) { return fuse_req_ctx(req)->uid == 0; }

fuse_entry_param entry_of(fuse_req_t req, const struct stat& st) {
  fuse_entry_param e{};
  e.ino = st.st_ino;
  // In the kernel's file handles (export support): a number reused by a later file is then
  // a different file to a handle taken before (ESTALE), as on ext4.
  e.generation = FS(req)->generation(st.st_ino);
  e.attr = st;
  e.attr_timeout = CTX(req)->settings.timeout();
  e.entry_timeout = CTX(req)->settings.timeout();
  return e;
}

void reply_entry(fuse_req_t req, int err, const struct stat& st) {
  if (err) {
    fuse_reply_err(req, -err);
    return;
  }
  const fuse_entry_param e = entry_of(req, st);
  fuse_reply_entry(req, &e);
}

void op_init(void* userdata, fuse_conn_info* conn) {
  auto* ctx = static_cast<FuseContext*>(userdata);
  conn->max_write = 1u << 20;
  // Asynchronous direct I/O (io_uring, libaio) reaches us as background requests, of which
  // the kernel keeps max_background in flight (12 by default): too few for a depth of 64.
  conn->max_background = ctx->settings.max_background;
  conn->congestion_threshold = ctx->settings.max_background * 3 / 4;
  if (ctx->settings.writeback_cache && fuse_want(conn, FUSE_CAP_WRITEBACK_CACHE)) {
    // Buffered writes stay in the kernel's page cache until writeback, as on ext4. Their WRITE
    // requests come from the flusher and carry no writer, so the kernel clears the set-id bits
    // itself when the write() happens: without FUSE_CAP_HANDLE_KILLPRIV it sends the mode.
    fuse_unwant(conn, FUSE_CAP_HANDLE_KILLPRIV);
  } else {
#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
    // The daemon drops set-id bits and capabilities on write, truncation and chown itself
    // (fs/file.cc, file_io.cc), so the kernel may mark the superblock SB_NOSEC: it then stops
    // asking for security.capability before every write (a GETXATTR round trip each,
    // docs/results.md "Per operation").
    fuse_want(conn, FUSE_CAP_HANDLE_KILLPRIV_V2);
#endif
  }
  // Kept pages are dropped only for what the kernel cannot see (fuse_ops.h), not whenever a
  // file's mtime moves (libfuse's default FUSE_CAP_AUTO_INVAL_DATA, meant for servers whose
  // files change behind the kernel; nothing changes biofs's but this daemon).
  if (ctx->settings.keep_cache) fuse_unwant(conn, FUSE_CAP_AUTO_INVAL_DATA);
  // POSIX ACLs as ext4 has them: the kernel enforces and caches them, we keep the mode in step
  // and apply a directory's default ACL to what is made in it, so the umask is ours to apply.
  // File handles (name_to_handle_at, open_by_handle_at, NFS export) that outlive the kernel's
  // inode: it looks the number up as "." (Namei::lookup) and checks the generation.
  if (fuse_offers(conn, FUSE_CAP_EXPORT_SUPPORT)) fuse_want(conn, FUSE_CAP_EXPORT_SUPPORT);
  ctx->granted.posix_acl = fuse_offers(conn, FUSE_CAP_POSIX_ACL) && fuse_offers(conn, FUSE_CAP_DONT_MASK);
  if (ctx->granted.posix_acl) fuse_want(conn, FUSE_CAP_POSIX_ACL), fuse_want(conn, FUSE_CAP_DONT_MASK);
  // mmap() of a file opened O_DIRECT (direct_io), which ext4 allows (kernel >= 6.6; libfuse
  // >= 3.16 can ask for it).
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
  ctx->granted.direct_io_mmap = fuse_want(conn, FUSE_CAP_DIRECT_IO_ALLOW_MMAP);
#endif
  // libfuse asks for io_uring by default whenever the session has `-o io_uring`, or the
  // environment's FUSE_URING_ENABLE: only fuse_uring= decides here.
#if BIOFS_FUSE_HAS_URING
  if (!ctx->settings.want_uring) fuse_unwant(conn, FUSE_CAP_OVER_IO_URING);
#endif
}

void op_destroy(void* userdata) {
  auto* ctx = static_cast<FuseContext*>(userdata);
  ctx->fs->sync();
}

}  // namespace

int fuse_syncfs(void* userdata) { return static_cast<FuseContext*>(userdata)->fs->sync(); }

namespace {

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  struct stat st;
  const int err = FS(req)->lookup(parent, name, &st);
  if (err == -ENOENT && CTX(req)->settings.keep_cache) {
    // A negative entry: the kernel remembers the name is absent (a compiler's include path
    // asks for thousands) until it creates it itself.
    fuse_entry_param e{};
    e.entry_timeout = CTX(req)->settings.timeout();
    return (void)fuse_reply_entry(req, &e);
  }
  reply_entry(req, err, st);
}

// Over io_uring, forgets (and interrupts) still come through /dev/fuse, to a worker of their
// own. Each unlink or evicted inode sends one, and a worker waiting in read() is woken for each:
// a wake-up of the other CPU per unlink. Pausing before the next read lets them gather, so the
// kernel hands over one BATCH_FORGET per pause (forgets need no answer; an interrupt waits at
// most the pause).
constexpr int kForgetGatherUs = 1000;
void gather_forgets(const FuseContext* ctx) {
  if (ctx->settings.want_uring || ctx->attached.reactor) std::this_thread::sleep_for(std::chrono::microseconds(kForgetGatherUs));
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  FuseContext* ctx = CTX(req);
  FS(req)->forget(ino, nlookup);
  fuse_reply_none(req);
  gather_forgets(ctx);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  FuseContext* ctx = CTX(req);
  for (size_t i = 0; i < count; i++) FS(req)->forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
  gather_forgets(ctx);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  if (int err = FS(req)->getattr(ino, &st)) fuse_reply_err(req, -err);
  else fuse_reply_attr(req, &st, CTX(req)->settings.timeout());
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  struct stat st;
  if (int err = FS(req)->setattr(ino, to_set, *attr, &st, may_keep_setid(req))) fuse_reply_err(req, -err);
  else fuse_reply_attr(req, &st, CTX(req)->settings.timeout());
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  std::string target;
  if (int err = FS(req)->readlink(ino, &target)) fuse_reply_err(req, -err);
  else fuse_reply_readlink(req, target.c_str());
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  const int err = FS(req)->mknod(parent, name, mode, c->uid, c->gid, rdev, &st, c->umask);
  reply_entry(req, err, st);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  const int err = FS(req)->mkdir(parent, name, mode, c->uid, c->gid, &st, c->umask);
  reply_entry(req, err, st);
}

void op_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  const int err = FS(req)->symlink(parent, name, link, c->uid, c->gid, &st);
  reply_entry(req, err, st);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  struct stat st;
  const int err = FS(req)->link(ino, newparent, newname, &st);
  reply_entry(req, err, st);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, -FS(req)->unlink(parent, name));
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, -FS(req)->rmdir(parent, name));
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned flags) {
  const fuse_ctx* c = fuse_req_ctx(req);
  fuse_reply_err(req, -FS(req)->rename(parent, name, newparent, newname, flags, c->uid, c->gid));
}

bool direct_writer(const fuse_file_info* fi) { return (fi->flags & O_DIRECT) && (fi->flags & O_ACCMODE) != O_RDONLY; }
// An open that is followed by reads: O_RDONLY. An O_RDWR open is as often for writes or an
// fsync alone (xfs_io's default), after which ext4 shows no atime moved (generic/392).
bool reader(const fuse_file_info* fi) { return (fi->flags & O_ACCMODE) == O_RDONLY; }

// O_DIRECT: no page cache in the kernel either, every read and write reaches the device.
// Otherwise the kernel keeps the file's pages from earlier opens unless a direct writer may
// have changed the file under them (Filesystem::open).

// A handle through the page cache is counted until its release (cached_opens.h).
void set_caching(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, bool cache_valid) {
  if (fi->flags & O_DIRECT) {
    fi->direct_io = 1;
    fi->fh = FH_DIRECT_IO;
  } else {
    fi->keep_cache = CTX(req)->settings.keep_cache && cache_valid;
    CTX(req)->cached_opens.opened(ino);
  }
}

// libfuse takes FUSE_CAP_ATOMIC_O_TRUNC by default: the kernel then sends O_TRUNC inside OPEN
// (no SETATTR), so open itself truncates, under truncate's rules.
void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  bool cache_valid = false;
  if (int err = FS(req)->may_open(ino, fi->flags)) return (void)fuse_reply_err(req, -err);  // chattr's flags
  if (int err = FS(req)->open(ino, fi->flags & O_TRUNC, direct_writer(fi), &cache_valid, may_keep_setid(req), reader(fi))) {
    fuse_reply_err(req, -err);
    return;
  }
  set_caching(req, ino, fi, cache_valid);
  fuse_reply_open(req, fi);
}

void reply_create(fuse_req_t req, const struct stat& st, fuse_file_info* fi, bool cache_valid) {
  set_caching(req, st.st_ino, fi, cache_valid);
  const fuse_entry_param e = entry_of(req, st);
  fuse_reply_create(req, &e, fi);
}

// O_CREAT. Two openers racing on a new name both get here; without O_EXCL the one that loses
// opens what the other made (truncating it on O_TRUNC), as open(2) does.
void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  int err = FS(req)->mknod(parent, name, S_IFREG | (mode & 07777), c->uid, c->gid, 0, &st, c->umask);
  if (err == -EEXIST && !(fi->flags & O_EXCL) && (err = FS(req)->lookup(parent, name, &st)) == 0) {
    if (!S_ISREG(st.st_mode)) {
      FS(req)->forget(st.st_ino, 1);
      return (void)fuse_reply_err(req, S_ISDIR(st.st_mode) ? EISDIR : EEXIST);
    }
    bool cache_valid = false;
    if ((err = FS(req)->may_open(st.st_ino, fi->flags)) == 0 && (err = FS(req)->open(st.st_ino, fi->flags & O_TRUNC, direct_writer(fi), &cache_valid, may_keep_setid(req),
                             reader(fi))) == 0)
      FS(req)->getattr(st.st_ino, &st);
    else FS(req)->forget(st.st_ino, 1);
    if (err) return (void)fuse_reply_err(req, -err);
    return reply_create(req, st, fi, cache_valid);
  }
  if (!err) err = FS(req)->open(st.st_ino, false, direct_writer(fi));
  if (err) return (void)fuse_reply_err(req, -err);
  reply_create(req, st, fi, true);  // a new file: nothing cached yet
}

#if BIOFS_FUSE_HAS_TMPFILE_STATX
// O_TMPFILE (FUSE_TMPFILE, kernel 6.1+): a file with no name, opened; linkat(2) may name it later.
void op_tmpfile(fuse_req_t req, fuse_ino_t parent, mode_t mode, fuse_file_info* fi) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  int err = FS(req)->tmpfile(parent, mode, c->uid, c->gid, &st, c->umask);
  if (!err && (err = FS(req)->open(st.st_ino, false, direct_writer(fi)))) FS(req)->forget(st.st_ino, 1);
  if (err) return (void)fuse_reply_err(req, -err);
  reply_create(req, st, fi, true);
}

// statx(2) beyond the basic fields (FUSE_STATX, kernel 6.6+): the kernel asks only when the
// caller wants what getattr lacks, here the birth time.
void op_statx(fuse_req_t req, fuse_ino_t ino, int, int, fuse_file_info*) {
  struct stat st;
  struct timespec btime;
  if (int err = FS(req)->getattr(ino, &st, &btime)) return (void)fuse_reply_err(req, -err);
  struct statx x{};
  x.stx_mask = STATX_BASIC_STATS | STATX_BTIME;
  x.stx_blksize = uint32_t(st.st_blksize);
  x.stx_nlink = uint32_t(st.st_nlink);
  x.stx_uid = st.st_uid;
  x.stx_gid = st.st_gid;
  x.stx_mode = uint16_t(st.st_mode);
  x.stx_ino = st.st_ino;
  x.stx_size = uint64_t(st.st_size);
  x.stx_blocks = uint64_t(st.st_blocks);
  const auto ts = [](const struct timespec& t) { return statx_timestamp{t.tv_sec, uint32_t(t.tv_nsec), 0}; };
  x.stx_atime = ts(st.st_atim);
  x.stx_mtime = ts(st.st_mtim);
  x.stx_ctime = ts(st.st_ctim);
  x.stx_btime = ts(btime);
  x.stx_rdev_major = major(st.st_rdev);
  x.stx_rdev_minor = minor(st.st_rdev);
  fuse_reply_statx(req, 0, &x, CTX(req)->settings.timeout());
}
#endif

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  read_data(libfuse_data_request(CTX(req), req), ino, size, off);
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  write_data(libfuse_data_request(CTX(req), req), ino, buf, size, off, fi, may_keep_setid(req));
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (fi->fh != FH_DIRECT_IO) CTX(req)->cached_opens.released(ino);
  FS(req)->release(ino, direct_writer(fi));
  fuse_reply_err(req, 0);
}

// Directory listings are cached by the kernel (and kept across opens) with keep_cache=on: it
// drops them itself when it changes the directory.
void op_opendir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  if (CTX(req)->settings.keep_cache) fi->cache_readdir = fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  fuse_reply_err(req, -FS(req)->fsync(ino, datasync != 0));
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  std::vector<char> buf(size);
  size_t used = 0;
  const int err = FS(req)->readdir(ino, uint64_t(off), [&](const std::string& name, uint64_t child, unsigned type,
                                                           uint64_t next) {
    struct stat st{};
    st.st_ino = child;
    st.st_mode = type << 12;
    const size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, off_t(next));
    if (need > size - used) return false;
    used += need;
    return true;
  });
  if (err && used == 0) fuse_reply_err(req, -err);
  else fuse_reply_buf(req, buf.data(), used);
}

// readdirplus: entries with their attributes, each (but "." and "..") counting as a lookup.
// The names are gathered first: the filesystem's readdir holds its lock while it calls back.
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  struct Item {
    std::string name;
    uint64_t ino;
    unsigned type;
    uint64_t next;
  };
  std::vector<Item> items;
  size_t estimate = 0;
  const int err = FS(req)->readdir(ino, uint64_t(off), [&](const std::string& name, uint64_t child, unsigned type,
                                                           uint64_t next) {
    estimate += fuse_add_direntry_plus(req, nullptr, 0, name.c_str(), nullptr, 0);
    if (estimate > size && !items.empty()) return false;
    items.push_back({name, child, type, next});
    return true;
  });
  if (err && items.empty()) {
    fuse_reply_err(req, -err);
    return;
  }
  std::vector<char> buf(size);
  size_t used = 0;
  for (const Item& it : items) {
    fuse_entry_param e{};
    const bool dots = it.name == "." || it.name == "..";
    if (dots) {
      e.attr.st_ino = it.ino;
      e.attr.st_mode = it.type << 12;
    } else {
      struct stat st;
      if (FS(req)->lookup(ino, it.name, &st) != 0) continue;  // removed meanwhile
      e = entry_of(req, st);  // the generation too: the kernel drops an entry whose one differs
    }
    const size_t need = fuse_add_direntry_plus(req, buf.data() + used, size - used, it.name.c_str(), &e, off_t(it.next));
    if (need > size - used) {
      if (!dots) FS(req)->forget(e.ino, 1);
      break;
    }
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  fuse_reply_err(req, -FS(req)->fsync(ino, datasync != 0));
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st;
  if (int err = FS(req)->statfs(&st)) fuse_reply_err(req, -err);
  else fuse_reply_statfs(req, &st);
}

// in_group_or_capable() (fs/inode.c): the caller is root, or the file's group is its own or one
// of its supplementary groups. The kernel leaves this to a FUSE server for an ACL's set-group-ID
// rule (it sends FUSE_SETXATTR_ACL_KILL_SGID, which libfuse does not pass on).
bool in_group_or_capable(fuse_req_t req, gid_t file_gid) {
  if (may_keep_setid(req) || file_gid == fuse_req_ctx(req)->gid) return true;
  gid_t groups[64];
  const int n = fuse_req_getgroups(req, 64, groups);
  for (int i = 0; i < std::min(n, 64); i++)
    if (groups[i] == file_gid) return true;
  return false;
}

// file_modified()'s privilege drop after a fallocate (setattr_should_drop_suidgid(), fs/attr.c,
// v6.18), which FUSE leaves to the server (FUSE_FALLOCATE carries no kill flag, unlike a
// write): for a caller without CAP_FSETID, set-user-ID always goes, set-group-ID when the file
// is group-executable or the caller is outside its group. The kernel keeps the mode it cached
// (a fallocate inside the file changes no size it would refresh), so it is told. generic/683-685.
int drop_suidgid_after_fallocate(fuse_req_t req, fuse_ino_t ino) {
  struct stat st;
  if (may_keep_setid(req) || FS(req)->getattr(ino, &st) != 0) return 0;
  mode_t kill = st.st_mode & S_ISUID;
  if ((st.st_mode & S_ISGID) && ((st.st_mode & S_IXGRP) || !in_group_or_capable(req, st.st_gid))) kill |= S_ISGID;
  if (!kill) return 0;
  struct stat attr{}, out;
  attr.st_mode = st.st_mode & ~kill;
  const int err = FS(req)->setattr(ino, FUSE_SET_ATTR_MODE, attr, &out);
  if (!err) FS(req)->attrs_changed(ino);
  return err;
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, fuse_file_info*) {
  if (off < 0 || len <= 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  int err = FS(req)->fallocate(ino, mode, uint64_t(off), uint64_t(len));
  if (!err) err = drop_suidgid_after_fallocate(req, ino);
  fuse_reply_err(req, -err);
}

void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info*) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) {
    // SEEK_SET/CUR/END never reach a filesystem that does not ask for them; be explicit anyway.
    fuse_reply_err(req, EINVAL);
    return;
  }
  const int64_t r = off < 0 ? -ENXIO : FS(req)->lseek(ino, uint64_t(off), whence);
  if (r < 0) fuse_reply_err(req, int(-r));
  else fuse_reply_lseek(req, r);
}

// Without FUSE_CAP_POSIX_ACL the kernel would neither enforce ACLs nor keep the mode in step:
// refuse them as a filesystem without ACLs does (cp -a then succeeds without them).
bool acl_refused(fuse_req_t req, const char* name) {
  return !CTX(req)->granted.posix_acl && std::string_view(name).rfind("system.posix_acl_", 0) == 0;
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  if (ino == STATS_INO && std::string_view(name) == SET_XATTR) {  // a live toggle (live_toggles.h): root only
    if (fuse_req_ctx(req)->uid != 0) return (void)fuse_reply_err(req, EPERM);
    LiveToggles* live = CTX(req)->attached.live;
    std::string why;
    const int err = live ? live->set(std::string_view(value, size), &why) : -EOPNOTSUPP;
    if (err) fprintf(stderr, "biofs: %s: %s\n", SET_XATTR, why.c_str());
    return (void)fuse_reply_err(req, -err);
  }
  if (acl_refused(req, name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  flags &= XATTR_CREATE | XATTR_REPLACE;
  struct stat st;
  if (std::string_view(name) == "system.posix_acl_access" && FS(req)->getattr(ino, &st) == 0 &&
      !in_group_or_capable(req, st.st_gid))
    flags |= XATTR_ACL_KILL_SGID;
  fuse_reply_err(req, -FS(req)->setxattr(ino, name, std::string(value, size), flags));
}

// The size protocol of getxattr/listxattr: size 0 asks for the length; too small is ERANGE.
void reply_xattr(fuse_req_t req, int err, const std::string& v, size_t size) {
  if (err) fuse_reply_err(req, -err);
  else if (size == 0) fuse_reply_xattr(req, v.size());
  else if (size < v.size()) fuse_reply_err(req, ERANGE);
  else fuse_reply_buf(req, v.data(), v.size());
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (is_stats_xattr(ino, name)) {  // fs/stats.h: for root and the mounting user only
    const uid_t uid = fuse_req_ctx(req)->uid;
    if (uid != 0 && uid != CTX(req)->settings.owner) return (void)fuse_reply_err(req, EACCES);
    FuseContext* ctx = CTX(req);
    const RequestTransport* via = ctx->io.transport.load(std::memory_order_relaxed);
    FuseStats fuse{ctx->settings.requested_uring, via ? via->name() : "none yet",
                   ctx->settings.ring_sched_idle ? "idle" : "normal", ctx->io.replies_elsewhere.load(std::memory_order_relaxed)};
    fuse.polled = ctx->io.polled.load(std::memory_order_relaxed);
    if (const PageDropper* d = ctx->attached.page_dropper) fuse.page_drops = d->dropped();
    fuse.libfuse = fuse_pkgversion();
    fuse.direct_io_mmap = ctx->granted.direct_io_mmap;
    fuse.dev_payload_aligned = fuse_dev_payload_aligned();
    fuse.journal_commits = ctx->fs->commits();
    fuse.read_only = ctx->fs->read_only();
    if (const FuseReactor* r = ctx->attached.reactor) {
      fuse.reactor = true;
      fuse.reactor_requests = r->requests();
      fuse.reactor_posted = r->replies_posted();
      fuse.reactor_hot = r->hot_requests();
      fuse.reactor_error = r->error();
      fuse.reactor_fixed_buffers = r->fixed_buffers();
      fuse.reactor_covering = r->covering();
      fuse.reactor_device_reaps = r->device_reaps();
      fuse.reactor_fixed_error = r->fixed_buffers_error();
    }
    if (const RingGuard* g = ctx->attached.ring_guard) {
      fuse.guard_boosts = g->boosts();
      fuse.guard_boosted = g->boosted();
      fuse.guard_io_boosts = g->io_boosts();
    }
    const DeviceStats device = ctx->attached.device_stats ? ctx->attached.device_stats() : DeviceStats{};
    IoContract contract = ctx->attached.contract;
    if (!fuse.reactor_error.empty()) contract.unavailable.push_back(fuse.reactor_error);
    if (!fuse.reactor_fixed_error.empty())
      contract.unavailable.push_back("the reactor's fixed buffers: " + fuse.reactor_fixed_error);
    return reply_xattr(req, 0, stats_json(FS(req)->io(), &fuse, ctx->attached.device_stats ? &device : nullptr, &contract, ctx->attached.live),
                       size);
  }
  std::string v;
  const int err = FS(req)->getxattr(ino, name, &v);
  reply_xattr(req, err, v, size);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  std::string v;
  const int err = FS(req)->listxattr(ino, &v);
  reply_xattr(req, err, v, size);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  fuse_reply_err(req, -FS(req)->removexattr(ino, name));
}

// copy_file_range(2): the daemon copies in 1 MiB steps itself, as bios, instead of the kernel
// falling back to a read and a write through FUSE for every step.
void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, fuse_file_info*, fuse_ino_t ino_out,
                        off_t off_out, fuse_file_info*, size_t len, int flags) {
  if (flags) return (void)fuse_reply_err(req, EINVAL);
  const ssize_t n = FS(req)->copy_file_range(ino_in, uint64_t(off_in), ino_out, uint64_t(off_out), len);
  if (n < 0) return (void)fuse_reply_err(req, int(-n));
  fuse_reply_write(req, size_t(n));
}

// lsattr/chattr (FS_IOC_GETFLAGS/SETFLAGS, which the kernel's fileattr code forwards after
// checking CAP_LINUX_IMMUTABLE; fs/attr_flags.h), the shutdown and FITRIM. Every other ioctl is
// ENOTTY, as on a filesystem that does not know it.
constexpr unsigned int kShutdown = _IOR('X', 125, uint32_t);  // EXT4_IOC_SHUTDOWN

void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info*, unsigned flags,
              const void* in_buf, size_t in_bufsz, size_t out_bufsz) {
  if (flags & FUSE_IOCTL_COMPAT) return (void)fuse_reply_err(req, ENOSYS);
  struct stat st;
  if (int err = FS(req)->getattr(ino, &st)) return (void)fuse_reply_err(req, -err);
  // Both forms: the flags word (FS_IOC_[GS]ETFLAGS) and struct fsxattr (FS_IOC_FS[GS]ETXATTR,
  // which the kernel reads first when a flags change comes in).
  const unsigned int get = FS_IOC_GETFLAGS, set = FS_IOC_SETFLAGS;  // truncated to 32 bits, as libfuse passes them
  if ((cmd == get && out_bufsz >= sizeof(int)) || (cmd == FS_IOC_FSGETXATTR && out_bufsz >= sizeof(fsxattr))) {
    uint32_t flags;
    if (int err = FS(req)->get_attr_flags(ino, &flags)) return (void)fuse_reply_err(req, -err);
    if (cmd == get) return (void)fuse_reply_ioctl(req, 0, &flags, sizeof(int));
    fsxattr x{};
    x.fsx_xflags = xflags_from_fs_flags(flags);
    return (void)fuse_reply_ioctl(req, 0, &x, sizeof(x));
  }
  if ((cmd == set && in_bufsz >= sizeof(int)) || (cmd == FS_IOC_FSSETXATTR && in_bufsz >= sizeof(fsxattr))) {
    uint32_t want;  // the flags word, or fsx_xflags (the first member)
    std::memcpy(&want, in_buf, sizeof(want));
    int64_t flags = want;
    if (cmd != set && (flags = fs_flags_from_xflags(want)) < 0) return (void)fuse_reply_err(req, EOPNOTSUPP);
    if (int err = FS(req)->set_attr_flags(ino, uint32_t(flags))) return (void)fuse_reply_err(req, -err);
    return (void)fuse_reply_ioctl(req, 0, nullptr, 0);
  }
  // EXT4_IOC_SHUTDOWN, XFS_IOC_GOINGDOWN's number (xfs_io's shutdown, xfstests' godown): for
  // root only, as ext4's CAP_SYS_ADMIN. Its flags never arrive: the number says _IOR, so the
  // kernel's FUSE client (fuse_do_ioctl(), restricted ioctls) copies nothing in. Without them it
  // is LOGFLUSH (`godown -f`): the running transaction is committed, then writing stops.
  if (cmd == kShutdown) {
    if (fuse_req_ctx(req)->uid != 0) return (void)fuse_reply_err(req, EPERM);
    uint32_t going = Super::GOING_FLAGS_LOGFLUSH;
    if (in_bufsz >= sizeof(going)) std::memcpy(&going, in_buf, sizeof(going));
    if (int err = FS(req)->shutdown(going)) return (void)fuse_reply_err(req, -err);
    return (void)fuse_reply_ioctl(req, 0, nullptr, 0);
  }
  // FITRIM (fstrim(8), on any file or directory of the mount): the free space of the range
  // discarded, the bytes discarded in the reply's len; for root only, as ext4's CAP_SYS_ADMIN.
  if (cmd == FITRIM && in_bufsz >= sizeof(fstrim_range) && out_bufsz >= sizeof(fstrim_range)) {
    if (fuse_req_ctx(req)->uid != 0) return (void)fuse_reply_err(req, EPERM);
    fstrim_range r;
    std::memcpy(&r, in_buf, sizeof(r));
    uint64_t trimmed;
    if (int err = FS(req)->trim(TrimRange{r.start, r.len, r.minlen}, &trimmed)) return (void)fuse_reply_err(req, -err);
    r.len = trimmed;
    return (void)fuse_reply_ioctl(req, 0, &r, sizeof(r));
  }
  fuse_reply_err(req, ENOTTY);
}

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops o{};
  o.init = op_init;
  o.destroy = op_destroy;
  o.lookup = op_lookup;
  o.forget = op_forget;
  o.forget_multi = op_forget_multi;
  o.getattr = op_getattr;
  o.setattr = op_setattr;
  o.readlink = op_readlink;
  o.mknod = op_mknod;
  o.mkdir = op_mkdir;
  o.symlink = op_symlink;
  o.link = op_link;
  o.unlink = op_unlink;
  o.rmdir = op_rmdir;
  o.rename = op_rename;
  o.open = op_open;
  o.create = op_create;
#if BIOFS_FUSE_HAS_TMPFILE_STATX
  o.tmpfile = op_tmpfile;
  o.statx = op_statx;
#endif
  o.read = op_read;
  o.write = op_write;
  // No flush: close(2) has nothing to wait for here (writes are answered once on the device,
  // writeback is written before the kernel would send FUSE_FLUSH, locks are the kernel's).
  // libfuse answers ENOSYS to the first FUSE_FLUSH and the kernel sends no more (no_flush),
  // one round trip less per close.
  o.release = op_release;
  o.opendir = op_opendir;
  o.fsync = op_fsync;
  o.readdir = op_readdir;
  o.readdirplus = op_readdirplus;
  o.fsyncdir = op_fsyncdir;
  o.statfs = op_statfs;
  o.fallocate = op_fallocate;
  o.lseek = op_lseek;
  o.setxattr = op_setxattr;
  o.getxattr = op_getxattr;
  o.listxattr = op_listxattr;
  o.removexattr = op_removexattr;
  o.copy_file_range = op_copy_file_range;
  o.ioctl = op_ioctl;
  return o;
}

const fuse_lowlevel_ops kOps = make_ops();

}  // namespace

const fuse_lowlevel_ops* biofs_fuse_ops() { return &kOps; }

}  // namespace biofs
