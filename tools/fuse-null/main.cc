// fuse-null: a FUSE server that does no work, the bound a FUSE filesystem is measured against
// (issue 48: "what the kernel's FUSE client costs for that operation with a daemon that does
// nothing, measured the same way"). It keeps a tree of names and attributes in memory and no
// data: a write moves the size, a read returns zeros. Everything else is biofs's: the same
// transport (biofs's reactor over FUSE-over-io_uring, its threads in SCHED_IDLE with the ring
// guard, or /dev/fuse), the same capabilities asked at INIT, the same timeouts, negative
// entries and readdirplus, so a request costs here what the kernel and the transport cost
// biofs, and nothing of the filesystem.
//
//   fuse-null MOUNTPOINT [--transport reactor|dev]     (runs in the foreground until unmounted)
#include "daemon/fuse_compat.h"
#include "daemon/fuse_reactor.h"
#include "daemon/mount_options.h"
#include "daemon/ring_guard.h"
#include "null_tree.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using biofs::NullTree;
using biofs::fuse_offers;
using biofs::fuse_unwant;
using biofs::fuse_want;
constexpr double kTimeout = 86400.0;  // biofs's with keep_cache=on (the default)

NullTree& tree(fuse_req_t req) { return *static_cast<NullTree*>(fuse_req_userdata(req)); }

void reply_entry(fuse_req_t req, int err, const struct stat& st) {
  if (err == ENOENT) {  // a negative entry, as biofs gives
    fuse_entry_param e{};
    e.entry_timeout = kTimeout;
    return (void)fuse_reply_entry(req, &e);
  }
  if (err) return (void)fuse_reply_err(req, err);
  fuse_entry_param e{};
  e.ino = st.st_ino;
  e.attr = st;
  e.attr_timeout = e.entry_timeout = kTimeout;
  fuse_reply_entry(req, &e);
}

void reply_made(fuse_req_t req, int err, const struct stat& st) {
  if (err) return (void)fuse_reply_err(req, err);
  reply_entry(req, 0, st);
}

void op_init(void*, fuse_conn_info* conn) {
  conn->max_write = 1u << 20;
#ifdef FUSE_CAP_HANDLE_KILLPRIV_V2
  fuse_want(conn, FUSE_CAP_HANDLE_KILLPRIV_V2);
#endif
  fuse_unwant(conn, FUSE_CAP_AUTO_INVAL_DATA);
  if (fuse_offers(conn, FUSE_CAP_POSIX_ACL) && fuse_offers(conn, FUSE_CAP_DONT_MASK))
    fuse_want(conn, FUSE_CAP_POSIX_ACL), fuse_want(conn, FUSE_CAP_DONT_MASK);
#if BIOFS_FUSE_HAS_URING
  fuse_unwant(conn, FUSE_CAP_OVER_IO_URING);  // the reactor's ring, not libfuse's
#endif
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  struct stat st;
  reply_entry(req, tree(req).lookup(parent, name, &st), st);
}
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
  tree(req).forget(ino, n);
  fuse_reply_none(req);
}
void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* f) {
  for (size_t i = 0; i < count; i++) tree(req).forget(f[i].ino, f[i].nlookup);
  fuse_reply_none(req);
}
void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  if (int err = tree(req).getattr(ino, &st)) return (void)fuse_reply_err(req, err);
  fuse_reply_attr(req, &st, kTimeout);
}
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  struct stat st;
  if (int err = tree(req).setattr(ino, *attr, to_set, &st)) return (void)fuse_reply_err(req, err);
  fuse_reply_attr(req, &st, kTimeout);
}
void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  std::string target;
  if (int err = tree(req).readlink(ino, &target)) return (void)fuse_reply_err(req, err);
  fuse_reply_readlink(req, target.c_str());
}
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  reply_made(req, tree(req).make(parent, name, mode & ~c->umask, c->uid, c->gid, rdev, "", &st), st);
}
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  reply_made(req, tree(req).make(parent, name, S_IFDIR | (mode & ~c->umask & 07777), c->uid, c->gid, 0, "", &st),
             st);
}
void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  reply_made(req, tree(req).make(parent, name, S_IFLNK | 0777, c->uid, c->gid, 0, target, &st), st);
}
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name) {
  struct stat st;
  reply_made(req, tree(req).link(ino, parent, name, &st), st);
}
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, tree(req).unlink(parent, name, false));
}
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, tree(req).unlink(parent, name, true));
}
void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned int flags) {
  fuse_reply_err(req, tree(req).rename(parent, name, newparent, newname, flags));
}
void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (fi->flags & O_TRUNC) {
    struct stat want{}, st;
    if (int err = tree(req).setattr(ino, want, FUSE_SET_ATTR_SIZE, &st)) return (void)fuse_reply_err(req, err);
  }
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}
void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  const fuse_ctx* c = fuse_req_ctx(req);
  struct stat st;
  if (int err = tree(req).make(parent, name, S_IFREG | (mode & ~c->umask & 07777), c->uid, c->gid, 0, "", &st))
    return (void)fuse_reply_err(req, err);
  fuse_entry_param e{};
  e.ino = st.st_ino;
  e.attr = st;
  e.attr_timeout = e.entry_timeout = kTimeout;
  fi->keep_cache = 1;
  fuse_reply_create(req, &e, fi);
}

// Data is not kept: a read gives zeros up to the size, a write moves the size.
const std::vector<char>& zeros() {
  static const std::vector<char> z(1u << 20);
  return z;
}
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  fuse_reply_buf(req, zeros().data(), tree(req).readable(ino, uint64_t(off), std::min(size, zeros().size())));
}
void op_write(fuse_req_t req, fuse_ino_t ino, const char*, size_t size, off_t off, fuse_file_info*) {
  tree(req).wrote(ino, uint64_t(off), size);
  fuse_reply_write(req, size);
}
void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }
void op_opendir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  fi->cache_readdir = fi->keep_cache = 1;  // the kernel keeps listings, as biofs lets it
  fuse_reply_open(req, fi);
}

void op_readdir_any(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  std::vector<char> buf(size);
  size_t used = 0;
  const int err = tree(req).readdir(ino, uint64_t(off), [&](const std::string& name, const struct stat& st,
                                                              uint64_t next) {
    const bool dots = name == "." || name == "..";
    size_t need;
    if (plus) {
      fuse_entry_param e{};
      e.attr = st;
      if (!dots) e.ino = st.st_ino, e.attr_timeout = e.entry_timeout = kTimeout;
      need = fuse_add_direntry_plus(req, buf.data() + used, size - used, name.c_str(), &e, off_t(next));
    } else {
      need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, off_t(next));
    }
    if (need > size - used) return false;
    if (plus && !dots) tree(req).remember(st.st_ino);  // each entry counts as a lookup
    used += need;
    return true;
  });
  if (err && used == 0) return (void)fuse_reply_err(req, err);
  fuse_reply_buf(req, buf.data(), used);
}
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  op_readdir_any(req, ino, size, off, false);
}
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  op_readdir_any(req, ino, size, off, true);
}
void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }
void op_fsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); }
void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv{};
  sv.f_bsize = sv.f_frsize = 4096;
  sv.f_blocks = sv.f_bfree = sv.f_bavail = 1u << 30;
  sv.f_files = sv.f_ffree = sv.f_favail = 1u << 30;
  sv.f_namemax = 255;
  fuse_reply_statfs(req, &sv);
}
void op_setxattr(fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) { fuse_reply_err(req, 0); }
void op_getxattr(fuse_req_t req, fuse_ino_t, const char*, size_t) { fuse_reply_err(req, ENODATA); }
void op_listxattr(fuse_req_t req, fuse_ino_t, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, 0);
  fuse_reply_buf(req, nullptr, 0);
}
void op_removexattr(fuse_req_t req, fuse_ino_t, const char*) { fuse_reply_err(req, ENODATA); }

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops o{};
  o.init = op_init;
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
  o.read = op_read;
  o.write = op_write;
  o.release = op_release;  // no flush, as biofs: one ENOSYS and the kernel sends no more
  o.opendir = op_opendir;
  o.readdir = op_readdir;
  o.readdirplus = op_readdirplus;
  o.releasedir = op_releasedir;
  o.fsync = op_fsync;
  o.fsyncdir = op_fsync;
  o.statfs = op_statfs;
  o.setxattr = op_setxattr;
  o.getxattr = op_getxattr;
  o.listxattr = op_listxattr;
  o.removexattr = op_removexattr;
  return o;
}

// READ and WRITE straight from the ring entry, as biofs's fuse_uring_hot=on (the default).
void hot_request(void* userdata, const biofs::FuseReactor::HotRequest& r) {
  auto* t = static_cast<NullTree*>(userdata);
  if (r.in->opcode == FUSE_WRITE) {
    const auto* w = static_cast<const fuse_write_in*>(r.arg);
    t->wrote(r.in->nodeid, w->offset, w->size);
    const fuse_write_out out{w->size, 0};
    return biofs::FuseReactor::reply_hot(r.entry, 0, &out, sizeof(out));
  }
  const auto* rd = static_cast<const fuse_read_in*>(r.arg);
  const size_t n = t->readable(r.in->nodeid, rd->offset, std::min<size_t>(rd->size, r.payload_size));
  std::memset(r.payload, 0, n);
  biofs::FuseReactor::reply_hot(r.entry, 0, r.payload, n);
}

int usage() {
  fprintf(stderr, "usage: fuse-null MOUNTPOINT [--transport reactor|dev]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mnt = argv[1];
  bool reactor_wanted = true;
  for (int i = 2; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--transport" && i + 1 < argc) {
      const std::string t = argv[++i];
      if (t != "reactor" && t != "dev") return usage();
      reactor_wanted = t == "reactor";
    } else {
      return usage();
    }
  }
  NullTree nt(getuid(), getgid());
  std::vector<const char*> fargv = {argv[0], "-o", "fsname=fuse-null,subtype=null,default_permissions"};
  fuse_args args = FUSE_ARGS_INIT(int(fargv.size()), const_cast<char**>(fargv.data()));
  const fuse_lowlevel_ops ops = make_ops();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &nt);
  fuse_opt_free_args(&args);
  if (!se || fuse_set_signal_handlers(se) || fuse_session_mount(se, mnt.c_str())) {
    fprintf(stderr, "fuse-null: cannot mount on '%s'\n", mnt.c_str());
    return 1;
  }
  std::unique_ptr<biofs::FuseReactor> reactor;
  std::unique_ptr<biofs::RingGuard> guard;
  if (reactor_wanted) {
    biofs::FuseReactor::Config rc;
    rc.sched_idle = biofs::RingGuard::may_leave_idle();  // fuse_uring_sched=auto, as biofs decides it
    rc.hot_request = hot_request;
    rc.userdata = &nt;
    if (biofs::Status s = biofs::FuseReactor::attach(se, fuse_session_fd(se), rc, &reactor); !s.ok()) {
      fprintf(stderr, "fuse-null: %s\n", s.message().c_str());
      fuse_session_unmount(se);
      return 1;
    }
    if (rc.sched_idle) {
      biofs::RingGuard::Config gc;
      gc.rings = unsigned(sysconf(_SC_NPROCESSORS_CONF));
      guard = std::make_unique<biofs::RingGuard>(gc);
    }
  }
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 0);
  fuse_loop_cfg_set_max_threads(cfg, biofs::default_fuse_threads());
  const int ret = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  fuse_session_unmount(se);
  if (reactor) reactor->stop();
  guard.reset();
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return ret < 0 ? 1 : 0;
}
