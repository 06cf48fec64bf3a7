// Counterpart of drivers/md/dm-stripe.c (and md raid0's mapping): a bio-based target that
// stripes chunks over several child devices. Each incoming bio is cut at chunk boundaries into
// clones (bio_alloc_clone: they share its bvec table) aimed at the children and chained to it,
// so it completes once every piece has, with the first error. t/io_uring runs against two
// devices from one thread and from two; this lets biofs do the same.
#pragma once

#include <atomic>
#include <string>
#include <memory>
#include <vector>

#include "blk_mq.h"
#include "lib/status.h"

namespace biofs {

class StripeTarget {
 public:
  // The target over `children` into *out. chunk_sectors: a power of two, at least one logical
  // block of every child. Ok, or invalid_argument with one line when the geometry is impossible,
  // io_error when its clone bio set cannot be set up.
  static Status create(std::vector<BlockDevice*> children, uint32_t chunk_sectors, BioCache bio_cache,
                       std::unique_ptr<StripeTarget>* out);
  BlockDevice* bdev() { return &bdev_; }
  uint64_t clones() const { return clones_.load(std::memory_order_relaxed); }
  BioSet& clone_set() { return clone_set_; }  // its cache follows bio_cache, live (daemon/live_toggles.h)

  // Which child and which sector a device sector maps to (exposed for tests).
  unsigned map_sector(sector_t sector, sector_t* child_sector) const;

 private:
  StripeTarget(std::vector<BlockDevice*> children, uint32_t chunk_sectors);
  Status init(BioCache bio_cache);
  static void submit(BlockDevice* bdev, Bio* bio);

  std::vector<BlockDevice*> children_;
  uint32_t chunk_sectors_;
  unsigned chunk_shift_;
  BioSet clone_set_;
  BlockDevice bdev_;
  std::atomic<uint64_t> clones_{0};
};

}  // namespace biofs
