// The metadata journal (physical block journaling, as jbd2 in its simplest form). A transaction
// is every metadata block dirtied since the last commit; commit() logs copies of them, then a
// commit block, then writes them home (checkpoint) and advances the journal superblock. Replay
// at mount re-applies a committed transaction whose checkpoint a crash interrupted.
//
// Ordered data: file data is written to its blocks (and completed) before the transaction
// whose metadata points at it commits, and the commit block carries REQ_PREFLUSH, so a crash
// never leaves metadata naming blocks with stale contents.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "block_io.h"
#include "format.h"

namespace biofs {

struct JournalBlock {
  uint64_t home;        // where the block lives
  const uint8_t* data;  // block_size bytes, checksums already filled in
};

class Journal {
 public:
  Journal(BlockIo& io, const disk::SuperBlock& sb) : io_(io), sb_(sb) {}

  // Reads the journal superblock and replays what it finds. Sets *replayed to the number of
  // transactions applied (with apply = false: found complete, nothing written). "" or one line
  // (a damaged journal superblock).
  std::string recover(int* replayed, bool apply = true);

  // Most blocks one transaction may log.
  uint64_t capacity() const;

  // Logs and checkpoints one transaction; returns 0 or -errno (the on-disk state is then that
  // of the previous commit, or of this one if its commit block reached the disk).
  int commit(const std::vector<JournalBlock>& blocks);

  uint64_t sequence() const { return sequence_; }
  // Test hook: commit() stops after the commit block, as if the machine died before the
  // checkpoint, and returns -EIO.
  bool crash_before_checkpoint = false;
  uint64_t commits() const { return commits_.load(std::memory_order_relaxed); }  // any thread

 private:
  int write_super();

  BlockIo& io_;
  const disk::SuperBlock& sb_;
  uint64_t sequence_ = 0;  // the next transaction's number
  std::atomic<uint64_t> commits_{0};
};

}  // namespace biofs
