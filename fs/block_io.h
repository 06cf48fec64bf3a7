// The filesystem's only way to the disk: whole fs blocks read and written as bios through
// submit_bio() from the fs's own bio set (io_target.h), synchronously here or in batches
// (io_batch.h).
#pragma once

#include <cstdint>

#include "io_target.h"

namespace biofs {

class BlockIo : public IoTarget {
 public:
  // bio_cache: whether the fs's bio set keeps a per-thread bio cache, and its put form (the
  // `bio_cache=` toggle). No I/O before init().
  BlockIo(BlockDevice* bdev, uint32_t block_size, BioCache bio_cache = BioCache::on)
      : IoTarget(bdev, block_size), bio_cache_(bio_cache) {}
  // Sets up the fs's bio set (BioSet::init): 0 or its -errno, whose line is bioset_init_error().
  int init();

  uint64_t device_bytes() const { return bdev_->capacity << SECTOR_SHIFT; }
  uint64_t nr_blocks() const { return device_bytes() / block_size_; }

  // Synchronous forms: 0 or -errno.
  int read(uint64_t blk, uint32_t count, void* buf);
  int write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags = 0);
  int flush();  // REQ_OP_FLUSH | REQ_PREFLUSH: everything completed before is durable after

 private:
  BioCache bio_cache_;
};

}  // namespace biofs
