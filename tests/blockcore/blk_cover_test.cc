// The completion cover (blockcore/blk_cover.h), against a driver that records what the core
// asks of it: one thread covers a queue at a time, only a queue with a completion descriptor,
// the driver's completion thread stands down while the queue is covered and takes over before
// the covering thread sleeps (sched_submit_work()), and the claim ends with its release.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "blockcore/blk_cover.h"
#include "blockcore/blk_mq.h"

using namespace biofs;

namespace {

class CoverDriver : public BlkMqOps {
 public:
  int fd = 7;                  // what completion_fd() answers
  std::vector<bool> covered;   // each set_covered() call, in order
  blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
    blk_mq_end_request(rq, BLK_STS_OK);
    return BLK_STS_OK;
  }
  int completion_fd(BlkMqHwCtx* hctx) override { return hctx->polled ? -1 : fd; }
  void set_covered(BlkMqHwCtx*, bool on) override { covered.push_back(on); }
};

struct Rig {
  CoverDriver drv;
  RequestQueue q;
  explicit Rig(unsigned queues = 2, unsigned poll_queues = 0) : q(QueueLimits{}, &drv, Toggles{}) {
    REQUIRE(q.init(TagSetConfig{queues, poll_queues, 8, 0}) == 0);
  }
};

}  // namespace

TEST_CASE("blk_cover: the claim covers the queue at once, its descriptor is the driver's, release hands it back") {
  Rig r;
  BlkMqHwCtx* h = r.q.hctx(0);
  CHECK(blk_cover_hctx() == nullptr);
  CHECK(blk_cover_fd() == -1);
  REQUIRE(blk_cover_claim(h));
  CHECK(blk_cover_hctx() == h);
  CHECK(blk_cover_fd() == 7);
  CHECK(r.drv.covered == std::vector<bool>{true});
  CHECK_FALSE(blk_cover_claim(r.q.hctx(1)));  // one queue per thread
  blk_cover_release();
  CHECK(r.drv.covered == std::vector<bool>{true, false});
  CHECK(blk_cover_hctx() == nullptr);
  CHECK(h->cover_owner.load() == nullptr);
  REQUIRE(blk_cover_claim(h));  // free again
  blk_cover_release();
}

TEST_CASE("blk_cover: one thread covers a queue at a time") {
  Rig r;
  BlkMqHwCtx* h = r.q.hctx(0);
  REQUIRE(blk_cover_claim(h));
  bool other = true, other_free_queue = false;
  std::thread([&] {
    other = blk_cover_claim(h);
    other_free_queue = blk_cover_claim(r.q.hctx(1));
    blk_cover_release();
  }).join();
  CHECK_FALSE(other);
  CHECK(other_free_queue);
  blk_cover_release();
}

TEST_CASE("blk_cover: a queue without a completion descriptor, or a poll queue, cannot be covered") {
  Rig r(1, 1);
  r.drv.fd = -1;
  CHECK_FALSE(blk_cover_claim(r.q.hctx(0)));
  r.drv.fd = 7;
  CHECK_FALSE(blk_cover_claim(r.q.hctx(1)));  // HCTX_TYPE_POLL: its submitters reap it
  CHECK(r.drv.covered.empty());
  CHECK(r.q.hctx(0)->cover_owner.load() == nullptr);
}

TEST_CASE("blk_cover: sched_submit_work() hands the queue to the completion thread, blk_cover_resume() takes it back, each once") {
  Rig r;
  REQUIRE(blk_cover_claim(r.q.hctx(0)));
  sched_submit_work();
  CHECK(r.drv.covered == std::vector<bool>{true, false});
  sched_submit_work();  // already handed back: nothing more to say
  CHECK(r.drv.covered.size() == 2);
  blk_cover_resume();
  CHECK(r.drv.covered == std::vector<bool>{true, false, true});
  blk_cover_resume();
  CHECK(r.drv.covered.size() == 3);
  blk_cover_release();
  CHECK(r.drv.covered == std::vector<bool>{true, false, true, false});
  // A thread that covers nothing tells the driver nothing.
  sched_submit_work();
  blk_cover_resume();
  CHECK(r.drv.covered.size() == 4);
}
