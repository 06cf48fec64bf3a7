// Counterpart of the splitting half of block/blk-merge.c (the merging half: blk_rq_merge.h):
// the cheap bio_may_need_split() gate, the full walk that finds where a bio must be split to fit
// the queue limits, and the split itself (a clone for the front, chained to the rest).
#pragma once

#include "bio_set.h"
#include "queue_limits.h"
#include "toggles.h"

namespace biofs {

// The form of "block: fix bio_may_need_split() by using bvec iterator way" (2025): the vec the iterator points at covers the whole bio and fits in one fast
// segment. Correct whatever bi_vcnt says; reads bi_iter and bi_io_vec (both in line 1).
inline bool bio_may_need_split_iter(const Bio* bio, const QueueLimits& lim) {
  if (lim.chunk_sectors) return true;
  if (!bio->bi_io_vec) return true;  // no data pages: the full check sorts out the op
  const BioVec& bv = bio->bi_io_vec[bio->bi_iter.bi_idx];
  if (bio->bi_iter.bi_size > bv.bv_len - bio->bi_iter.bi_bvec_done) return true;
  return bv.bv_len + bv.bv_offset > lim.max_fast_segment_size;
}

// The form before that commit: trusts bi_vcnt. For a clone (bi_vcnt 0) it always walks; for a
// bio over a caller's bvec table whose bi_vcnt does not describe its iterator it can say "no
// split" for a bio that needs one. Kept only to measure against.
inline bool bio_may_need_split_fast(const Bio* bio, const QueueLimits& lim) {
  if (lim.chunk_sectors) return true;
  if (bio->bi_vcnt != 1) return true;
  return bio->bi_io_vec[0].bv_len + bio->bi_io_vec[0].bv_offset > lim.max_fast_segment_size;
}

inline bool bio_may_need_split(const Bio* bio, const QueueLimits& lim, SplitCheck mode) {
  return mode == SplitCheck::iter ? bio_may_need_split_iter(bio, lim) : bio_may_need_split_fast(bio, lim);
}

// The largest I/O in bytes a bio starting at its sector may be: max_sectors, cut at the next
// chunk boundary, aligned to the physical (else logical) block size. get_max_io_size().
uint32_t get_max_io_size(const Bio* bio, const QueueLimits& lim);

// bio_split_rw_at(): walks a read/write bio's multi-page bvecs against every limit (segment
// count and size, segment boundary, virtual boundary gaps, max_bytes). Returns the sector count
// to split at, rounded down to the logical block size; 0 when the whole bio fits; a negative
// errno when it cannot be split sanely: -EAGAIN for REQ_NOWAIT; -EINVAL when a vec's offset or
// length is not aligned to lim.dma_alignment (v6.18's len_align_mask), or when the part that
// fits rounds down to 0 bytes. *segs receives the segment count of the part that fits.
int bio_split_rw_at(Bio* bio, const QueueLimits& lim, unsigned* segs, uint32_t max_bytes);

// bio_split(): a clone of bio's first `sectors` from `bs`; bio advances past them. The caller
// chains and submits. As the kernel's, it never returns nullptr: ERR_PTR(-EINVAL) if sectors
// is <= 0 or not less than the bio's (a caller bug; the bio is left untouched), ERR_PTR(-ENOMEM)
// on allocation failure with GFP_NOWAIT. Test with IS_ERR(), read the errno with PTR_ERR().
Bio* bio_split(Bio* bio, int sectors, gfp_t gfp, BioSet* bs);

struct SplitCounters {
  uint64_t checks = 0;  // bios that went through the full walk
  uint64_t splits = 0;  // splits made
};

// __bio_split_to_limits(): the bio to issue now — `bio` itself when it fits, else a new clone
// for its front, chained to `bio` and marked REQ_NOMERGE (v6.18 bio_submit_split(): nothing
// merges with a split piece, blk_rq_merge.h), while `bio` then covers the rest and must be
// submitted again.
// Flush and other data-less ops other than discard/write-zeroes pass untouched. On an error the
// whole bio is ended, nothing of it issued, with errno_to_blk_status() of the errno (a
// misaligned vec or an empty split: BLK_STS_INVAL), and nullptr is returned.
Bio* bio_split_to_limits(Bio* bio, const QueueLimits& lim, unsigned* nr_segs, BioSet* bs,
                         SplitCounters* counters);

// bio_iov_bvec_set(): aims a bio at a caller-owned bvec table (zero-copy from a caller's
// buffer list), as a clone: bi_vcnt is set to the table's length, which need not match the
// window [offset, offset + size) the iterator describes.
void bio_iov_bvec_set(Bio* bio, BioVec* table, uint16_t nr_segs, uint32_t offset, uint32_t size);

}  // namespace biofs
