// Counterpart of struct queue_limits (include/linux/blkdev.h) and blk_validate_limits()
// (block/blk-settings.c): what a device can take in one request. The driver sets them.
#pragma once

#include <cstdint>
#include <string>

#include "blk_types.h"

namespace biofs {

struct QueueLimits {
  uint32_t logical_block_size = 512;
  uint32_t physical_block_size = 0;  // 0: same as logical
  uint32_t max_hw_sectors = 255;     // BLK_SAFE_MAX_SECTORS until the driver says more
  uint32_t max_sectors = 0;          // soft limit; 0: max_hw_sectors (capped at 2560, as the kernel)
  uint32_t max_segments = 128;       // BLK_MAX_SEGMENTS
  uint32_t max_segment_size = 0;     // 0: 64 KiB, or unlimited with a virt boundary
  uint64_t virt_boundary_mask = 0;   // NVMe PRP: PAGE_SIZE - 1; no gaps inside this
  uint64_t seg_boundary_mask = 0;    // 0: 0xFFFFFFFF; a segment never crosses it
  uint32_t chunk_sectors = 0;        // I/O never crosses a multiple of this (RAID chunk)
  uint32_t dma_alignment = 511;      // a bvec's start must be aligned to this mask + 1
  uint32_t max_discard_sectors = 0;  // 0: discard not supported
  uint32_t max_write_zeroes_sectors = 0;
  // BLK_FEAT_WRITE_CACHE: the device has a volatile write cache, so REQ_PREFLUSH and flushes
  // reach it (blk_flush.h); without it they are dropped, as submit_bio_noacct() drops them.
  bool write_cache = false;
  // Derived by blk_validate_limits(): the largest single segment the cheap split check may
  // pass without walking (the kernel's max_fast_segment_size / min_segment_size).
  uint32_t max_fast_segment_size = 0;
};

// Fills the derived fields and defaults; returns an empty string, or one line saying which
// limit is wrong.
std::string blk_validate_limits(QueueLimits& lim);

}  // namespace biofs
