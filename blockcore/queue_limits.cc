// blk_validate_limits() as mainline Linux v6.18's (block/blk-settings.c): every default below is
// v6.18's unless its comment says it is biofs's own. The driver sets what it knows; 0 asks for
// the default.
#include "queue_limits.h"

#include <algorithm>

namespace biofs {

static bool is_power_of_2(uint64_t v) { return v && !(v & (v - 1)); }

std::string blk_validate_limits(QueueLimits& lim) {
  // v6.18: logical_block_size 0 means SECTOR_SIZE (512); otherwise blk_validate_block_size(): a
  // power of two from 512 to BLK_MAX_BLOCK_SIZE (64 KiB).
  if (!lim.logical_block_size) lim.logical_block_size = SECTOR_SIZE;
  if (!is_power_of_2(lim.logical_block_size) || lim.logical_block_size < SECTOR_SIZE ||
      lim.logical_block_size > BLK_MAX_BLOCK_SIZE)
    return "logical_block_size " + std::to_string(lim.logical_block_size) +
           " is not a power of two between 512 and 65536";
  // v6.18: a physical_block_size below the logical one (0 included) becomes the logical one.
  if (lim.physical_block_size < lim.logical_block_size)
    lim.physical_block_size = lim.logical_block_size;
  else if (!is_power_of_2(lim.physical_block_size))
    return "physical_block_size must be a power of two no smaller than the logical block size";
  // v6.18: max_hw_sectors 0 means BLK_SAFE_MAX_SECTORS (255); it must cover a page
  // (PAGE_SECTORS) and a logical block, and is rounded down to whole logical blocks.
  if (!lim.max_hw_sectors) lim.max_hw_sectors = BLK_SAFE_MAX_SECTORS;
  if (lim.max_hw_sectors < PAGE_SIZE >> SECTOR_SHIFT) return "max_hw_sectors is smaller than a page";
  const uint32_t lbs_sectors = lim.logical_block_size >> SECTOR_SHIFT;
  if (lim.max_hw_sectors < lbs_sectors) return "max_hw_sectors is smaller than one logical block";
  lim.max_hw_sectors &= ~(lbs_sectors - 1);
  // v6.18: max_sectors is derived. A driver-set max_sectors here plays the kernel's
  // max_user_sectors (at least BLK_MIN_SEGMENT_SIZE bytes, capped at max_hw_sectors);
  // otherwise it is min(max_hw_sectors, BLK_DEF_MAX_SECTORS_CAP): 8192 sectors (4 MiB) since
  // v6.16 ("block: increase BLK_DEF_MAX_SECTORS_CAP"), 2560 before. (biofs has no
  // max_dev_sectors, io_opt or io_min, the other inputs of v6.18's rule.) Rounded down to
  // whole logical blocks.
  if (lim.max_sectors) {
    if (lim.max_sectors < BLK_MIN_SEGMENT_SIZE / SECTOR_SIZE) return "max_sectors is smaller than 4 KiB";
    lim.max_sectors = std::min(lim.max_hw_sectors, lim.max_sectors);
  } else {
    lim.max_sectors = std::min(lim.max_hw_sectors, BLK_DEF_MAX_SECTORS_CAP);
  }
  lim.max_sectors &= ~(lbs_sectors - 1);
  // v6.18: max_segments 0 means BLK_MAX_SEGMENTS (128).
  if (!lim.max_segments) lim.max_segments = BLK_MAX_SEGMENTS;
  // v6.18: seg_boundary_mask 0 means BLK_SEG_BOUNDARY_MASK (0xFFFFFFFF); it must be at least
  // BLK_MIN_SEGMENT_SIZE - 1.
  if (!lim.seg_boundary_mask) lim.seg_boundary_mask = BLK_SEG_BOUNDARY_MASK;
  if (lim.seg_boundary_mask < BLK_MIN_SEGMENT_SIZE - 1) return "seg_boundary_mask is smaller than a page";
  if (lim.virt_boundary_mask) {
    // biofs's own check (v6.18 trusts the driver): a power of two minus one, at least a page.
    if (lim.virt_boundary_mask < PAGE_SIZE - 1 || !is_power_of_2(lim.virt_boundary_mask + 1))
      return "virt_boundary_mask must be a power of two minus one, at least a page";
    // v6.18: with a virtual boundary, max_segment_size 0 means UINT_MAX (only boundaries matter).
    if (!lim.max_segment_size) lim.max_segment_size = UINT32_MAX;
  } else {
    // v6.18: max_segment_size 0 means BLK_MAX_SEGMENT_SIZE (64 KiB); at least BLK_MIN_SEGMENT_SIZE.
    if (!lim.max_segment_size) lim.max_segment_size = BLK_MAX_SEGMENT_SIZE;
    if (lim.max_segment_size < BLK_MIN_SEGMENT_SIZE) return "max_segment_size is smaller than a page";
  }
  // v6.18: max_fast_segment_size = min(max_segment_size or seg_boundary_mask + 1, PAGE_SIZE).
  const uint64_t seg_size =
      lim.seg_boundary_mask > uint64_t(lim.max_segment_size) - 1 ? lim.max_segment_size : lim.seg_boundary_mask + 1;
  lim.max_fast_segment_size = uint32_t(std::min<uint64_t>(seg_size, PAGE_SIZE));
  // v6.18: dma_alignment 0 means SECTOR_SIZE - 1 (511); at most PAGE_SIZE.
  if (!lim.dma_alignment) lim.dma_alignment = SECTOR_SIZE - 1;
  if (lim.dma_alignment > PAGE_SIZE) return "dma_alignment is larger than a page";
  // biofs's own check: chunk_sectors, when set, covers a logical block.
  if (lim.chunk_sectors && lim.chunk_sectors < lbs_sectors)
    return "chunk_sectors is smaller than one logical block";
  // max_discard_sectors / max_write_zeroes_sectors: 0, no support, as v6.18's
  // max_hw_discard_sectors / max_write_zeroes_sectors (biofs has no max_user_discard_sectors).
  // write_cache: off unless the driver sets it, as v6.18's BLK_FEAT_WRITE_CACHE.
  return "";
}

}  // namespace biofs
