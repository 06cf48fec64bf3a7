// The mount's counters for the tools (tools/biofs-stat, tools/biofs-compare): one JSON object,
// read as the extended attribute `user.biofs.stats` of the mount root. Nothing is stored: the
// value is made from the live counters at each read, so reading it costs the I/O path nothing.
#pragma once

#include <cstdint>
#include <string>

#include "fs/block_io.h"

namespace biofs {

inline constexpr const char* STATS_XATTR = "user.biofs.stats";
inline constexpr uint64_t STATS_INO = 1;  // FUSE_ROOT_ID: the attribute exists on the root only

inline bool is_stats_xattr(uint64_t ino, const char* name) {
  return ino == STATS_INO && std::string_view(name) == STATS_XATTR;
}

// Bio cache, queue (tags, splits, plugs), I/O counts and bytes, clones, the daemon's resident
// size and the per-stage histograms (count, p50, p99 and the non-empty buckets) as JSON.
std::string stats_json(BlockIo& io);

}  // namespace biofs
