// Making a filesystem: the geometry for a device, and writing it (what mkfs.biofs does; the
// tests call it directly on a brd device).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "block_io.h"
#include "format.h"
#include "lib/status.h"

namespace biofs {

struct MkfsOptions {
  uint32_t block_size = disk::DEFAULT_BLOCK_SIZE;
  uint64_t inodes = 0;          // 0: one per 16 KiB of device, at least 64
  uint64_t journal_blocks = 0;  // 0: 1/64 of the device, 64 to 16384 blocks
  std::string label;
  bool force = false;           // overwrite an existing biofs
  // Progress while zeroing the inode table and the journal: done and total blocks.
  std::function<void(uint64_t, uint64_t)> progress;
};

// Computes the superblock for a device of `device_bytes`. Ok, or invalid_argument with one
// line saying why not.
Status mkfs_geometry(uint64_t device_bytes, const MkfsOptions& opts, disk::SuperBlock* sb);

// Writes a fresh filesystem: superblock and backup, bitmaps, an empty root directory, a zeroed
// inode table and an empty journal, then a device flush. Refuses a device that already holds
// biofs unless opts.force. io's block size is set to the new filesystem's. Ok, or one line:
// invalid_argument for the geometry or a device that holds biofs, io_error when a read, write
// or flush fails.
Status make_filesystem(BlockIo& io, const MkfsOptions& opts, disk::SuperBlock* out = nullptr);

}  // namespace biofs
