// What the filesystem's bios need of its device: the block device, the block size, the bio
// set they come from and the counters they add to. IoBatch (io_batch.h) builds bios on it;
// BlockIo (block_io.h), the filesystem's device, is one, with set-up and synchronous forms on
// top of IoBatch.
#pragma once

#include <atomic>
#include <cstdint>

#include "blockcore/bio_set.h"
#include "blockcore/blk_mq.h"

namespace biofs {

class IoTarget {
 public:
  IoTarget(const IoTarget&) = delete;
  IoTarget& operator=(const IoTarget&) = delete;

  BlockDevice* bdev() const { return bdev_; }
  uint32_t block_size() const { return block_size_; }
  void set_block_size(uint32_t bs) { block_size_ = bs; }
  BioSet& bio_set() { return bs_; }

  // Counters for the tools: bios and bytes submitted, errors seen, and the overwrites whose
  // data was copied into a buffer of the daemon's own (not submitted from the caller's).
  std::atomic<uint64_t> bios{0}, bytes{0}, errors{0}, write_copies{0};

 protected:
  // A cache slot always, so the bio_cache toggle can change on a mounted filesystem.
  IoTarget(BlockDevice* bdev, uint32_t block_size)
      : bdev_(bdev), block_size_(block_size), bs_(64, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE | BIOSET_TRIM_IDLE) {}
  ~IoTarget() = default;

  BlockDevice* bdev_;
  uint32_t block_size_;
  BioSet bs_;
};

}  // namespace biofs
