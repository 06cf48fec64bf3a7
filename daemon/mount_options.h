// The biofs command line and its `-o` options. libfuse's fuse_opt_parse() walks the arguments
// and splits -o lists (a `\,` stays inside an option). The block-layer toggles
// (blockcore/toggles.h), queue settings and filesystem settings are ours; a known set of
// generic/FUSE options passes through to libfuse; anything else stops the mount with one line
// naming the option.
#pragma once

#include <string>
#include <vector>

#include "blockcore/toggles.h"
#include "fs/filesystem.h"
#include "daemon/fuse_transport.h"
#include "lib/status.h"

namespace biofs {

// Twice the online CPUs, at least 4: reads and writes reply from the completion path, so a
// worker blocks only on metadata; more workers than that only add wake-ups and switches
// (docs/results.md, "FUSE workers": 4 against 16 on 2 CPUs).
unsigned default_fuse_threads();

struct DaemonOptions {
  Toggles toggles;               // bio_cache=, tag_batch=, split_check= (toggle_table())
  unsigned queues = 1;           // queues=N
  unsigned qd = 128;             // qd=N
  unsigned threads = default_fuse_threads();  // threads=N: FUSE worker threads at most
  // poll_queues=N: NVMe poll queues, on which a worker runs a small read or write to
  // completion when another worker is free (fuse_ops.h); 0: every I/O completes on the
  // completion thread. Default: one per worker.
  int poll_queues = -1;          // -1: threads
  unsigned max_background = 256; // max_background=N: async FUSE requests the kernel keeps in flight
  MountOptions fs;               // commit=SECONDS, meta_cache=MiB, ro
  bool writeback_cache = false;  // writeback_cache[=on|off]: the kernel caches buffered writes (fs/README.md)
  bool keep_cache = true;        // keep_cache=on|off: the kernel's caches kept across opens (fuse_ops.h)
  // fuse_uring=on|off|auto|libfuse: the FUSE transport (fuse_transport.h); auto, the default,
  // takes FUSE-over-io_uring (biofs's reactor, fuse_reactor.h) where the kernel has it and falls
  // back to /dev/fuse with one line; libfuse: libfuse's own ring threads, the A/B baseline.
  FuseUring fuse_uring = FuseUring::auto_;
  unsigned fuse_uring_qd = 64;   // fuse_uring_qd=N: requests in flight per FUSE ring queue
  // fuse_uring_plug=on|off: a reactor thread keeps its block plug across a batch of requests
  // (daemon/README.md, "Plugging across a ring batch"); no effect on /dev/fuse.
  bool fuse_uring_plug = true;
  // fuse_uring_cover=on|off: each reactor thread reaps its CPU's hardware queue of the device
  // (blockcore/blk_cover.h) instead of the driver's completion thread (daemon/README.md, "The
  // reactor reaps its CPU's completions"); off: the completion thread reaps and posts the reply.
  bool fuse_uring_cover = true;
  // fuse_uring_hot=on|off: the reactor decodes READ and WRITE itself from the ring entry
  // (daemon/README.md, "Reads and writes without libfuse"); off: libfuse decodes every request.
  bool fuse_uring_hot = true;
  // trace=DIR: blktrace files of every request queue in DIR (devices/block_trace.h), written
  // from mount to unmount; blkparse -i biofs -D DIR reads them.
  std::string trace_dir;
  // blkdev=PATH: a fuseblk mount, the kernel holding PATH, the block device of the storage
  // DEVICE names (fuseblk.h), so that sync(2) and syncfs(2) reach the daemon.
  std::string blkdev;
  // verbose: print the I/O contract (devices/io_contract.h) when mounting, on stderr.
  bool verbose = false;
  // fuse_uring_sched=normal|idle|auto: idle puts the reactor's threads in SCHED_IDLE, so a woken
  // requester stays on its ring's CPU, with a guard that moves a ring thread kept waiting back
  // to SCHED_OTHER (daemon/README.md, "Ring threads in SCHED_IDLE"); auto, the default: idle
  // when the daemon may move its threads back (RingGuard::may_leave_idle()), with the guard
  // also moving a waiting ring to SCHED_OTHER while reads and writes not run to completion
  // are in flight; else normal.
  enum class RingSched { normal, idle, auto_ };
  RingSched fuse_uring_sched = RingSched::auto_;
  std::vector<std::string> fuse_opts;  // passed to libfuse as -o
  // remount: mount(8)'s `-o remount,...` of a mounted biofs (remount.h); the list's ro/rw and
  // VFS flags (nosuid, nodev, ...) are then read from fuse_opts, in their order.
  bool remount = false;
  // The kernel's own FUSE options (user_id=, group_id=, rootmode=, fd=), which /proc/mounts
  // shows and mount(8) hands back at a remount; only a remount takes them (and ignores them).
  std::vector<std::string> kernel_opts;
};

// Parses one comma-separated -o list into *o. Ok, or invalid_argument with one line naming the
// bad option (*o is then as it was).
Status parse_mount_options(const std::string& list, DaemonOptions* o);

// biofs DEVICE MOUNTPOINT [-o OPTIONS]... [-f] [-d] [-s] [-h]
struct CommandLine {
  std::string device, mountpoint;
  bool foreground = false, debug = false, single_thread = false, help = false;
  bool list_toggles = false;  // --list-toggles
  DaemonOptions opts;
};

// Parses the whole command line. Ok, or invalid_argument with one line saying what is wrong
// (then exit 1, as mount(8) for a usage error).
Status parse_command_line(int argc, char** argv, CommandLine* cl);

// The option summary `biofs -h` prints.
std::string usage_text();

}  // namespace biofs
