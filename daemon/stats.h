// The mount's counters for the tools (tools/biofs-stat, tools/biofs-compare): one JSON object,
// read as the extended attribute `user.biofs.stats` of the mount root. Nothing is stored: the
// value is made from the live counters at each read, so reading it costs the I/O path nothing.
#pragma once

#include <cstdint>
#include <string>

#include "devices/io_contract.h"
#include "fs/block_io.h"
#include "devices/device_stats.h"

namespace biofs {

inline constexpr const char* STATS_XATTR = "user.biofs.stats";
inline constexpr uint64_t STATS_INO = 1;  // FUSE_ROOT_ID: the attribute exists on the root only

inline bool is_stats_xattr(uint64_t ino, const char* name) {
  return ino == STATS_INO && std::string_view(name) == STATS_XATTR;
}

// What the FUSE side reports: the transport asked for (fuse_uring=), the one the latest read or
// write came through ("/dev/fuse", "io_uring", or "none yet"), and how many io_uring replies
// came from a thread other than the request's ring thread (the completion path's).
struct FuseStats {
  std::string requested, transport;
  std::string ring_sched;  // the ring threads' scheduling class: normal or idle (fuse_uring_sched=)
  uint64_t replies_elsewhere = 0;
  // SCHED_IDLE ring threads moved back to SCHED_OTHER because they waited (ring_guard.h):
  // moves so far, threads in SCHED_OTHER now.
  uint64_t guard_boosts = 0;
  unsigned guard_boosted = 0;
  uint64_t guard_io_boosts = 0;  // of the moves, those for reads and writes in flight (fuse_uring_sched=auto)
  uint64_t polled = 0;  // reads and writes run to completion by their worker (fuse_ops.h)
  uint64_t page_drops = 0;  // files' pages dropped after a direct write that raced a reader (cached_opens.h)
  // What this build's libfuse does (fuse_compat.h): its version, whether mmap of an O_DIRECT
  // file was granted at INIT, whether /dev/fuse write payloads arrive page-aligned.
  std::string libfuse;
  bool direct_io_mmap = false;
  bool dev_payload_aligned = false;
  uint64_t journal_commits = 0;
  bool read_only = false;  // the filesystem writes nothing (ro, or a remount to it: remount.h)
  // fuse_uring=reactor (fuse_reactor.h): requests received on its rings, replies made on
  // another thread and posted to the ring's reactor, and why it is not running, if it is not.
  bool reactor = false;
  uint64_t reactor_requests = 0, reactor_posted = 0;
  uint64_t reactor_hot = 0;  // of the requests, reads and writes decoded without libfuse (fuse_uring_hot)
  std::string reactor_error;
  uint64_t reactor_fixed_buffers = 0;  // its entries' buffers registered with the rings
  std::string reactor_fixed_error;     // why not all were
  // fuse_uring_cover (blockcore/blk_cover.h): reactors covering a hardware queue of the
  // device, and the requests they reaped there.
  unsigned reactor_covering = 0;
  uint64_t reactor_device_reaps = 0;
};


// Bio cache, queue (tags, splits, plugs), I/O counts and bytes, clones, the daemon's resident
// size and the per-stage histograms (count, p50, p99 and the non-empty buckets) as JSON; with
// `fuse`, a "fuse" object after "rss_bytes"; with `device`, a "device" object after it.
// With `live`, a "live" object: each live toggle's value and changes (live_toggles.h).
std::string stats_json(BlockIo& io, const FuseStats* fuse = nullptr, const DeviceStats* device = nullptr,
                       const IoContract* contract = nullptr, const class LiveToggles* live = nullptr);

}  // namespace biofs
