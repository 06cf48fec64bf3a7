// The completion cover (blk_cover.h).
#include "blk_cover.h"

#include "blk_poll.h"

namespace biofs {

namespace {
thread_local BlkMqHwCtx* tls_cover = nullptr;  // the claimed queue
thread_local bool tls_covering = false;        // covering it right now
}  // namespace

bool blk_cover_claim(BlkMqHwCtx* hctx) {
  if (tls_cover || !hctx || hctx->polled) return false;
  if (hctx->queue->ops()->completion_fd(hctx) < 0) return false;
  const void* none = nullptr;
  if (!hctx->cover_owner.compare_exchange_strong(none, &tls_cover, std::memory_order_acq_rel)) return false;
  tls_cover = hctx;
  blk_cover_resume();
  return true;
}

void blk_cover_release() {
  if (!tls_cover) return;
  blk_cover_pause();
  tls_cover->cover_owner.store(nullptr, std::memory_order_release);
  tls_cover = nullptr;
}

BlkMqHwCtx* blk_cover_hctx() { return tls_cover; }

int blk_cover_fd() { return tls_cover ? tls_cover->queue->ops()->completion_fd(tls_cover) : -1; }

void blk_cover_resume() {
  if (!tls_cover || tls_covering) return;
  tls_covering = true;
  tls_cover->queue->ops()->set_covered(tls_cover, true);
}

void blk_cover_pause() {
  if (!tls_covering) [[likely]]
    return;
  tls_covering = false;
  tls_cover->queue->ops()->set_covered(tls_cover, false);
}

int blk_cover_reap() { return tls_cover ? blk_mq_poll(tls_cover, false) : 0; }

}  // namespace biofs
