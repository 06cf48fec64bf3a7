#include "blk_flush.h"

#include "blk.h"
#include "percpu_stat.h"

namespace biofs {

namespace {

// REQ_FSEQ_PREFLUSH done: on success the held write goes on (REQ_FSEQ_DATA), without the flag.
void flush_end_io(Bio* flush) {
  Bio* data = static_cast<Bio*>(flush->bi_private);
  const blk_status_t st = flush->bi_status;
  bio_put(flush);
  if (st != BLK_STS_OK) {
    bio_set_status(data, st);
    bio_endio(data);
    return;
  }
  blk_mq_submit_bio_plug(data, nullptr);
}

}  // namespace

// The flagged bios (and flushes) of blk_insert_flush().
bool blk_insert_flush_slow(Bio* bio) {
  RequestQueue* q = bio->bi_bdev->queue;
  if (!q->limits().write_cache) {
    bio->bi_opf &= ~(REQ_PREFLUSH | REQ_FUA);
    if (bio_op(bio) != REQ_OP_FLUSH) return false;
    bio_set_status(bio, BLK_STS_OK);
    bio_endio(bio);
    return true;
  }
  if (bio_op(bio) == REQ_OP_FLUSH) {
    blk_stat_count_flush();
    return false;
  }
  if (!(bio->bi_opf & REQ_PREFLUSH) || !bio->bi_iter.bi_size) {
    if (bio->bi_opf & REQ_FUA) blk_stat_count_fua();  // a sequenced write is counted when it goes on
    return false;
  }
  bio->bi_opf &= ~REQ_PREFLUSH;
  Bio* flush = bio_alloc_bioset(bio->bi_bdev, 0, REQ_OP_FLUSH | REQ_PREFLUSH, GFP_KERNEL, &q->bio_flush());
  flush->bi_end_io = flush_end_io;
  flush->bi_private = bio;
  submit_bio(flush);
  return true;
}

}  // namespace biofs
