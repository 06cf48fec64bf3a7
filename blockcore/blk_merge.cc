// Counterpart of block/blk-merge.c (splitting): get_max_io_size, bvec_split_segs,
// bio_split_rw_at, bio_split, __bio_split_to_limits.
#include "blk_merge.h"

#include <algorithm>
#include <cerrno>

namespace biofs {

static uint64_t bvec_phys(const BioVec& bv) {
  return reinterpret_cast<uintptr_t>(bv.bv_page) + bv.bv_offset;
}

// Would `offset` (the next vec's start) leave a gap after `prev` inside a virtual boundary?
static bool bvec_gap_to_prev(const QueueLimits& lim, const BioVec& prev, uint32_t offset) {
  if (!lim.virt_boundary_mask) return false;
  return ((offset & lim.virt_boundary_mask) != 0) ||
         (((prev.bv_offset + prev.bv_len) & lim.virt_boundary_mask) != 0);
}

// The longest segment starting at address `paddr` that respects the segment boundary and the
// maximum segment size, capped at len.
static uint32_t get_max_segment_size(const QueueLimits& lim, uint64_t paddr, uint32_t len) {
  const uint64_t to_boundary = lim.seg_boundary_mask - (lim.seg_boundary_mask & paddr);
  const uint64_t cap = std::min<uint64_t>(to_boundary, uint64_t(lim.max_segment_size) - 1) + 1;
  return uint32_t(std::min<uint64_t>(len, cap));
}

// Splits one multi-page bvec into segments until a limit stops it. Returns true when the bio
// must be split inside (or before) this bvec.
static bool bvec_split_segs(const QueueLimits& lim, const BioVec& bv, unsigned* nsegs,
                            uint32_t* bytes, unsigned max_segs, uint32_t max_bytes) {
  const uint32_t max_len = max_bytes - *bytes;
  uint32_t len = std::min(bv.bv_len, max_len);
  uint32_t total = 0;
  while (len && *nsegs < max_segs) {
    const uint32_t seg = get_max_segment_size(lim, bvec_phys(bv) + total, len);
    (*nsegs)++;
    total += seg;
    len -= seg;
    if ((bv.bv_offset + total) & lim.virt_boundary_mask) break;  // a gap would follow
  }
  *bytes += total;
  return len > 0 || bv.bv_len > max_len;
}

uint32_t get_max_io_size(const Bio* bio, const QueueLimits& lim) {
  const uint32_t pbs = lim.physical_block_size >> SECTOR_SHIFT;
  const uint32_t lbs = lim.logical_block_size >> SECTOR_SHIFT;
  uint32_t max_sectors = lim.max_sectors;
  if (lim.chunk_sectors) {
    const sector_t off = bio->bi_iter.bi_sector;
    const uint32_t c = lim.chunk_sectors;
    const uint32_t left = (c & (c - 1)) == 0 ? c - uint32_t(off & (c - 1)) : c - uint32_t(off % c);
    max_sectors = std::min(max_sectors, left);
  }
  const uint32_t start = uint32_t(bio->bi_iter.bi_sector) & (pbs - 1);
  const uint32_t end = (start + max_sectors) & ~(pbs - 1);
  const uint32_t sectors = end > start ? end - start : max_sectors & ~(lbs - 1);
  return sectors << SECTOR_SHIFT;
}

int bio_split_rw_at(Bio* bio, const QueueLimits& lim, unsigned* segs, uint32_t max_bytes) {
  // v6.18: bio_split_rw_at() is bio_split_io_at() with len_align_mask = lim->dma_alignment, so
  // a vec's length must be as aligned as its start.
  const uint32_t len_align_mask = lim.dma_alignment;
  unsigned nsegs = 0;
  uint32_t bytes = 0;
  BioVec prev{};
  bool have_prev = false;
  BvecIter iter = bio->bi_iter;
  bool split = false;
  while (iter.bi_size) {
    const BioVec bv = mp_bvec_iter_bvec(bio->bi_io_vec, iter);
    // Misalignment is no reason to split: no piece could be aligned. The whole bio fails.
    if ((bv.bv_offset & lim.dma_alignment) || (bv.bv_len & len_align_mask)) return -EINVAL;
    if (have_prev && bvec_gap_to_prev(lim, prev, bv.bv_offset)) {
      split = true;
      break;
    }
    if (nsegs < lim.max_segments && bytes + bv.bv_len <= max_bytes &&
        bv.bv_offset + bv.bv_len <= lim.max_fast_segment_size) {
      nsegs++;
      bytes += bv.bv_len;
    } else if (bvec_split_segs(lim, bv, &nsegs, &bytes, lim.max_segments, max_bytes)) {
      split = true;
      break;
    }
    prev = bv;
    have_prev = true;
    bvec_iter_advance_single(bio->bi_io_vec, iter, bv.bv_len);
  }
  *segs = nsegs;
  if (!split) return 0;
  if (bio->bi_opf & REQ_NOWAIT) return -EAGAIN;  // cannot split a nowait bio sanely
  // Individual vecs need not be block aligned; every piece must be.
  bytes &= ~(lim.logical_block_size - 1);
  if (!bytes) return -EINVAL;
  bio->bi_opf &= ~REQ_POLLED;  // bio_clear_polled(): split bios are not polled
  return int(bytes >> SECTOR_SHIFT);
}

Bio* bio_split(Bio* bio, int sectors, gfp_t gfp, BioSet* bs) {
  if (sectors <= 0) return ERR_PTR<Bio>(-EINVAL);
  if (uint32_t(sectors) >= bio_sectors(bio)) return ERR_PTR<Bio>(-EINVAL);
  Bio* split = bio_alloc_clone(bio->bi_bdev, bio, gfp, bs);
  if (!split) return ERR_PTR<Bio>(-ENOMEM);
  split->bi_iter.bi_size = uint32_t(sectors) << SECTOR_SHIFT;
  bio_advance(bio, split->bi_iter.bi_size);
  return split;
}

// Discard and write-zeroes carry no pages: only a sector limit, aligned to the block size.
static int bio_split_no_data(const Bio* bio, const QueueLimits& lim, uint32_t max_sectors) {
  if (!max_sectors) return -EOPNOTSUPP;
  const uint32_t lbs = lim.logical_block_size >> SECTOR_SHIFT;
  uint32_t limit = max_sectors & ~(lbs - 1);
  if (lim.chunk_sectors) limit = std::min(limit, get_max_io_size(bio, lim) >> SECTOR_SHIFT);
  return bio_sectors(bio) > limit ? int(limit) : 0;
}

Bio* bio_split_to_limits(Bio* bio, const QueueLimits& lim, unsigned* nr_segs, BioSet* bs,
                         SplitCounters* counters) {
  int split_sectors;
  switch (bio_op(bio)) {
    case REQ_OP_READ:
    case REQ_OP_WRITE:
      counters->checks++;
      split_sectors = bio_split_rw_at(bio, lim, nr_segs, get_max_io_size(bio, lim));
      break;
    case REQ_OP_DISCARD:
      *nr_segs = 1;
      split_sectors = bio_split_no_data(bio, lim, lim.max_discard_sectors);
      break;
    case REQ_OP_WRITE_ZEROES:
      *nr_segs = 0;
      split_sectors = bio_split_no_data(bio, lim, lim.max_write_zeroes_sectors);
      break;
    default:  // flush and friends: nothing to split
      *nr_segs = bio->bi_iter.bi_size ? 1 : 0;
      return bio;
  }
  // bio_submit_split(): an error ends the whole bio, before any of it is issued, with the
  // errno's status (-EINVAL: BLK_STS_INVAL, -EAGAIN: BLK_STS_AGAIN, -ENOMEM: BLK_STS_RESOURCE).
  if (split_sectors == 0) return bio;
  Bio* split = split_sectors < 0 ? ERR_PTR<Bio>(split_sectors) : bio_split(bio, split_sectors, GFP_KERNEL, bs);
  if (IS_ERR(split)) {
    bio_set_status(bio, errno_to_blk_status(int(PTR_ERR(split))));
    bio_endio(bio);
    return nullptr;
  }
  bio_chain(split, bio);
  split->bi_opf |= REQ_NOMERGE;  // v6.18 bio_submit_split(): no chance to merge the split piece
  counters->splits++;
  return split;
}

void bio_iov_bvec_set(Bio* bio, BioVec* table, uint16_t nr_segs, uint32_t offset, uint32_t size) {
  bio_set_flag(bio, BIO_CLONED);
  bio->bi_io_vec = table;
  bio->bi_vcnt = nr_segs;
  bio->bi_iter.bi_idx = 0;
  bio->bi_iter.bi_bvec_done = 0;
  bio->bi_iter.bi_size = size + offset;
  bvec_iter_advance(table, bio->bi_iter, offset);  // offset may cross into a later vec
  bio->bi_iter.bi_size = size;
}

}  // namespace biofs
