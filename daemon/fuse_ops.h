// The FUSE low-level operations table over a Filesystem (libfuse 3.18's API).
#pragma once

#define FUSE_USE_VERSION 318
#include <fuse_lowlevel.h>

#include <atomic>
#include <functional>

#include "cached_opens.h"
#include "devices/io_contract.h"
#include "fs/filesystem.h"
#include "fuse_reactor.h"
#include "ring_guard.h"
#include "stats.h"

namespace biofs {

class RequestTransport;

struct FuseContext {
  Filesystem* fs;

  // What the mount options and the command line said: set by main before the session starts,
  // read-only after.
  struct Settings {
    bool writeback_cache = false;
    unsigned max_background = 256;
    uid_t owner = 0;  // the mounting user: with root, the only one who may read the stats
    // keep_cache=on: the kernel keeps file pages across opens, directory listings, attributes
    // and names (negative ones too) for a day; biofs is its image's only writer and the kernel
    // sees every change. off: pages dropped at each open, 1 s timeouts (every buffered read
    // reaches the block layer).
    bool keep_cache = true;
    // libfuse's FUSE-over-io_uring (fuse_uring=libfuse, fuse_transport.h): asked for at INIT
    // (the reactor asks for its own), and then each read and write replies from its ring thread.
    bool want_uring = false;
    std::string requested_uring = "off";  // the fuse_uring= value, for the stats
    bool ring_sched_idle = false;         // fuse_uring_sched=idle (or auto as idle), for the stats
    // /dev/fuse workers at most: a read or write runs to completion only while fewer data
    // requests than this are in the daemon (request_transport.cc).
    unsigned threads = 1;
    double timeout() const { return keep_cache ? 86400.0 : 1.0; }
  } settings;

  // What the kernel granted at INIT (op_init).
  struct Granted {
    bool posix_acl = false;       // FUSE_CAP_POSIX_ACL
    bool direct_io_mmap = false;  // FUSE_CAP_DIRECT_IO_ALLOW_MMAP, asked for and offered
  } granted;

  // fuse_uring_plug= and fuse_uring_hot=, switched live (live_toggles.h) and read by the data
  // path: a plug across each ring batch; the reactor decodes READ and WRITE itself.
  struct Switches {
    std::atomic<bool> ring_plug{true};
    std::atomic<bool> ring_hot{true};
  } switches;

  // The data path's counts (data_requests.cc). Run to completion (blockcore/blk_poll.h): a
  // worker waits for the I/O of a read or write of at most POLL_MAX_BYTES, reaping its own poll
  // queue and replying itself, when another thread is free to receive the next request (the
  // transport says when: request_transport.h). Otherwise the I/O completes on the completion
  // thread.
  struct Io {
    std::atomic<unsigned> data_requests{0};  // reads and writes received and not yet answered
    std::atomic<uint64_t> polled{0};         // of them, run to completion
    // Of them, those not run to completion and not yet answered: their device completions are
    // task work of the thread that submitted them (the ring guard's async_io, ring_guard.h).
    std::atomic<unsigned> async_requests{0};
    // Reads and writes whose completion callback has not yet returned. A callback may reply
    // from a completion thread after the session loop has ended (an unmount aborts what the
    // kernel still waited for), so the session is destroyed only once this is zero
    // (wait_for_callbacks).
    std::atomic<unsigned> callbacks_pending{0};
    // Replies to io_uring requests sent by a thread other than the request's ring thread (the
    // completion path's), for the stats.
    std::atomic<uint64_t> replies_elsewhere{0};
    // The transport the latest read or write came through (request_transport.h), for the
    // stats; nullptr: none yet.
    std::atomic<const RequestTransport*> transport{nullptr};
  } io;
  static constexpr size_t POLL_MAX_BYTES = 128 * 1024;

  // Handles open through the kernel's page cache, by file: a direct write that raced one drops
  // the file's pages before its reply (cached_opens.h).
  CachedOpens cached_opens;

  // What main attaches once it has built it, for the stats (and the live toggles' setxattr).
  struct Attached {
    const RingGuard* ring_guard = nullptr;  // with idle rings: their guard (ring_guard.h)
    const FuseReactor* reactor = nullptr;   // fuse_uring=on: the reactor (fuse_reactor.h)
    class LiveToggles* live = nullptr;      // `setfattr -n user.biofs.set` (live_toggles.h)
    class PageDropper* page_dropper = nullptr;  // drops a file's pages off the serving threads
    // What the stack under the mount will do (devices/io_contract.h); the reactor's refusals
    // are added when the stats are read.
    IoContract contract;
    // The device's counters (main opened it); unset: none to report.
    std::function<DeviceStats()> device_stats;
  } attached;
};

// Waits until no read or write callback is running or to come: before the session is destroyed.
void wait_for_callbacks(const FuseContext& ctx);

// The operations; userdata passed to fuse_session_new must be a FuseContext*.
const fuse_lowlevel_ops* biofs_fuse_ops();
// The reactor's READ and WRITE, decoded from the ring entry (FuseReactor::Config::hot_request);
// userdata: the FuseContext*.
void fuse_hot_request(void* userdata, const FuseReactor::HotRequest& r);
// What a reactor thread runs when it has handled a batch of requests (FuseReactor::Config::
// batch_end): dispatches the plug its reads and writes gathered.
void fuse_ring_batch_end(void* userdata);
// FUSE_SYNCFS (syncfs.h): the filesystem commits and flushes. 0 or -errno; userdata: the FuseContext*.
int fuse_syncfs(void* userdata);

}  // namespace biofs
