// Counterpart of the bio-merging half of block/blk-merge.c, Linux v6.18: a bio that continues
// (back merge) or precedes (front merge) a request still in the submitter's plug joins that
// request instead of taking a tag and a command of its own. blk_attempt_plug_merge() is called
// by blk_mq_submit_bio() (blk_mq_attempt_bio_merge()) after the split, before a request is
// allocated, unless the queue's nomerges is 2 (toggles.h) or the bio has REQ_NOMERGE_FLAGS.
//
// The rules, each the kernel's (the function that keeps it in brackets):
//  1. the request and the bio must both be mergeable: no REQ_NOMERGE, REQ_PREFLUSH or REQ_FUA
//     on either, and the request is no flush or write-zeroes (rq_mergeable, bio_mergeable);
//  2. the same op and the same I/O priority (blk_rq_merge_ok);
//  3. the bio starts where the request ends (back) or ends where it starts (front)
//     (blk_try_merge);
//  4. no gap at the virt boundary: the request's first vec starts on the boundary, and where
//     the two meet the vecs are one run of memory or end and start on the boundary
//     (bio_will_gap, req_gap_back_merge, req_gap_front_merge);
//  5. the merged size stays within max_sectors (max_discard_sectors for a discard) and does not
//     cross a chunk_sectors boundary counted from the merged request's start
//     (ll_back_merge_fn, ll_front_merge_fn, blk_rq_get_max_sectors);
//  6. the merged request's segment count stays within max_segments (ll_new_hw_segment; a
//     discard adds no segment);
//  7. a request a merge failed rule 5 or 6 for gets REQ_NOMERGE: nothing merges into it again
//     (req_set_nomerge);
//  8. only the plug's last request is tried when it is for this queue; a plug that has seen
//     several queues is scanned from its oldest request to the first one for this queue, which
//     is tried and ends the scan (blk_attempt_plug_merge: the tail form of the June 2025 fix
//     for e70c301faece "block: don't reorder requests in blk_add_rq_to_plug", in v6.18);
//  9. merged bios hang on rq->bio .. rq->biotail through bi_next; completion ends each one
//     with the request's status through its own bi_end_io (blk_mq_end_request);
// 10. a merge is counted per op group, as /sys/block/*/stat's merge columns
//     (blk_account_io_merge_bio).
// Not here because biofs has no such thing: cgroups, integrity, inline encryption, write hints
// and streams, atomic writes, zoned write plugging, the elevator's merges (and with them
// nomerges=1's QUEUE_FLAG_NOXMERGES), request-to-request merges, multi-range discard merges
// (the NVMe driver sends one DSM range: max_discard_segments 1).
#pragma once

#include "blk_mq.h"
#include "request.h"

namespace biofs {

enum bio_merge_status { BIO_MERGE_OK, BIO_MERGE_NONE, BIO_MERGE_FAILED };
enum elv_merge { ELEVATOR_NO_MERGE = 0, ELEVATOR_FRONT_MERGE = 1, ELEVATOR_BACK_MERGE = 2 };

// rq_mergeable() (include/linux/blkdev.h). No passthrough requests, and a request in a plug is
// never RQF_STARTED or part of a flush sequence (blk-flush issues those unplugged).
inline bool rq_mergeable(const Request* rq) {
  const req_op op = req_op_of(rq);
  if (op == REQ_OP_FLUSH || op == REQ_OP_WRITE_ZEROES) return false;
  return !(rq->cmd_flags & REQ_NOMERGE_FLAGS);
}

// bio_mergeable() (block/blk.h).
inline bool bio_mergeable(const Bio* bio) { return !(bio->bi_opf & REQ_NOMERGE_FLAGS); }

// req_set_nomerge() (block/blk.h): no bio merges into `req` after this.
inline void req_set_nomerge(Request* req) { req->cmd_flags |= REQ_NOMERGE; }

// The most sectors `rq` may hold when it starts at `offset`: max_sectors (or the discard and
// write-zeroes limits), cut at the next chunk_sectors boundary (blk_rq_get_max_sectors).
uint32_t blk_rq_get_max_sectors(const Request* rq, sector_t offset);

bool blk_rq_merge_ok(const Request* rq, const Bio* bio);
elv_merge blk_try_merge(const Request* rq, const Bio* bio);
// The limit checks of a back and a front merge; 1 if `bio` fits (and the segments are added
// to req->nr_phys_segments), 0 if not (and `req` may have been marked REQ_NOMERGE).
int ll_back_merge_fn(Request* req, Bio* bio, unsigned nr_segs);
int ll_front_merge_fn(Request* req, Bio* bio, unsigned nr_segs);
bio_merge_status bio_attempt_back_merge(Request* req, Bio* bio, unsigned nr_segs);
bio_merge_status bio_attempt_front_merge(Request* req, Bio* bio, unsigned nr_segs);
// blk_attempt_bio_merge(): the merge of `bio` into `rq` if the flags allow and the sectors meet.
bio_merge_status blk_attempt_bio_merge(RequestQueue* q, Request* rq, Bio* bio, unsigned nr_segs);

// blk_attempt_plug_merge(): merges `bio` (with `nr_segs` segments, from the split) into a
// request of `q` in `plug` (rule 8). True if it did: the bio is then part of that request and
// the merge is counted in `counters` (the plug's for `q`). The caller has checked
// blk_queue_nomerges() and bio_mergeable().
bool blk_attempt_plug_merge(BlkPlug* plug, RequestQueue* q, Bio* bio, unsigned nr_segs, QueueCounters* counters);

// blk_rq_set_mixed_merge(): the bios of `rq` differ in REQ_FAILFAST; each bio gets the
// request's failfast flags and RQF_MIXED_MERGE is set.
void blk_rq_set_mixed_merge(Request* rq);

}  // namespace biofs
