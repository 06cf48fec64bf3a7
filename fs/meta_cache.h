// The metadata buffer cache: fs blocks read once and kept in memory, changed in place, and
// written only through the journal (commit()). Dirty buffers stay pinned until their
// transaction commits; clean ones are dropped when the cache is over its limit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "block_io.h"
#include "format.h"
#include "io_buf.h"
#include "journal.h"

namespace biofs {

struct Buffer {
  uint64_t blk = 0;
  IoBuf data;
  uint32_t magic = 0;  // BLK_* of a headered block (crc refreshed at commit); 0: inode table
  bool dirty = false;
};

class MetaCache {
 public:
  MetaCache(BlockIo& io, const disk::SuperBlock& sb, Journal& journal, size_t max_bytes);

  // Reads block `blk`; with a nonzero magic, checks header magic, block number and crc and
  // returns -EUCLEAN (corruption) when they do not match. 0 or -errno.
  int get(uint64_t blk, uint32_t magic, Buffer** out);
  // A fresh zeroed block with its header set (for a block just allocated), already dirty.
  Buffer* get_new(uint64_t blk, uint32_t magic);
  void mark_dirty(Buffer* b);
  // The block was freed: forget it, dirty or not (its contents no longer matter).
  void drop(uint64_t blk);

  size_t dirty_count() const { return dirty_.size(); }
  // A metadata read failed (EIO): an operation may have stopped half-way with some of its
  // changes made, so the running transaction must not be committed (Filesystem goes
  // read-only). The first such error, or 0.
  int read_error() const { return read_error_; }
  // Logs and checkpoints every dirty buffer as one transaction. 0 or -errno.
  int commit();
  // Drops clean buffers while the cache is over its limit. Call between operations only: it
  // invalidates Buffer pointers.
  void trim();

  uint64_t hits = 0, misses = 0;

 private:
  BlockIo& io_;
  const disk::SuperBlock& sb_;
  Journal& journal_;
  size_t max_buffers_;
  std::unordered_map<uint64_t, std::unique_ptr<Buffer>> map_;
  std::vector<Buffer*> dirty_;
  int read_error_ = 0;
};

}  // namespace biofs
