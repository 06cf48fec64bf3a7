// The filesystem's only way to the disk: whole fs blocks read and written as bios through
// submit_bio() from the fs's own bio set, synchronously here or in batches (io_batch.h).
#pragma once

#include <atomic>
#include <cstdint>

#include "blockcore/bio_set.h"
#include "blockcore/blk_mq.h"

namespace biofs {

class BlockIo {
 public:
  // bio_cache: whether the fs's bio set keeps a per-thread bio cache, and its put form (the
  // `bio_cache=` toggle). No I/O before init().
  BlockIo(BlockDevice* bdev, uint32_t block_size, BioCache bio_cache = BioCache::on);
  // Sets up the fs's bio set (BioSet::init): 0 or its -errno, whose line is bioset_init_error().
  int init();
  BlockIo(const BlockIo&) = delete;
  BlockIo& operator=(const BlockIo&) = delete;

  BlockDevice* bdev() const { return bdev_; }
  uint32_t block_size() const { return block_size_; }
  void set_block_size(uint32_t bs) { block_size_ = bs; }
  uint64_t device_bytes() const { return bdev_->capacity << SECTOR_SHIFT; }
  uint64_t nr_blocks() const { return device_bytes() / block_size_; }
  BioSet& bio_set() { return bs_; }

  // Synchronous forms: 0 or -errno.
  int read(uint64_t blk, uint32_t count, void* buf);
  int write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags = 0);
  int flush();  // REQ_OP_FLUSH | REQ_PREFLUSH: everything completed before is durable after

  // Counters for the tools: bios and bytes submitted, errors seen, and the overwrites whose
  // data was copied into a buffer of the daemon's own (not submitted from the caller's).
  std::atomic<uint64_t> bios{0}, bytes{0}, errors{0}, write_copies{0};

 private:
  BlockDevice* bdev_;
  uint32_t block_size_;
  BioCache bio_cache_;
  BioSet bs_;
};

}  // namespace biofs
