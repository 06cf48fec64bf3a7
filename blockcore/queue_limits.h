// Counterpart of struct queue_limits (include/linux/blkdev.h) and blk_validate_limits()
// (block/blk-settings.c): what a device can take in one request. The driver sets them.
#pragma once

#include <cstdint>
#include <string>

#include "blk_types.h"

namespace biofs {

// The defaults of mainline Linux v6.18 (include/linux/blkdev.h, block/blk.h): what
// blk_validate_limits() fills in for a limit left at 0.
inline constexpr uint32_t BLK_SAFE_MAX_SECTORS = 255;
inline constexpr uint32_t BLK_MAX_SEGMENTS = 128;
inline constexpr uint32_t BLK_MAX_SEGMENT_SIZE = 65536;
inline constexpr uint64_t BLK_SEG_BOUNDARY_MASK = 0xFFFFFFFFull;
inline constexpr uint32_t BLK_MIN_SEGMENT_SIZE = 4096;
inline constexpr uint32_t BLK_MAX_BLOCK_SIZE = 64 * 1024;
// The default cap on max_sectors (block/blk.h): SZ_4M >> SECTOR_SHIFT since v6.16, and so in
// v6.18; it was 2560 (1280 KiB) before.
inline constexpr uint32_t BLK_DEF_MAX_SECTORS_CAP = (4u << 20) >> SECTOR_SHIFT;

struct QueueLimits {
  uint32_t logical_block_size = 512;  // 0: SECTOR_SIZE (v6.18)
  uint32_t physical_block_size = 0;   // below the logical size (0): the logical size (v6.18)
  uint32_t max_hw_sectors = 255;      // BLK_SAFE_MAX_SECTORS until the driver says more (0: the same)
  uint32_t max_sectors = 0;           // soft limit (the kernel's max_user_sectors); 0: derived,
                                      // min(max_hw_sectors, BLK_DEF_MAX_SECTORS_CAP) (v6.18)
  uint32_t max_segments = 128;        // BLK_MAX_SEGMENTS (0: the same, v6.18)
  uint32_t max_segment_size = 0;      // 0: 64 KiB, or unlimited with a virt boundary (v6.18)
  uint64_t virt_boundary_mask = 0;    // NVMe PRP: PAGE_SIZE - 1; no gaps inside this
  uint64_t seg_boundary_mask = 0;     // 0: 0xFFFFFFFF (v6.18); a segment never crosses it
  uint32_t chunk_sectors = 0;         // I/O never crosses a multiple of this (RAID chunk)
  uint32_t dma_alignment = 511;       // a bvec's start must be aligned to this mask + 1 (0: 511, v6.18)
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
