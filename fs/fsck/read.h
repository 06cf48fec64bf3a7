// What the passes read with the format's own rules: the inode table, held whole, and the
// orphan list walked with its bound and loop checks. Private to fs/fsck/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "fs/block_io.h"
#include "fs/format.h"
#include "fs/io_buf.h"

namespace biofs::fsck {

// Reads `n` blocks from `blk` into `buf`; false when it failed (having said why).
using BlockReader = std::function<bool(uint64_t blk, uint32_t n, void* buf)>;

// The line for a read of block `blk` that failed with -errno `err`.
std::string read_failed(uint64_t blk, int err);

// The whole inode table into *table, read in runs of 256 blocks; false at the first run that
// `read` fails.
bool read_inode_table(const disk::SuperBlock& sb, const BlockReader& read, IoBuf* table);

// Inode `ino` (1 .. inode_count) in a table read whole.
inline disk::Inode& table_inode(const IoBuf& table, uint64_t ino) {
  return *reinterpret_cast<disk::Inode*>(table.data() + (ino - 1) * disk::INODE_SIZE);
}

// Walks the orphan list from sb.orphan_head, calling `visit` (when given) for each inode on
// it in order. Each must be within the table, `usable` (the caller's view of a live inode) and
// flagged INODE_ORPHAN, and none may come twice. "" when the list ends, else the problem where
// the walk stopped.
std::string walk_orphan_list(const disk::SuperBlock& sb, const IoBuf& table, const std::function<bool(uint64_t)>& usable,
                             const std::function<void(uint64_t)>& visit = nullptr);

}  // namespace biofs::fsck
