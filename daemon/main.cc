// biofs: mounts a biofs filesystem with FUSE.
//   biofs DEVICE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]
// DEVICE is a device string (emu:PATH, nvme:/dev/ngXnY, null:SIZE) or a plain path (emu:PATH).
// Without -f the daemon detaches once the mount is up; any error before that is printed by the
// parent as one line, and the exit status is 1 (usage) or 32 (mount failure), as mount(8).
#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "daemon/fuse_ops.h"
#include "daemon/live_toggles.h"
#include "daemon/daemon_switches.h"
#include "daemon/fuse_reactor.h"
#include "devices/io_contract.h"
#include "daemon/fuse_transport.h"
#include "daemon/fuseblk.h"
#include "daemon/syncfs.h"
#include "devices/device_lock.h"
#include "daemon/mount_options.h"
#include "daemon/page_dropper.h"
#include "daemon/read_only_watch.h"
#include "daemon/remount.h"
#include "devices/block_trace.h"
#include "devices/open_device.h"
#include "fs/mkfs.h"

using namespace biofs;

namespace {

int g_report_fd = -1;  // the parent's pipe while daemonizing

[[noreturn]] void fail(int code, const std::string& msg) {
  const std::string line = "biofs: " + msg + "\n";
  if (g_report_fd >= 0) {
    if (write(g_report_fd, line.data(), line.size()) < 0) {}
  } else {
    fputs(line.c_str(), stderr);
  }
  _exit(code);
}

// Forks; the parent waits for the child's first line and exits with its verdict.
void daemonize() {
  int fds[2];
  if (pipe(fds)) fail(32, std::string("pipe: ") + strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) fail(32, std::string("fork: ") + strerror(errno));
  if (pid > 0) {
    close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, size_t(n));
    if (msg.size() >= 2 && msg.compare(msg.size() - 2, 2, "ok") == 0) {  // notes, then "ok"
      fputs(msg.substr(0, msg.size() - 2).c_str(), stderr);
      _exit(0);
    }
    if (msg.empty()) {
      int status = 0;
      waitpid(pid, &status, 0);
      msg = "biofs: the daemon exited before the mount was up\n";
    }
    fputs(msg.c_str(), stderr);
    _exit(32);
  }
  close(fds[0]);
  g_report_fd = fds[1];
  setsid();
}

// `notes`: lines for the user (each ending in a newline) that the parent prints before it exits.
void report_ok(const std::string& notes) {
  if (g_report_fd < 0) {
    fputs(notes.c_str(), stderr);
    return;
  }
  const std::string msg = notes + "ok";
  if (write(g_report_fd, msg.data(), msg.size()) < 0) {}
  close(g_report_fd);
  g_report_fd = -1;
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    if (null > 2) close(null);
  }
  if (chdir("/")) {}
}

// What a mount holds, declared in the order it is made, so destroyed in reverse.
struct Mount {
  explicit Mount(const CommandLine& c) : cl(c), opts(c.opts) {}
  const CommandLine& cl;
  const DaemonOptions& opts;
  std::string trace_dir;        // trace=DIR, resolved
  std::string mountpoint;       // absolute, as /proc/self/mountinfo shows it
  bool use_uring = false;       // libfuse's ring (fuse_uring=libfuse)
  bool reactor_wanted = false;  // our ring (fuse_uring=on|auto, fuse_reactor.h)
  std::string transport_note;   // why the transport is not the one asked for, if so
  std::string notes;            // lines the user sees once the mount is up
  DeviceLock lock;  // held for the daemon's life; a daemon still writing back after an unmount gets 10 s
  DeviceOptions dopts;
  std::unique_ptr<Device> dev;
  std::unique_ptr<BlockIo> io;
  std::unique_ptr<Filesystem> fs;
  FuseContext ctx{};
  std::unique_ptr<LiveToggles> live;
  fuse_session* se = nullptr;
  bool signal_handlers = false, fuse_mounted = false;
  std::unique_ptr<FuseReactor> reactor;
  std::unique_ptr<RingGuard> guard;
  std::unique_ptr<ReadOnlyWatch> ro_watch;  // `mount -o remount,ro|rw` (remount.h)
  std::unique_ptr<PageDropper> page_dropper;  // a direct write's reply after a racing reader's pages (cached_opens.h)
};

// The session the filesystem's attribute notices go to (MountOptions::attrs_changed), once up.
// A notice is written to the session's fd under the lock, so the teardown, which clears the
// session under it, never closes the fd beneath a notice in flight.
std::shared_mutex g_notify_lock;
fuse_session* g_notify_session = nullptr;

void set_notify_session(fuse_session* se) {
  std::unique_lock g(g_notify_lock);
  g_notify_session = se;
}

int tear_down(Mount& m, bool report);

// A failure after the filesystem is mounted: everything made so far goes, then the one line.
[[noreturn]] void fail_mount(Mount& m, const std::string& msg) {
  tear_down(m, false);
  fail(32, msg);
}

// What can be checked before the fork, with the caller's terminal and working directory: the
// mount point, trace=DIR, the transport. 0, or the exit status having said why.
int check_request(Mount& m) {
  const auto say = [](const std::string& line) {
    fprintf(stderr, "biofs: %s\n", line.c_str());
    return 32;
  };
  char resolved[PATH_MAX];
  if (!realpath(m.cl.mountpoint.c_str(), resolved))
    return say("mount point '" + m.cl.mountpoint + "': " + strerror(errno));
  m.mountpoint = resolved;  // now, before the mount: a stat of it then would wait for this daemon
  if (Status s = resolve_trace_dir(m.opts.trace_dir, &m.trace_dir); !s.ok()) return say(s.message());
  if (!m.opts.blkdev.empty()) {
    if (getuid() != 0) return say("blkdev=: a fuseblk mount needs root");
    if (Status s = check_blkdev(m.cl.device, m.opts.blkdev); !s.ok()) return say(s.message());
  }
  std::string why;
  if (Status s = decide_fuse_uring(m.opts.fuse_uring, &m.use_uring, &why); !s.ok()) return say(s.message());
  m.transport_note = why;
  if (!why.empty()) m.notes = "biofs: " + why + "\n";
  // fuse_uring=on|auto: the ring is ours (fuse_reactor.h), libfuse serves /dev/fuse only;
  // fuse_uring=libfuse: libfuse's ring threads.
  m.reactor_wanted = m.use_uring && m.opts.fuse_uring != FuseUring::libfuse;
  if (m.reactor_wanted) m.use_uring = false;
  return 0;
}

// The device, locked and traced, and the filesystem on it.
void open_filesystem(Mount& m) {
  const DaemonOptions& o = m.opts;
  const std::string& spec = m.cl.device;
  m.dopts.queues = o.queues;
  m.dopts.qd = o.qd;
  m.dopts.toggles = o.toggles;
  m.dopts.poll_queues = o.poll_queues < 0 ? std::min(o.threads, 256u) : unsigned(o.poll_queues);
  if (Status s = open_device_locked(spec, m.dopts, &m.lock, true, "biofs", &m.dev); !s.ok()) fail(32, s.message());
  m.lock.set_serving(true);
  if (Status s = start_block_trace(*m.dev, m.trace_dir); !s.ok()) fail(32, s.message());
  m.io = std::make_unique<BlockIo>(m.dev->bdev(), 4096, o.toggles.bio_cache);
  if (int e = m.io->init(); e) fail(32, spec + ": " + bioset_init_error(e));
  // A RAM disk starts empty and goes with the daemon: formatted here, as tmpfs starts empty.
  if (m.dev->kind() == DeviceSpec::Kind::ram) {
    if (Status s = make_filesystem(*m.io, MkfsOptions{}); !s.ok()) fail(32, spec + ": " + s.message());
  }
  // What the filesystem changes behind the kernel's back, the kernel's copy drops at once. A
  // write by a user without CAP_FSETID drops the file's set-id bits here (libfuse takes
  // FUSE_CAP_HANDLE_KILLPRIV): on a direct I/O handle the kernel neither drops them itself nor
  // refreshes the mode after the write, so it would go on showing, and exec'ing with, the bits
  // until the attribute timeout; an open over kept pages moves the atime (fs/atime.h).
  MountOptions mount_opts = o.fs;
  mount_opts.attrs_changed = [](uint64_t ino) {
    std::shared_lock g(g_notify_lock);
    if (g_notify_session) fuse_lowlevel_notify_inval_inode(g_notify_session, ino, -1, 0);
  };
  if (Status s = Filesystem::mount(*m.io, mount_opts, &m.fs); !s.ok()) fail(32, spec + ": " + s.message());
}

// The FUSE context: transport, ring scheduling, live toggles, what the stats report.
void make_context(Mount& m) {
  const DaemonOptions& o = m.opts;
  FuseContext& ctx = m.ctx;
  ctx.fs = m.fs.get();
  ctx.settings.writeback_cache = o.writeback_cache;
  ctx.settings.max_background = o.max_background;
  ctx.settings.owner = getuid();
  ctx.settings.keep_cache = o.keep_cache;
  ctx.settings.want_uring = m.use_uring;
  ctx.settings.threads = m.cl.single_thread ? 1 : o.threads;
  ctx.settings.requested_uring = fuse_uring_name(o.fuse_uring);
  using RingSched = DaemonOptions::RingSched;
  const bool guard_can_act = RingGuard::may_leave_idle();
  ctx.settings.ring_sched_idle = m.reactor_wanted && (o.fuse_uring_sched == RingSched::idle ||
                                             (o.fuse_uring_sched == RingSched::auto_ && guard_can_act));
  if (ctx.settings.ring_sched_idle && !guard_can_act)
    m.notes += "biofs: fuse_uring_sched=idle: not root and RLIMIT_NICE below 20, so a ring thread kept waiting by "
               "CPU-bound work cannot be moved back to SCHED_OTHER (daemon/README.md)\n";
  ctx.switches.ring_plug = o.fuse_uring_plug;
  ctx.switches.ring_hot = o.fuse_uring_hot;
  m.live = std::make_unique<LiveToggles>(m.dev.get(), &m.io->bio_set(), &ctx);
  ctx.attached.live = m.live.get();
  // The file's pages, all of them (len 0), under the lock shared: it may wait for a READ, so
  // not once the session loop has ended (a signal), when no thread would serve that READ.
  m.page_dropper = std::make_unique<PageDropper>([](uint64_t ino) {
    std::shared_lock g(g_notify_lock);
    if (g_notify_session && !fuse_session_exited(g_notify_session))
      fuse_lowlevel_notify_inval_inode(g_notify_session, ino, 0, 0);
  });
  ctx.attached.page_dropper = m.page_dropper.get();
  ctx.attached.contract = io_contract(*m.dev, m.dopts);
  if (!m.transport_note.empty()) ctx.attached.contract.unavailable.push_back(m.transport_note);
  if (o.verbose) {
    for (const std::string& line : io_contract_lines(ctx.attached.contract)) m.notes += "biofs: contract: " + line + "\n";
    const char* transport = m.reactor_wanted ? "the reactor (biofs's FUSE-over-io_uring server side)"
                            : m.use_uring    ? "libfuse's ring threads"
                                             : "/dev/fuse";
    m.notes += std::string("biofs: contract: fuse ") + transport + ", fuse_uring=" + ctx.settings.requested_uring +
               ", fuse_uring_qd=" + std::to_string(o.fuse_uring_qd) + ", cover " + (o.fuse_uring_cover ? "on" : "off") +
               ", hot " + (o.fuse_uring_hot ? "on" : "off") + ", plug " + (o.fuse_uring_plug ? "on" : "off") + "\n";
  }
  if (DeviceStats probe; m.dev->stats(&probe)) {
    ctx.attached.device_stats = [d = m.dev.get()] {
      DeviceStats out;
      d->stats(&out);
      return out;
    };
  }
}

// libfuse's -o list. The mount's source as /proc/mounts shows it: biofs:DEVICE, or what
// `-o fsname=NAME` says (mount.fuse(8)); libfuse splits -o at commas, so a device string's own
// options (emu:IMG,vwc,fail_read=...) are escaped to stay inside fsname. The kernel checks
// permissions as for ext4 (generic_permission: mode bits, supplementary groups, sticky
// directories, ACLs, the chown/chmod/utimes rules): always, so that allow_other never opens a
// root-owned file to everyone (fs/README.md, "Permissions").
std::string libfuse_options(const Mount& m) {
  std::string source = "biofs:" + m.cl.device, fsname;
  for (const std::string& o : m.opts.fuse_opts)
    if (o.rfind("fsname=", 0) == 0) source = o.substr(7);
  if (!m.opts.blkdev.empty()) source = m.opts.blkdev;  // fuseblk: the kernel opens the source
  for (char c : source) {
    if (c == ',' || c == '\\') fsname += '\\';
    fsname += c;
  }
  std::string fuse_o = "fsname=" + fsname + ",subtype=biofs,default_permissions";
  // Mounted by root, device nodes and set-id bits count, as on ext4: libfuse's default is
  // nodev,nosuid (a user's mount must not bring in either); -o nodev / nosuid as anywhere.
  const auto given = [&](const char* o) {
    return std::find(m.opts.fuse_opts.begin(), m.opts.fuse_opts.end(), o) != m.opts.fuse_opts.end();
  };
  if (getuid() == 0) {
    if (!given("nodev")) fuse_o += ",dev";
    if (!given("nosuid")) fuse_o += ",suid";
  }
  if (m.use_uring) fuse_o += ",io_uring,io_uring_q_depth=" + std::to_string(m.opts.fuse_uring_qd);
  if (!m.opts.blkdev.empty()) fuse_o += ",blkdev,blksize=4096";
  for (const std::string& o : m.opts.fuse_opts) {
    if (o.rfind("fsname=", 0) == 0 || o.rfind("subtype=", 0) == 0 || o == "default_permissions") continue;
    fuse_o += "," + o;
  }
  return fuse_o;
}

// The FUSE session, mounted, and the reactor where our ring was asked for.
void mount_fuse(Mount& m, const char* argv0) {
  const std::string fuse_o = libfuse_options(m);
  std::vector<const char*> fargv = {argv0, "-o", fuse_o.c_str()};
  if (m.cl.debug) fargv.push_back("-d");
  fuse_args args = FUSE_ARGS_INIT(int(fargv.size()), const_cast<char**>(fargv.data()));
  m.se = fuse_session_new(&args, biofs_fuse_ops(), sizeof(fuse_lowlevel_ops), &m.ctx);
  fuse_opt_free_args(&args);  // libfuse may have grown its own copy of the arguments
  if (!m.se) fail_mount(m, "cannot create the FUSE session");
  if (fuse_set_signal_handlers(m.se)) fail_mount(m, "cannot set signal handlers");
  m.signal_handlers = true;
  if (fuse_session_mount(m.se, m.mountpoint.c_str())) fail_mount(m, "cannot mount on '" + m.cl.mountpoint + "'");
  m.fuse_mounted = true;
  // A remount's read-only flag reaches the filesystem (Super::set_read_only).
  const auto follow = [fs = m.fs.get()](bool read_only) {
    if (int err = fs->set_read_only(read_only))
      fprintf(stderr, "biofs: remount %s: %s\n", read_only ? "ro" : "rw", strerror(-err));
  };
  if (Status s = ReadOnlyWatch::start(m.mountpoint, m.opts.fs.read_only, follow, &m.ro_watch); !s.ok())
    fail_mount(m, s.message());
  if (m.reactor_wanted) {
    FuseReactor::Config rc;
    rc.depth = m.opts.fuse_uring_qd;
    rc.batch_end = fuse_ring_batch_end;  // ends the batch's plug, when fuse_uring_plug made one
    rc.sched_idle = m.ctx.settings.ring_sched_idle;
    if (m.opts.fuse_uring_cover) rc.device_queue = m.dev->bdev()->queue;
    rc.hot_request = fuse_hot_request;
    rc.hot_enabled = &m.ctx.switches.ring_hot;  // fuse_uring_hot=, live
    rc.syncfs = fuse_syncfs;
    rc.userdata = &m.ctx;
    if (Status s = FuseReactor::attach(m.se, fuse_session_fd(m.se), rc, &m.reactor); !s.ok()) fail_mount(m, s.message());
    m.ctx.attached.reactor = m.reactor.get();
  } else if (!m.opts.blkdev.empty() && !m.use_uring) {
    // fuseblk over /dev/fuse: its reads answer the FUSE_SYNCFS libfuse does not know (syncfs.h).
    static const fuse_custom_io io = {
        .writev = [](int fd, iovec* iov, int count, void*) { return writev(fd, iov, count); },
        .read = [](int fd, void* buf, size_t len, void* userdata) {
          return read_answering_syncfs(fd, buf, len, fuse_syncfs, userdata);
        },
    };
    if (int rc = fuse_set_custom_io(m.se, &io, fuse_session_fd(m.se)))
      fail_mount(m, std::string("blkdev=: fuse_session_custom_io: ") + strerror(-rc));
  }
  set_notify_session(m.se);
}

// Requests until the mount goes. Idle reactor threads run only on otherwise idle CPUs: the
// guard moves a waiting one back to SCHED_OTHER until the CPUs calm down (ring_guard.h).
int serve(Mount& m) {
  if (m.ctx.settings.ring_sched_idle) {
    RingGuard::Config gc;
    gc.rings = unsigned(sysconf(_SC_NPROCESSORS_CONF));  // a reactor per CPU
    // auto: also SCHED_OTHER while reads and writes are in flight (ring_guard.h)
    if (m.opts.fuse_uring_sched == DaemonOptions::RingSched::auto_) gc.async_io = &m.ctx.io.async_requests;
    m.guard = std::make_unique<RingGuard>(gc);
    m.ctx.attached.ring_guard = m.guard.get();
  }
  if (m.cl.single_thread) return fuse_session_loop(m.se);
  // Reads and writes reply from the completion path, so the workers rarely block; the cap
  // (libfuse's default is 10) matters for what does block: allocating writes, metadata.
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 0);
  fuse_loop_cfg_set_max_threads(cfg, m.opts.threads);
  fuse_loop_cfg_set_idle_threads(cfg, std::min(m.opts.threads, 16u));
  const int ret = fuse_session_loop_mt(m.se, cfg);
  fuse_loop_cfg_destroy(cfg);
  return ret;
}

// The one teardown, of whatever was made (a failed mount's too): the FUSE side first, then the
// filesystem (its unmount commits), then the trace. `report`: print what the user should see.
// The unmount's error, or 0.
int tear_down(Mount& m, bool report) {
  m.lock.set_serving(false);  // shutting down: tools may wait for the lock from here (device_lock.h)
  // Completion threads may still be answering (aborted) requests through the session's fd:
  // let them finish before it is closed.
  wait_for_callbacks(m.ctx);  // replies waiting in the page dropper included
  set_notify_session(nullptr);
  if (m.fuse_mounted) fuse_session_unmount(m.se);
  if (m.reactor) m.reactor->stop();  // its entries ended with the connection
  if (m.signal_handlers) fuse_remove_signal_handlers(m.se);
  if (m.se) fuse_session_destroy(m.se);
  m.se = nullptr, m.fuse_mounted = m.signal_handlers = false;
  m.ctx.attached.reactor = nullptr;
  m.reactor.reset();
  // No thread that writes is left (the reactor's read ctx.attached until it stopped).
  m.ctx.attached.page_dropper = nullptr;
  m.page_dropper.reset();
  // The ring threads are gone: the guard may stop (it watched them through the teardown too).
  if (report && m.guard && !m.guard->error().empty())
    fprintf(stderr, "biofs: fuse_uring_sched=idle: %s\n", m.guard->error().c_str());
  m.ctx.attached.ring_guard = nullptr;
  m.guard.reset();
  m.ro_watch.reset();
  const int uerr = m.fs ? m.fs->unmount() : 0;
  if (report && uerr) fprintf(stderr, "biofs: unmount: %s\n", strerror(-uerr));
  const std::string trace_summary = stop_block_trace(*m.dev);
  if (report) fputs(trace_summary.c_str(), stderr);
  m.fs.reset();
  return uerr;
}

}  // namespace

// The steps of a mount.
int main(int argc, char** argv) {
  CommandLine cl;
  if (Status s = parse_command_line(argc, argv, &cl); !s.ok()) {
    fprintf(stderr, "biofs: %s\n", s.message().c_str());
    return 1;
  }
  if (cl.list_toggles || cl.help) {
    fputs(cl.list_toggles ? list_toggles_text().c_str() : usage_text().c_str(), stdout);
    return 0;
  }
  if (cl.opts.remount) return remount(cl.mountpoint, cl.opts);
  Mount m(cl);
  if (int code = check_request(m)) return code;
  if (!cl.foreground) daemonize();  // before any thread exists (the device starts completion threads)
  open_filesystem(m);
  make_context(m);
  mount_fuse(m, argv[0]);
  report_ok(m.notes);
  const int served = serve(m);
  const int unmounted = tear_down(m, true);
  return (served || unmounted) ? 1 : 0;
}
