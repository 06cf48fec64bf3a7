#include "block_io.h"

#include "io_batch.h"

namespace biofs {

int BlockIo::init() {
  if (int ret = bs_.init(); ret) return ret;
  bs_.set_cache_mode(bio_cache_);
  return 0;
}

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
