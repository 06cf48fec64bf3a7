// biofs: mounts a biofs filesystem with FUSE.
//   biofs DEVICE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]
// DEVICE is a device string (emu:PATH, nvme:/dev/ngXnY, null:SIZE) or a plain path (emu:PATH).
// Without -f the daemon detaches once the mount is up; any error before that is printed by the
// parent as one line, and the exit status is 1 (usage) or 32 (mount failure), as mount(8).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "daemon/fuse_ops.h"
#include "daemon/live_toggles.h"
#include "daemon/daemon_switches.h"
#include "daemon/fuse_reactor.h"
#include "devices/io_contract.h"
#include "daemon/fuse_transport.h"
#include "devices/device_lock.h"
#include "daemon/mount_options.h"
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

}  // namespace

int main(int argc, char** argv) {
  CommandLine cl;
  if (Status s = parse_command_line(argc, argv, &cl); !s.ok()) {
    fprintf(stderr, "biofs: %s\n", s.message().c_str());
    return 1;
  }
  if (cl.list_toggles) {
    fputs(list_toggles_text().c_str(), stdout);
    return 0;
  }
  if (cl.help) {
    fputs(usage_text().c_str(), stdout);
    return 0;
  }
  const DaemonOptions& opts = cl.opts;
  const std::string& spec = cl.device;
  const std::string& mnt = cl.mountpoint;
  if (access(mnt.c_str(), F_OK)) {
    fprintf(stderr, "biofs: mount point '%s': %s\n", mnt.c_str(), strerror(errno));
    return 32;
  }
  // trace=DIR: resolved now, before the daemon leaves the caller's working directory.
  std::string trace_dir;
  if (Status s = resolve_trace_dir(opts.trace_dir, &trace_dir); !s.ok()) {
    fprintf(stderr, "biofs: %s\n", s.message().c_str());
    return 32;
  }
  bool use_uring = false;
  std::string notes;
  if (Status s = decide_fuse_uring(opts.fuse_uring, &use_uring, &notes); !s.ok()) {
    fprintf(stderr, "biofs: %s\n", s.message().c_str());
    return 32;
  }
  const std::string transport_note = notes;  // why the transport is not the one asked for, if so
  if (!notes.empty()) notes = "biofs: " + notes + "\n";
  // Fork before any thread exists (the device starts completion threads).
  if (!cl.foreground) daemonize();
  // Held for the daemon's life; a daemon still writing back after an unmount gets 10 s.
  DeviceLock lock;
  DeviceOptions dopts;
  dopts.queues = opts.queues;
  dopts.qd = opts.qd;
  dopts.toggles = opts.toggles;
  dopts.poll_queues = opts.poll_queues < 0 ? std::min(opts.threads, 256u) : unsigned(opts.poll_queues);
  std::unique_ptr<Device> dev;
  if (Status s = open_device_locked(spec, dopts, &lock, true, "biofs", &dev); !s.ok()) fail(32, s.message());
  lock.set_serving(true);
  if (Status s = start_block_trace(*dev, trace_dir); !s.ok()) fail(32, s.message());
  BlockIo io(dev->bdev(), 4096, opts.toggles.bio_cache);
  // A RAM disk starts empty and goes with the daemon: formatted here, as tmpfs starts empty.
  if (dev->kind() == DeviceSpec::Kind::ram) {
    if (Status s = make_filesystem(io, MkfsOptions{}); !s.ok()) fail(32, spec + ": " + s.message());
  }
  // A write by a user without CAP_FSETID drops the file's set-id bits here (libfuse takes
  // FUSE_CAP_HANDLE_KILLPRIV): on a direct I/O handle the kernel neither drops them itself nor
  // refreshes the mode after the write, so it would go on showing, and exec'ing with, the bits
  // until the attribute timeout. ext4 drops them at once: so does the kernel's copy here.
  static std::atomic<fuse_session*> notify_session{nullptr};
  MountOptions mount_opts = opts.fs;
  mount_opts.attrs_changed = [](uint64_t ino) {
    if (fuse_session* s = notify_session.load(std::memory_order_acquire)) fuse_lowlevel_notify_inval_inode(s, ino, -1, 0);
  };
  std::unique_ptr<Filesystem> fs;
  if (Status s = Filesystem::mount(io, mount_opts, &fs); !s.ok()) fail(32, spec + ": " + s.message());

  FuseContext ctx{fs.get(), opts.writeback_cache, opts.max_background, getuid(), opts.keep_cache};
  // fuse_uring=on|auto: the ring is ours (fuse_reactor.h), libfuse serves /dev/fuse only;
  // fuse_uring=libfuse: libfuse's ring threads.
  const bool reactor_wanted = use_uring && opts.fuse_uring != FuseUring::libfuse;
  if (reactor_wanted) use_uring = false;
  ctx.want_uring = use_uring;
  ctx.threads = cl.single_thread ? 1 : opts.threads;
  ctx.requested_uring = fuse_uring_name(opts.fuse_uring);
  using RingSched = DaemonOptions::RingSched;
  const bool guard_can_act = RingGuard::may_leave_idle();
  ctx.ring_sched_idle = reactor_wanted && (opts.fuse_uring_sched == RingSched::idle ||
                                      (opts.fuse_uring_sched == RingSched::auto_ && guard_can_act));
  if (ctx.ring_sched_idle && !guard_can_act)
    notes += "biofs: fuse_uring_sched=idle: not root and RLIMIT_NICE below 20, so a ring thread kept waiting by "
             "CPU-bound work cannot be moved back to SCHED_OTHER (daemon/README.md)\n";
  ctx.ring_plug = opts.fuse_uring_plug;
  ctx.ring_hot = opts.fuse_uring_hot;
  LiveToggles live(dev.get(), &io.bio_set(), &ctx);
  ctx.live = &live;
  ctx.contract = io_contract(*dev, dopts);
  if (!transport_note.empty()) ctx.contract.unavailable.push_back(transport_note);
  if (opts.verbose) {
    for (const std::string& line : io_contract_lines(ctx.contract)) notes += "biofs: contract: " + line + "\n";
    const char* transport = reactor_wanted ? "the reactor (biofs's FUSE-over-io_uring server side)"
                            : use_uring    ? "libfuse's ring threads"
                                           : "/dev/fuse";
    notes += std::string("biofs: contract: fuse ") + transport + ", fuse_uring=" + ctx.requested_uring +
             ", fuse_uring_qd=" + std::to_string(opts.fuse_uring_qd) + ", cover " +
             (opts.fuse_uring_cover ? "on" : "off") + ", hot " + (opts.fuse_uring_hot ? "on" : "off") + ", plug " +
             (opts.fuse_uring_plug ? "on" : "off") + "\n";
  }
  if (DeviceStats probe; dev->stats(&probe)) {
    ctx.device_stats = [d = dev.get()] {
      DeviceStats out;
      d->stats(&out);
      return out;
    };
  }
  // The mount's source as /proc/mounts shows it: biofs:DEVICE, or what `-o fsname=NAME` says
  // (mount.fuse(8)). libfuse splits -o at commas: a device string's own options
  // (emu:IMG,vwc,fail_read=...) are escaped to stay inside fsname.
  std::string source = "biofs:" + spec, fsname;
  for (const std::string& o : opts.fuse_opts)
    if (o.rfind("fsname=", 0) == 0) source = o.substr(7);
  for (char c : source) {
    if (c == ',' || c == '\\') fsname += '\\';
    fsname += c;
  }
  // The kernel checks permissions as for ext4 (generic_permission: mode bits, supplementary
  // groups, sticky directories, ACLs, the chown/chmod/utimes rules): always, so that
  // allow_other never opens a root-owned file to everyone (fs/README.md, "Permissions").
  std::string fuse_o = "fsname=" + fsname + ",subtype=biofs,default_permissions";
  if (use_uring) fuse_o += ",io_uring,io_uring_q_depth=" + std::to_string(opts.fuse_uring_qd);
  for (const std::string& o : opts.fuse_opts) {
    if (o.rfind("fsname=", 0) == 0 || o.rfind("subtype=", 0) == 0 || o == "default_permissions") continue;
    fuse_o += "," + o;
  }
  std::vector<const char*> fargv = {argv[0], "-o", fuse_o.c_str()};
  if (cl.debug) fargv.push_back("-d");
  fuse_args args = FUSE_ARGS_INIT(int(fargv.size()), const_cast<char**>(fargv.data()));
  fuse_session* se = fuse_session_new(&args, biofs_fuse_ops(), sizeof(fuse_lowlevel_ops), &ctx);
  fuse_opt_free_args(&args);  // libfuse may have grown its own copy of the arguments
  if (!se) fail(32, "cannot create the FUSE session");
  if (fuse_set_signal_handlers(se)) fail(32, "cannot set signal handlers");
  if (fuse_session_mount(se, mnt.c_str())) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    fs->unmount();
    fail(32, "cannot mount on '" + mnt + "'");
  }
  std::unique_ptr<FuseReactor> reactor;
  if (reactor_wanted) {
    FuseReactor::Config rc;
    rc.depth = opts.fuse_uring_qd;
    rc.batch_end = fuse_ring_batch_end;  // ends the batch's plug, when fuse_uring_plug made one
    rc.sched_idle = ctx.ring_sched_idle;
    if (opts.fuse_uring_cover) rc.device_queue = dev->bdev()->queue;
    rc.hot_request = fuse_hot_request;
    rc.hot_enabled = &ctx.ring_hot;  // fuse_uring_hot=, live
    rc.userdata = &ctx;
    if (Status s = FuseReactor::attach(se, fuse_session_fd(se), rc, &reactor); !s.ok()) {
      fuse_session_unmount(se);
      fuse_remove_signal_handlers(se);
      fuse_session_destroy(se);
      fs->unmount();
      fail(32, s.message());
    }
    ctx.reactor = reactor.get();
  }
  notify_session.store(se, std::memory_order_release);
  report_ok(notes);
  // Idle reactor threads run only on otherwise idle CPUs: the guard moves a waiting one back to
  // SCHED_OTHER until the CPUs calm down (ring_guard.h). There is a reactor per CPU.
  std::unique_ptr<RingGuard> guard;
  if (ctx.ring_sched_idle) {
    RingGuard::Config gc;
    gc.rings = unsigned(sysconf(_SC_NPROCESSORS_CONF));
    // auto: also SCHED_OTHER while reads and writes are in flight (ring_guard.h)
    if (opts.fuse_uring_sched == RingSched::auto_) gc.async_io = &ctx.async_requests;
    guard = std::make_unique<RingGuard>(gc);
    ctx.ring_guard = guard.get();
  }
  int ret;
  if (cl.single_thread) {
    ret = fuse_session_loop(se);
  } else {
    // Reads and writes reply from the completion path, so the workers rarely block; the cap
    // (libfuse's default is 10) matters for what does block: allocating writes, metadata.
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(cfg, 0);
    fuse_loop_cfg_set_max_threads(cfg, opts.threads);
    fuse_loop_cfg_set_idle_threads(cfg, std::min(opts.threads, 16u));
    ret = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
  }
  lock.set_serving(false);  // shutting down: tools may wait for the lock from here (device_lock.h)
  // Completion threads may still be answering (aborted) requests through the session's fd:
  // let them finish before it is closed.
  wait_for_callbacks(ctx);
  notify_session.store(nullptr, std::memory_order_release);
  fuse_session_unmount(se);
  if (reactor) reactor->stop();  // its entries ended with the connection
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  ctx.reactor = nullptr;
  reactor.reset();
  // The ring threads are gone: the guard may stop (it watched them through the teardown too).
  if (guard && !guard->error().empty()) fprintf(stderr, "biofs: fuse_uring_sched=idle: %s\n", guard->error().c_str());
  ctx.ring_guard = nullptr;
  guard.reset();
  const int uerr = fs->unmount();
  if (uerr) fprintf(stderr, "biofs: unmount: %s\n", strerror(-uerr));
  fputs(stop_block_trace(*dev).c_str(), stderr);
  fs.reset();
  return (ret || uerr) ? 1 : 0;
}
