// Counterpart of block/blk-flush.c and the flush checks of submit_bio_noacct()
// (block/blk-core.c): what a REQ_PREFLUSH or REQ_FUA bio becomes on its way to a queue.
//
// Rules, as the kernel's:
//   1. A queue without a volatile write cache (QueueLimits::write_cache) drops REQ_PREFLUSH
//      and REQ_FUA; an empty flush then completes at once with success.
//   2. With a cache, a write carrying data and REQ_PREFLUSH is sequenced
//      (REQ_FSEQ_PREFLUSH, then REQ_FSEQ_DATA): a flush of its own goes first, and the write is
//      issued only once that flush has completed, so that everything completed before the
//      write is durable before the write lands. The driver never sees REQ_PREFLUSH on a write.
//   3. A failed pre-flush ends the write with the flush's status; the write is never issued.
//   4. REQ_FUA stays on the write for the driver (every driver here has FUA, so there is no
//      REQ_FSEQ_POSTFLUSH step).
#pragma once

#include "bio.h"

namespace biofs {

bool blk_insert_flush_slow(Bio* bio);

// Applies the rules to a bio bound for a blk-mq queue. True when the bio was taken (completed,
// or held until its pre-flush ends); false when it goes on to the queue as it is now. Inline:
// an ordinary read or write pays one flag test here.
inline bool blk_insert_flush(Bio* bio) {
  if (!(bio->bi_opf & (REQ_PREFLUSH | REQ_FUA)) && bio_op(bio) != REQ_OP_FLUSH) [[likely]]
    return false;
  return blk_insert_flush_slow(bio);
}

}  // namespace biofs
