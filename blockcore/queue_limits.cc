#include "queue_limits.h"

#include <algorithm>

namespace biofs {

static bool is_power_of_2(uint64_t v) { return v && !(v & (v - 1)); }

std::string blk_validate_limits(QueueLimits& lim) {
  if (!is_power_of_2(lim.logical_block_size) || lim.logical_block_size < SECTOR_SIZE ||
      lim.logical_block_size > 64 * 1024)
    return "logical_block_size " + std::to_string(lim.logical_block_size) +
           " is not a power of two between 512 and 65536";
  if (!lim.physical_block_size) lim.physical_block_size = lim.logical_block_size;
  if (lim.physical_block_size < lim.logical_block_size || !is_power_of_2(lim.physical_block_size))
    return "physical_block_size must be a power of two no smaller than the logical block size";
  const uint32_t lbs_sectors = lim.logical_block_size >> SECTOR_SHIFT;
  if (lim.max_hw_sectors < lbs_sectors) return "max_hw_sectors is smaller than one logical block";
  lim.max_hw_sectors &= ~(lbs_sectors - 1);
  if (!lim.max_sectors) lim.max_sectors = std::min(lim.max_hw_sectors, 2560u);  // BLK_DEF_MAX_SECTORS_CAP
  lim.max_sectors = std::min(lim.max_sectors, lim.max_hw_sectors) & ~(lbs_sectors - 1);
  if (!lim.max_segments) return "max_segments must be at least 1";
  if (!lim.seg_boundary_mask) lim.seg_boundary_mask = 0xFFFFFFFFull;
  if (lim.seg_boundary_mask < PAGE_SIZE - 1) return "seg_boundary_mask is smaller than a page";
  if (lim.virt_boundary_mask) {
    if (lim.virt_boundary_mask < PAGE_SIZE - 1 || !is_power_of_2(lim.virt_boundary_mask + 1))
      return "virt_boundary_mask must be a power of two minus one, at least a page";
    if (!lim.max_segment_size) lim.max_segment_size = UINT32_MAX;  // only boundaries matter
  } else if (!lim.max_segment_size) {
    lim.max_segment_size = 64 * 1024;  // BLK_MAX_SEGMENT_SIZE
  }
  if (lim.max_segment_size < PAGE_SIZE) return "max_segment_size is smaller than a page";
  if (lim.chunk_sectors && lim.chunk_sectors < lbs_sectors)
    return "chunk_sectors is smaller than one logical block";
  lim.max_fast_segment_size = std::min<uint32_t>(lim.max_segment_size, PAGE_SIZE);
  return "";
}

}  // namespace biofs
