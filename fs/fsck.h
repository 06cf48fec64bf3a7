// Checking a biofs filesystem (what fsck.biofs does): superblock and its backup, the journal,
// every bitmap and metadata block's checksum, inodes, extents against the block bitmap (no
// block owned twice, none owned but free, none marked but unowned), directory entries against
// inodes, link counts and free counts. This first form only reports (-n).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "block_io.h"

namespace biofs {

struct FsckResult {
  uint64_t errors = 0;        // inconsistencies found
  uint64_t warnings = 0;      // not errors (e.g. a journal left to replay, a dirty state)
  bool fatal = false;         // could not check at all (no usable superblock, I/O error)
  uint64_t inodes = 0, dirs = 0, blocks_used = 0;
};

// Checks without changing anything. Each problem is reported as one line through `report`.
FsckResult fsck_check(BlockIo& io, const std::function<void(const std::string&)>& report);

}  // namespace biofs
