#include "block_io.h"

#include "io_batch.h"

namespace biofs {

BlockIo::BlockIo(BlockDevice* bdev, uint32_t block_size, BioCache bio_cache)
    : bdev_(bdev),
      block_size_(block_size),
      bs_(64, 0, BIOSET_NEED_BVECS | bio_cache_flags(bio_cache) | (bio_cache != BioCache::off ? BIOSET_TRIM_IDLE : 0u)) {}

int BlockIo::read(uint64_t blk, uint32_t count, void* buf) {
  IoBatch b(this);
  b.read(blk, count, buf);
  return b.wait();
}

int BlockIo::write(uint64_t blk, uint32_t count, const void* buf, blk_opf_t flags) {
  IoBatch b(this);
  b.write(blk, count, buf, flags);
  return b.wait();
}

int BlockIo::flush() {
  IoBatch b(this);
  b.flush();
  return b.wait();
}

}  // namespace biofs
