// blk-flush (blockcore/blk_flush.h): what a REQ_PREFLUSH / REQ_FUA bio becomes before the driver
// sees it, on a queue with and without a volatile write cache, plugged or not, and when the
// pre-flush fails.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "blockcore/bio_set.h"
#include "blockcore/blk_flush.h"
#include "blockcore/blk_mq.h"
#include "blockcore/percpu_stat.h"

using namespace biofs;

namespace {

alignas(PAGE_SIZE) uint8_t buf[PAGE_SIZE];

// Records each request's op and flags in arrival order and completes it inline; flushes fail
// with flush_status.
class Driver : public BlkMqOps {
 public:
  struct Seen {
    req_op op;
    blk_opf_t flags;
  };
  std::vector<Seen> seen;
  blk_status_t flush_status = BLK_STS_OK;
  blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
    seen.push_back({req_op_of(rq), rq->cmd_flags});
    blk_mq_end_request(rq, req_op_of(rq) == REQ_OP_FLUSH ? flush_status : BLK_STS_OK);
    return BLK_STS_OK;
  }
};

struct Disk {
  Driver driver;
  std::unique_ptr<RequestQueue> q;
  BlockDevice bdev;
  BioSet bs{4, 0, 0};
  explicit Disk(bool write_cache) {
    REQUIRE(bs.init() == 0);
    QueueLimits lim;
    lim.write_cache = write_cache;
    q = std::make_unique<RequestQueue>(lim, &driver);
    REQUIRE(q->init(TagSetConfig{}) == 0);
    bdev.queue = q.get();
    bdev.capacity = 1 << 20;
  }
  // Submits one bio and returns its status (every completion here is inline).
  blk_status_t submit(blk_opf_t opf, bool with_data) {
    blk_status_t st = BLK_STS_IOERR;
    int ended = 0;
    struct Result {
      blk_status_t* st;
      int* ended;
    } r{&st, &ended};
    Bio* bio = bio_alloc_bioset(&bdev, with_data ? 1 : 0, opf, GFP_KERNEL, &bs);
    if (with_data) REQUIRE(bio_add_virt(bio, buf, PAGE_SIZE) == PAGE_SIZE);
    bio->bi_private = &r;
    bio->bi_end_io = [](Bio* b) {
      auto* res = static_cast<Result*>(b->bi_private);
      *res->st = b->bi_status;
      ++*res->ended;
      bio_put(b);
    };
    submit_bio(bio);
    CHECK(ended == 1);
    return st;
  }
};

}  // namespace

TEST_CASE("blk-flush: without a write cache, PREFLUSH and FUA are dropped and an empty flush ends at once") {
  Disk d(false);
  CHECK(d.submit(REQ_OP_WRITE | REQ_PREFLUSH | REQ_FUA, true) == BLK_STS_OK);
  REQUIRE(d.driver.seen.size() == 1);
  CHECK(d.driver.seen[0].op == REQ_OP_WRITE);
  CHECK((d.driver.seen[0].flags & (REQ_PREFLUSH | REQ_FUA)) == 0);
  CHECK(d.submit(REQ_OP_FLUSH | REQ_PREFLUSH, false) == BLK_STS_OK);
  CHECK(d.driver.seen.size() == 1);  // the flush never reached the driver
}

TEST_CASE("blk-flush: with a write cache, a PREFLUSH write is a flush, completed, then the write with FUA kept") {
  Disk d(true);
  for (bool plugged : {false, true}) {
    CAPTURE(plugged);
    d.driver.seen.clear();
    d.submit(REQ_OP_WRITE, true);  // an ordinary write first: it is not held back
    BlkPlug plug;
    if (plugged) blk_start_plug(&plug);
    blk_status_t st = BLK_STS_IOERR;
    {
      // The sequenced write may complete only at blk_finish_plug: collect its status after.
      Bio* bio = bio_alloc_bioset(&d.bdev, 1, REQ_OP_WRITE | REQ_PREFLUSH | REQ_FUA, GFP_KERNEL, &d.bs);
      REQUIRE(bio_add_virt(bio, buf, PAGE_SIZE) == PAGE_SIZE);
      bio->bi_private = &st;
      bio->bi_end_io = [](Bio* b) {
        *static_cast<blk_status_t*>(b->bi_private) = b->bi_status;
        bio_put(b);
      };
      submit_bio(bio);
    }
    if (plugged) blk_finish_plug(&plug);
    CHECK(st == BLK_STS_OK);
    REQUIRE(d.driver.seen.size() == 3);
    CHECK(d.driver.seen[0].op == REQ_OP_WRITE);
    CHECK(d.driver.seen[1].op == REQ_OP_FLUSH);
    CHECK(d.driver.seen[2].op == REQ_OP_WRITE);
    CHECK((d.driver.seen[2].flags & REQ_PREFLUSH) == 0);  // the driver never sees PREFLUSH on a write
    CHECK((d.driver.seen[2].flags & REQ_FUA) != 0);
  }
  d.driver.seen.clear();
  CHECK(d.submit(REQ_OP_FLUSH | REQ_PREFLUSH, false) == BLK_STS_OK);  // an empty flush goes as it is
  REQUIRE(d.driver.seen.size() == 1);
  CHECK(d.driver.seen[0].op == REQ_OP_FLUSH);
}

TEST_CASE("blk-flush: a failed pre-flush ends the write with its status, and the write is never issued") {
  Disk d(true);
  d.driver.flush_status = BLK_STS_IOERR;
  CHECK(d.submit(REQ_OP_WRITE | REQ_PREFLUSH, true) == BLK_STS_IOERR);
  REQUIRE(d.driver.seen.size() == 1);
  CHECK(d.driver.seen[0].op == REQ_OP_FLUSH);
}

// The counters the stats export as io.flushes and io.fua_writes: what reaches a device with a
// write cache, counted on blk-flush's slow path, so ordinary I/O never touches them.
TEST_CASE("blk-flush: flushes and FUA writes sent to a cached device are counted, ordinary I/O and an uncached device are not") {
  const BlkStatSnapshot a = blk_stat_snapshot();
  {
    Disk cached(true);
    cached.submit(REQ_OP_WRITE, true);
    cached.submit(REQ_OP_READ, true);
    cached.submit(REQ_OP_WRITE | REQ_FUA, true);                 // 1 FUA
    cached.submit(REQ_OP_WRITE | REQ_PREFLUSH | REQ_FUA, true);  // 1 flush + 1 FUA
    cached.submit(REQ_OP_FLUSH | REQ_PREFLUSH, false);           // 1 flush
    Disk uncached(false);
    uncached.submit(REQ_OP_WRITE | REQ_PREFLUSH | REQ_FUA, true);
    uncached.submit(REQ_OP_FLUSH | REQ_PREFLUSH, false);
  }
  const BlkStatSnapshot b = blk_stat_snapshot();
  CHECK(b.flushes - a.flushes == 2);
  CHECK(b.fua_writes - a.fua_writes == 2);
}
