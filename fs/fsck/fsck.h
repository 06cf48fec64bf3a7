// Checking and repairing a biofs filesystem (what fsck.biofs does): superblock and its backup,
// the journal, every bitmap and metadata block's checksum, inodes, extents against the block
// bitmap (no block owned twice, none owned but free, none marked but unowned), directory
// entries against inodes, connectivity, link counts and free counts. One engine (fs/fsck/,
// e2fsck's passes): the repair (-p, -y) mends in memory, writes back and checks again; the
// check (-n) runs the same passes with writing off and prints each problem -y would mend.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "fs/block_io.h"

namespace biofs {

struct FsckResult {
  uint64_t errors = 0;        // inconsistencies found (after a repair: those left)
  uint64_t warnings = 0;      // not errors (e.g. a journal left to replay, a dirty state)
  bool fatal = false;         // could not check at all (no usable superblock, I/O error)
  uint64_t inodes = 0, dirs = 0, blocks_used = 0;
  // Repair only:
  uint64_t repaired = 0;      // repairs made
  uint64_t needs_yes = 0;     // -p: problems left because only -y may repair them
  bool changed = false;       // something was written to the device
  bool cancelled = false;     // stopped by the cancel flag before writing its repairs
};

// Checks without changing anything. Each problem is reported as one line through `report`, the
// problem as a repair would name it; warnings (a journal to replay, orphans, an unclean
// unmount) are lines too.
FsckResult fsck_check(BlockIo& io, const std::function<void(const std::string&)>& report);

enum class FsckMode {
  check,  // -n: report only
  preen,  // -p: repair what is safe without a human (journal replay, orphans, bitmaps, counts,
          //     link counts); anything else is reported as needing -y and nothing is written
  yes,    // -y: repair everything it can
};

// Repairs as `mode` allows; each problem and what was done is one line through `report`.
// Everything is decided in memory first; the repairs are written at the end (metadata blocks,
// a flush, then the superblock, primary last) and the filesystem is checked again: `errors`
// counts what that check still finds. `cancel`, when set before the writes start, stops the
// repair (cancelled). The journal is replayed first when it holds a committed transaction.
FsckResult fsck_repair(BlockIo& io, FsckMode mode, const std::function<void(const std::string&)>& report,
                       const std::atomic<bool>* cancel = nullptr);

// The exit status fsck(8) defines, summed: 0 no errors, 1 errors corrected, 4 errors left
// uncorrected, 8 operational error, 32 cancelled.
int fsck_exit_code(const FsckResult& r, FsckMode mode);

}  // namespace biofs
