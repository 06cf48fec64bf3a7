// Counterpart of the bio-merging half of block/blk-merge.c, Linux v6.18: blk_rq_merge_ok,
// blk_try_merge, bio_will_gap, ll_back_merge_fn, ll_front_merge_fn, ll_new_hw_segment,
// bio_attempt_back_merge, bio_attempt_front_merge, blk_attempt_bio_merge,
// blk_attempt_plug_merge. The rules are listed in blk_rq_merge.h.
#include "blk_rq_merge.h"

#include "blk_trace.h"

#include <algorithm>
#include <climits>

namespace biofs {

// bio_get_first_bvec() (include/linux/bio.h): the multi-page vec the iterator points at.
static inline BioVec bio_get_first_bvec(const Bio* bio) {
  return mp_bvec_iter_bvec(bio->bi_io_vec, bio->bi_iter);
}

// bio_get_last_bvec() (block/blk-merge.c): the bio's last multi-page vec, cut where the bio ends.
static BioVec bio_get_last_bvec(const Bio* bio) {
  BioVec bv = bio_get_first_bvec(bio);
  if (bv.bv_len == bio->bi_iter.bi_size) return bv;  // a single vec
  BvecIter iter = bio->bi_iter;
  bvec_iter_advance(bio->bi_io_vec, iter, iter.bi_size);
  const uint32_t idx = iter.bi_bvec_done ? iter.bi_idx : iter.bi_idx - 1;
  bv = bio->bi_io_vec[idx];
  if (iter.bi_bvec_done) bv.bv_len = iter.bi_bvec_done;  // the bio ends inside this vec
  return bv;
}

// biovec_phys_mergeable() (block/blk.h): vec2 continues vec1 in memory and the two stay within
// one segment boundary.
static inline bool biovec_phys_mergeable(const QueueLimits& lim, const BioVec& vec1, const BioVec& vec2) {
  const uint64_t mask = lim.seg_boundary_mask;
  const uint64_t addr1 = reinterpret_cast<uintptr_t>(bvec_virt(vec1));
  const uint64_t addr2 = reinterpret_cast<uintptr_t>(bvec_virt(vec2));
  if (addr1 + vec1.bv_len != addr2) return false;
  return (addr1 | mask) == ((addr2 + vec2.bv_len - 1) | mask);
}

// __bvec_gap_to_prev() (block/blk.h).
static inline bool __bvec_gap_to_prev(const QueueLimits& lim, const BioVec& bprv, uint32_t offset) {
  return (offset & lim.virt_boundary_mask) || ((bprv.bv_offset + bprv.bv_len) & lim.virt_boundary_mask);
}

// bio_will_gap(): would `next` following `prev` (the last bio of prev_rq for a back merge)
// leave a gap inside the virt boundary?
static bool bio_will_gap(const QueueLimits& lim, const Request* prev_rq, const Bio* prev, const Bio* next) {
  if (!bio_has_data(prev) || !lim.virt_boundary_mask) return false;
  // A merged request whose first vec starts off the boundary is hard to keep gap-free: none.
  BioVec pb = bio_get_first_bvec(prev_rq ? prev_rq->bio : prev);
  if (pb.bv_offset & lim.virt_boundary_mask) return true;
  pb = bio_get_last_bvec(prev);
  const BioVec nb = bio_get_first_bvec(next);
  if (biovec_phys_mergeable(lim, pb, nb)) return false;
  return __bvec_gap_to_prev(lim, pb, nb.bv_offset);
}

static inline bool req_gap_back_merge(const Request* req, const Bio* bio) {
  return bio_will_gap(req->q->limits(), req, req->biotail, bio);
}

static inline bool req_gap_front_merge(const Request* req, const Bio* bio) {
  return bio_will_gap(req->q->limits(), nullptr, bio, req->bio);
}

// blk_queue_get_max_sectors() (block/blk.h), without atomic writes.
static inline uint32_t blk_queue_get_max_sectors(const Request* rq) {
  const QueueLimits& lim = rq->q->limits();
  switch (req_op_of(rq)) {
    case REQ_OP_DISCARD: return std::min<uint32_t>(lim.max_discard_sectors, UINT_MAX >> SECTOR_SHIFT);
    case REQ_OP_WRITE_ZEROES: return lim.max_write_zeroes_sectors;
    default: return lim.max_sectors;
  }
}

// blk_boundary_sectors_left() (include/linux/blkdev.h).
static inline uint32_t blk_boundary_sectors_left(sector_t offset, uint32_t boundary) {
  if ((boundary & (boundary - 1)) == 0) return boundary - uint32_t(offset & (boundary - 1));
  return boundary - uint32_t(offset % boundary);
}

uint32_t blk_rq_get_max_sectors(const Request* rq, sector_t offset) {
  const uint32_t max_sectors = blk_queue_get_max_sectors(rq);
  const uint32_t boundary = rq->q->limits().chunk_sectors;  // blk_boundary_sectors(), not atomic
  if (!boundary || req_op_of(rq) == REQ_OP_DISCARD) return max_sectors;
  return std::min(max_sectors, blk_boundary_sectors_left(offset, boundary));
}

// blk_rq_get_max_segments(): a discard's are max_discard_segments, 1 here (one DSM range).
static inline uint32_t blk_rq_get_max_segments(const Request* rq) {
  return req_op_of(rq) == REQ_OP_DISCARD ? 1 : rq->q->limits().max_segments;
}

// ll_new_hw_segment(): the bio's segments join the request's, within max_segments.
static int ll_new_hw_segment(Request* req, Bio*, unsigned nr_phys_segs) {
  if (req_op_of(req) == REQ_OP_DISCARD) return 1;  // a discard merge adds no segment
  if (req->nr_phys_segments + nr_phys_segs > blk_rq_get_max_segments(req)) {
    req_set_nomerge(req);
    return 0;
  }
  req->nr_phys_segments = uint16_t(req->nr_phys_segments + nr_phys_segs);
  return 1;
}

int ll_back_merge_fn(Request* req, Bio* bio, unsigned nr_segs) {
  if (req_gap_back_merge(req, bio)) return 0;
  if (blk_rq_sectors(req) + bio_sectors(bio) > blk_rq_get_max_sectors(req, blk_rq_pos(req))) {
    req_set_nomerge(req);
    return 0;
  }
  return ll_new_hw_segment(req, bio, nr_segs);
}

int ll_front_merge_fn(Request* req, Bio* bio, unsigned nr_segs) {
  if (req_gap_front_merge(req, bio)) return 0;
  if (blk_rq_sectors(req) + bio_sectors(bio) > blk_rq_get_max_sectors(req, bio->bi_iter.bi_sector)) {
    req_set_nomerge(req);
    return 0;
  }
  return ll_new_hw_segment(req, bio, nr_segs);
}

void blk_rq_set_mixed_merge(Request* rq) {
  if (rq->rq_flags & RQF_MIXED_MERGE) return;
  // The request no longer describes every bio's failfast flags, only its first one's: give
  // them to each bio.
  const blk_opf_t ff = rq->cmd_flags & REQ_FAILFAST_MASK;
  for (Bio* bio = rq->bio; bio; bio = bio->bi_next) bio->bi_opf |= ff;
  rq->rq_flags |= RQF_MIXED_MERGE;
}

// blk_update_mixed_merge() (no REQ_RAHEAD here): after a front merge into a mixed request, the
// request carries its new first bio's failfast flags.
static inline void blk_update_mixed_merge(Request* req, const Bio* bio, bool front_merge) {
  if ((req->rq_flags & RQF_MIXED_MERGE) && front_merge) {
    req->cmd_flags &= ~REQ_FAILFAST_MASK;
    req->cmd_flags |= bio->bi_opf & REQ_FAILFAST_MASK;
  }
}

bio_merge_status bio_attempt_back_merge(Request* req, Bio* bio, unsigned nr_segs) {
  const blk_opf_t ff = bio->bi_opf & REQ_FAILFAST_MASK;
  if (!ll_back_merge_fn(req, bio, nr_segs)) return BIO_MERGE_FAILED;
  trace_block_bio_backmerge(req->q, bio);
  if ((req->cmd_flags & REQ_FAILFAST_MASK) != ff) blk_rq_set_mixed_merge(req);
  blk_update_mixed_merge(req, bio, false);
  bio->bi_next = nullptr;
  req->biotail->bi_next = bio;
  req->biotail = bio;
  req->__data_len += bio->bi_iter.bi_size;
  return BIO_MERGE_OK;
}

bio_merge_status bio_attempt_front_merge(Request* req, Bio* bio, unsigned nr_segs) {
  const blk_opf_t ff = bio->bi_opf & REQ_FAILFAST_MASK;
  if (!ll_front_merge_fn(req, bio, nr_segs)) return BIO_MERGE_FAILED;
  trace_block_bio_frontmerge(req->q, bio);
  if ((req->cmd_flags & REQ_FAILFAST_MASK) != ff) blk_rq_set_mixed_merge(req);
  blk_update_mixed_merge(req, bio, true);
  bio->bi_next = req->bio;
  req->bio = bio;
  req->__sector = bio->bi_iter.bi_sector;
  req->__data_len += bio->bi_iter.bi_size;
  return BIO_MERGE_OK;
}

bool blk_rq_merge_ok(const Request* rq, const Bio* bio) {
  if (!rq_mergeable(rq) || !bio_mergeable(bio)) return false;
  if (req_op_of(rq) != bio_op(bio)) return false;
  if (rq->bio->bi_ioprio != bio->bi_ioprio) return false;
  return true;
}

// blk_try_merge(). blk_discard_mergable() is false: max_discard_segments is 1 here.
elv_merge blk_try_merge(const Request* rq, const Bio* bio) {
  if (blk_rq_pos(rq) + blk_rq_sectors(rq) == bio->bi_iter.bi_sector) return ELEVATOR_BACK_MERGE;
  if (blk_rq_pos(rq) - bio_sectors(bio) == bio->bi_iter.bi_sector) return ELEVATOR_FRONT_MERGE;
  return ELEVATOR_NO_MERGE;
}

bio_merge_status blk_attempt_bio_merge(RequestQueue*, Request* rq, Bio* bio, unsigned nr_segs) {
  if (!blk_rq_merge_ok(rq, bio)) return BIO_MERGE_NONE;
  switch (blk_try_merge(rq, bio)) {
    case ELEVATOR_BACK_MERGE: return bio_attempt_back_merge(rq, bio, nr_segs);
    case ELEVATOR_FRONT_MERGE: return bio_attempt_front_merge(rq, bio, nr_segs);
    default: return BIO_MERGE_NONE;
  }
}

// blk_account_io_merge_bio(): one merge in the request's op_stat_group().
static inline void blk_account_io_merge_bio(const Request* req, QueueCounters* c) {
  const req_op op = req_op_of(req);
  if (op == REQ_OP_DISCARD)
    c->discard_merges++;
  else if (op_is_write(op))
    c->write_merges++;
  else
    c->read_merges++;
}

bool blk_attempt_plug_merge(BlkPlug* plug, RequestQueue* q, Bio* bio, unsigned nr_segs, QueueCounters* counters) {
  if (!plug || plug->mq_list.empty()) return false;
  Request* rq = plug->mq_list.tail;
  if (rq->q == q) {
    if (blk_attempt_bio_merge(q, rq, bio, nr_segs) != BIO_MERGE_OK) return false;
    blk_account_io_merge_bio(rq, counters);
    return true;
  }
  if (!plug->multiple_queues) return false;
  for (rq = plug->mq_list.head; rq; rq = rq->rq_next) {
    if (rq->q != q) continue;
    if (blk_attempt_bio_merge(q, rq, bio, nr_segs) != BIO_MERGE_OK) break;
    blk_account_io_merge_bio(rq, counters);
    return true;
  }
  return false;
}

}  // namespace biofs
