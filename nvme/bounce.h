// Aligned bounce memory for commands whose buffers a transport cannot use as they are: an
// O_DIRECT backing file needs aligned memory, and fixed buffers must lie in a registered
// region. The kernel's counterpart is the bounce copy of blk_rq_map_user_iov() (block/blk-map.c)
// for unaligned passthrough buffers. One slot per command id, so a slot is never shared.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "lib/status.h"

namespace biofs {

class BounceArena {
 public:
  BounceArena() = default;
  ~BounceArena();
  BounceArena(const BounceArena&) = delete;
  BounceArena& operator=(const BounceArena&) = delete;

  // Reserves `slots` page-aligned slots of `slot_size` bytes (rounded up to pages). The memory
  // is reserved, not touched: pages appear on first use. Ok, or io_error with one line
  // ("bounce buffers: cannot map N MiB: ...") when the system refuses the mapping.
  Status init(unsigned slots, size_t slot_size);
  bool ready() const { return base_ != nullptr; }
  uint8_t* slot(unsigned i) const { return base_ + size_t(i) * slot_size_; }
  size_t slot_size() const { return slot_size_; }
  uint8_t* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  size_t slot_size_ = 0;
};

// Gathers the iovecs into dst / scatters src into the iovecs.
void copy_from_iovecs(uint8_t* dst, const iovec* vecs, unsigned nr);
void copy_to_iovecs(const iovec* vecs, unsigned nr, const uint8_t* src);

}  // namespace biofs
