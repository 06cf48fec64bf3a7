// blk-mq: tag_batch modes, plugging, batched completion, tag exhaustion, splits through a
// queue, the null device and the striped target.
#include <doctest/doctest.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "blockcore/blk_mq.h"
#include "blockcore/null_blk.h"
#include "blockcore/sbitmap.h"
#include "blockcore/stripe.h"

using namespace biofs;

namespace {

alignas(PAGE_SIZE) uint8_t buf[64 * PAGE_SIZE];

// A driver that records what it is given and completes inline.
class RecordingDriver : public BlkMqOps {
 public:
  struct Seen {
    sector_t sector;
    uint32_t bytes;
    int tag;
    bool polled;    // on a poll queue (HCTX_TYPE_POLL)
    uint16_t segs;  // nr_phys_segments
  };
  blk_status_t fail_with = BLK_STS_OK;
  std::mutex lock;
  std::vector<Seen> seen;
  int queue_rqs_calls = 0;

  blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
    record(rq);
    blk_mq_end_request(rq, fail_with);
    return BLK_STS_OK;
  }
  void queue_rqs(RqList* rqs) override {
    queue_rqs_calls++;
    IoCompBatch iob;
    while (Request* rq = rqs->pop()) {
      record(rq);
      if (!blk_mq_add_to_batch(rq, &iob, fail_with)) blk_mq_end_request(rq, fail_with);
    }
    blk_mq_end_request_batch(&iob);
  }

 private:
  void record(Request* rq) {
    std::lock_guard g(lock);
    seen.push_back({blk_rq_pos(rq), blk_rq_bytes(rq), rq->tag, rq->mq_hctx->polled, rq->nr_phys_segments});
  }
};

struct Done {
  std::atomic<int> count{0};
  std::atomic<int> errors{0};
};
void on_done(Bio* bio) {
  auto* d = static_cast<Done*>(bio->bi_private);
  if (bio->bi_status != BLK_STS_OK) d->errors++;
  bio_put(bio);  // before counting: once the count is seen, the bio set may go away
  d->count++;
}

Bio* make_read(BlockDevice* bdev, BioSet& bs, sector_t sector, uint32_t bytes, Done* done,
               blk_opf_t extra = 0) {
  Bio* bio = bio_alloc_bioset(bdev, uint16_t((bytes + PAGE_SIZE - 1) / PAGE_SIZE), REQ_OP_READ | extra, GFP_KERNEL, &bs);
  REQUIRE(bio_add_virt(bio, buf, bytes) == bytes);
  bio->bi_iter.bi_sector = sector;
  bio->bi_end_io = on_done;
  bio->bi_private = done;
  return bio;
}

SbitmapQueue* tags_of(RequestQueue* q) { return q->hctx(0)->tags->bitmap_tags.get(); }

struct Queue {
  RecordingDriver driver;
  std::unique_ptr<RequestQueue> q;
  BlockDevice bdev;
  BioSet bs{16, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE};
  explicit Queue(Toggles toggles = {}, unsigned depth = 64, QueueLimits lim = {}) {
    REQUIRE(bs.init() == 0);
    TagSetConfig set;
    set.queue_depth = depth;
    q = std::make_unique<RequestQueue>(lim, &driver, toggles);
    REQUIRE(q->init(set) == 0);
    bdev.queue = q.get();
    bdev.capacity = 1 << 30;
  }
};

// Runs 8 plugged reads with tags 2 and 5 of word 0 already taken, so the first batch of 8
// comes back with two holes. Returns the tag calls made after the first bio and in all.
std::pair<uint64_t, uint64_t> partial_batch_run(TagBatch mode) {
  Toggles t;
  t.tag_batch = mode;
  Queue qu(t);
  SbitmapQueue* sbq = tags_of(qu.q.get());
  sbq->sb.cpu[sbitmap_current_cpu()].alloc_hint.store(0);  // start the search at word 0
  sbitmap_set_bit(&sbq->sb, 2);
  sbitmap_set_bit(&sbq->sb, 5);
  Done done;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 8);
  submit_bio(make_read(&qu.bdev, qu.bs, 0, 4096, &done));
  const uint64_t after_first = qu.q->counters().tag_calls;
  for (int i = 1; i < 8; i++) submit_bio(make_read(&qu.bdev, qu.bs, sector_t(i) * 16, 4096, &done));
  blk_finish_plug(&plug);
  const QueueCounters c = qu.q->counters();
  CHECK(done.count == 8);
  CHECK(c.tags == 8);
  sbitmap_clear_bit(&sbq->sb, 2);
  sbitmap_clear_bit(&sbq->sb, 5);
  CHECK(sbitmap_weight(&sbq->sb) == 0);  // every tag came back
  return {after_first, c.tag_calls};
}

}  // namespace

TEST_CASE("tag_batch=off takes one tag per call") {
  auto [first, total] = partial_batch_run(TagBatch::off);
  CHECK(first == 1);
  CHECK(total == 8);
}

TEST_CASE("tag_batch=plain: after a partial first batch the rest go one tag at a time") {
  auto [first, total] = partial_batch_run(TagBatch::plain);
  CHECK(first == 1);  // got 6 of 8
  CHECK(total == 3);  // then two single gets
}

TEST_CASE("tag_batch=retain: the plug keeps the missing count and batches again later") {
  auto [first, total] = partial_batch_run(TagBatch::retain);
  CHECK(first == 1);  // 6 of 8 now; nr_ios = 2
  CHECK(total == 2);  // the 7th bio asks for 2 in one batch
}

TEST_CASE("tag_batch=loop: the first allocation keeps batching until it has them all") {
  auto [first, total] = partial_batch_run(TagBatch::loop);
  CHECK(first == 2);  // 6, then 2, both for the first bio
  CHECK(total == 2);
}

namespace {
// 32 plugged reads on a queue of depth 64, whose tag map has 16-bit words. Returns the counters.
QueueCounters plug_of_32_on_depth_64(TagBatch mode) {
  Toggles t;
  t.tag_batch = mode;
  Queue qu(t, 64);
  SbitmapQueue* sbq = tags_of(qu.q.get());
  REQUIRE(sbq->sb.shift == 4);
  sbq->sb.cpu[sbitmap_current_cpu()].alloc_hint.store(0);
  Done done;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 32);
  for (int i = 0; i < 32; i++) submit_bio(make_read(&qu.bdev, qu.bs, sector_t(i) * 16, 4096, &done));
  blk_finish_plug(&plug);
  CHECK(done.count == 32);
  CHECK(sbitmap_weight(&sbq->sb) == 0);
  return qu.q->counters();
}
}  // namespace

TEST_CASE("v6.18 blk_mq_get_tags: a plug of 32 on 16-bit sbitmap words gets no batch and takes single tags, tag_batch=clamp batches a word at a time") {
  const QueueCounters loop = plug_of_32_on_depth_64(TagBatch::loop);  // the default
  CHECK(loop.tags == 32);
  CHECK(loop.tag_batch_calls == 1);  // the plug's one batch attempt, which got nothing
  CHECK(loop.tag_calls == 1 + 32);   // then a single tag per bio
  const QueueCounters clamp = plug_of_32_on_depth_64(TagBatch::clamp);
  CHECK(clamp.tags == 32);
  CHECK(clamp.tag_batch_calls == 2);  // 16 + 16, both for the first bio
  CHECK(clamp.tag_calls == 2);
}

TEST_CASE("a plug dispatches in submission order, in one driver call per flush, and flushes at 32") {
  Queue qu;
  Done done;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 32);
  for (int i = 0; i < 40; i++) submit_bio(make_read(&qu.bdev, qu.bs, sector_t(39 - i) * 16, 4096, &done));
  CHECK(done.count == 32);  // the 33rd request flushed the first 32
  blk_finish_plug(&plug);
  CHECK(done.count == 40);
  CHECK(qu.driver.queue_rqs_calls == 2);
  REQUIRE(qu.driver.seen.size() == 40);
  for (int i = 0; i < 40; i++) CHECK(qu.driver.seen[i].sector == sector_t(39 - i) * 16);
  const QueueCounters c = qu.q->counters();
  CHECK(c.plug_flushes == 2);
  CHECK(c.requests == 40);
  CHECK(sbitmap_weight(&tags_of(qu.q.get())->sb) == 0);
}

TEST_CASE("a thread about to sleep dispatches its plug (sched_submit_work), which stays its plug") {
  Queue qu;
  Done done;
  sched_submit_work();  // no plug: nothing to do
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 8);
  for (int i = 0; i < 3; i++) submit_bio(make_read(&qu.bdev, qu.bs, sector_t(i) * 16, 4096, &done));
  CHECK(done.count == 0);
  sched_submit_work();
  CHECK(done.count == 3);
  CHECK(current_plug() == &plug);
  submit_bio(make_read(&qu.bdev, qu.bs, 64, 4096, &done));
  CHECK(done.count == 3);
  blk_finish_plug(&plug);
  CHECK(done.count == 4);
  CHECK(current_plug() == nullptr);
  CHECK(qu.q->counters().plug_flushes == 2);
}

TEST_CASE("v6.18 __blk_flush_plug: a submitter about to sleep for a tag of one queue first frees the requests its plug cached on another") {
  // A plug batch-allocates 8 requests on qa and uses one (7 cached); its next bio is for qb,
  // whose only tag is taken, so the thread sleeps in the tag wait. The flush before that sleep
  // frees qa's cached tags: a waiter must not hold tags it is not using.
  Queue qa, qb({}, 1);
  SbitmapQueue* qb_tags = tags_of(qb.q.get());
  unsigned qb_cpu = 0;
  REQUIRE(sbitmap_queue_get(qb_tags, &qb_cpu) == 0);  // qb's one tag, held here
  Done done;
  std::atomic<int> stage{0};
  std::thread submitter([&] {
    BlkPlug plug;
    blk_start_plug_nr_ios(&plug, 8);
    submit_bio(make_read(&qa.bdev, qa.bs, 0, 4096, &done));
    int cached = 0;
    for (Request* rq = plug.cached_rqs.head; rq; rq = rq->rq_next) cached++;
    stage = cached;
    submit_bio(make_read(&qb.bdev, qb.bs, 0, 4096, &done));  // sleeps until qb's tag is freed
    blk_finish_plug(&plug);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (stage.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  CHECK(stage.load() == 7);  // qa's batch: 7 cached after the first bio
  // The submitter is now asleep for qb's tag; qa's tags must all have come back (the one used
  // was dispatched by the same flush and completed inline).
  while (sbitmap_weight(&tags_of(qa.q.get())->sb) != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(sbitmap_weight(&tags_of(qa.q.get())->sb) == 0);
  CHECK(done.count.load() == 1);
  sbitmap_queue_clear(qb_tags, 0, qb_cpu);  // wakes the submitter
  submitter.join();
  CHECK(done.count.load() == 2);
  CHECK(done.errors.load() == 0);
  CHECK(sbitmap_weight(&qb_tags->sb) == 0);
}

TEST_CASE("without a plug each bio is dispatched at once") {
  Queue qu;
  Done done;
  submit_bio(make_read(&qu.bdev, qu.bs, 0, 4096, &done));
  CHECK(done.count == 1);
  CHECK(qu.q->counters().requests == 1);
}

TEST_CASE("a bio larger than max_sectors becomes several requests and ends once") {
  QueueLimits lim;
  lim.max_sectors = lim.max_hw_sectors = 16;  // 8 KiB
  Queue qu({}, 64, lim);
  Done done;
  BlkPlug plug;
  blk_start_plug(&plug);
  submit_bio(make_read(&qu.bdev, qu.bs, 100, 32 * 1024, &done));
  blk_finish_plug(&plug);
  CHECK(done.count == 1);
  REQUIRE(qu.driver.seen.size() == 4);
  for (int i = 0; i < 4; i++) {
    CHECK(qu.driver.seen[i].sector == 100 + sector_t(i) * 16);
    CHECK(qu.driver.seen[i].bytes == 8192);
  }
  CHECK(qu.q->counters().splits == 3);
}

TEST_CASE("a driver error reaches the bio") {
  Queue qu;
  qu.driver.fail_with = BLK_STS_MEDIUM;
  Done done;
  BlkPlug plug;
  blk_start_plug(&plug);
  submit_bio(make_read(&qu.bdev, qu.bs, 0, 4096, &done));
  blk_finish_plug(&plug);
  CHECK(done.errors == 1);
}

TEST_CASE("v6.18 blk_update_request: a request that succeeds leaves its bio's status alone, so a chained child's error survives") {
  Queue qu;
  Done done;
  Bio* parent = make_read(&qu.bdev, qu.bs, 0, 4096, &done);
  Bio* child = make_read(&qu.bdev, qu.bs, 8, 4096, nullptr);
  child->bi_end_io = nullptr;
  child->bi_private = nullptr;
  bio_chain(child, parent);
  qu.driver.fail_with = BLK_STS_MEDIUM;
  submit_bio(child);  // unplugged: dispatched and failed at once
  CHECK(done.count == 0);
  qu.driver.fail_with = BLK_STS_OK;
  submit_bio(parent);
  CHECK(done.count == 1);
  CHECK(done.errors == 1);
}

TEST_CASE("REQ_NOWAIT with every tag taken ends with BLK_STS_AGAIN instead of waiting") {
  Queue qu({}, 4);
  SbitmapQueue* sbq = tags_of(qu.q.get());
  for (unsigned i = 0; i < 4; i++) sbitmap_set_bit(&sbq->sb, i);
  Done done;
  Bio* bio = make_read(&qu.bdev, qu.bs, 0, 4096, &done, REQ_NOWAIT);
  bio_get(bio);
  submit_bio(bio);
  CHECK(done.count == 1);
  CHECK(bio->bi_status == BLK_STS_AGAIN);
  bio_put(bio);
  for (unsigned i = 0; i < 4; i++) sbitmap_clear_bit(&sbq->sb, i);
}

TEST_CASE("null device in timer mode: submitters wait for tags and are woken by completions") {
  NullBlkConfig cfg;
  cfg.queue_depth = 4;
  cfg.irqmode = NullBlkConfig::IrqMode::timer;
  cfg.completion_nsec = 2'000'000;  // 2 ms
  std::unique_ptr<NullBlk> dev_owner;
  REQUIRE(NullBlk::create(cfg, &dev_owner).ok());
  NullBlk& dev = *dev_owner;
  BioSet bs(16, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  Done done;
  auto run = std::async(std::launch::async, [&] {
    for (int i = 0; i < 40; i++) submit_bio(make_read(dev.bdev(), bs, sector_t(i) * 16, 4096, &done));
  });
  REQUIRE(run.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  while (done.count < 40) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(dev.completed() == 40);
  CHECK(dev.queue()->counters().tag_waits > 0);
  CHECK(sbitmap_weight(&dev.queue()->hctx(0)->tags->bitmap_tags->sb) == 0);
}

TEST_CASE("null device in timer mode: destroying it with requests pending ends every one first") {
  NullBlkConfig cfg;
  cfg.queue_depth = 64;
  cfg.irqmode = NullBlkConfig::IrqMode::timer;
  cfg.completion_nsec = 50'000'000;  // 50 ms: all 32 are still pending when the device goes
  BioSet bs(64, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  Done done;
  {
    std::unique_ptr<NullBlk> dev_owner;
    REQUIRE(NullBlk::create(cfg, &dev_owner).ok());
    NullBlk& dev = *dev_owner;
    for (int i = 0; i < 32; i++) submit_bio(make_read(dev.bdev(), bs, sector_t(i) * 16, 4096, &done));
    CHECK(done.count < 32);
  }  // the completion thread is asked to stop here; it ends what it holds before it goes
  CHECK(done.count == 32);
}

TEST_CASE("many threads on one small tag space: no tag is in flight twice, all come back") {
  // A driver that checks tag ownership, completing from a second thread in batches.
  class CheckingDriver : public BlkMqOps {
   public:
    std::atomic<int> owner[16] = {};
    std::atomic<int> double_use{0};
    std::mutex lock;
    RqList pending;
    std::atomic<bool> stop{false};
    std::thread completer{[this] {
      while (!stop) {
        RqList mine;
        {
          std::lock_guard g(lock);
          mine = pending;
          pending = RqList{};
        }
        IoCompBatch iob;
        while (Request* rq = mine.pop()) {
          owner[rq->tag].store(0);
          blk_mq_add_to_batch(rq, &iob, BLK_STS_OK);
        }
        blk_mq_end_request_batch(&iob);
        std::this_thread::yield();
      }
    }};
    void shutdown() {  // before the queue goes: the completer still frees tags after the last bio
      stop = true;
      if (completer.joinable()) completer.join();
    }
    ~CheckingDriver() override { shutdown(); }
    blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
      if (owner[rq->tag].exchange(1) != 0) double_use++;
      std::lock_guard g(lock);
      pending.add_tail(rq);
      return BLK_STS_OK;
    }
  };
  CheckingDriver driver;
  TagSetConfig set;
  set.queue_depth = 16;
  RequestQueue q(QueueLimits{}, &driver);
  REQUIRE(q.init(set) == 0);
  BlockDevice bdev;
  bdev.queue = &q;
  bdev.capacity = 1 << 20;
  BioSet bs(16, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  Done done;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; t++)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; round++) {
        BlkPlug plug;
        blk_start_plug_nr_ios(&plug, 8);
        for (int i = 0; i < 8; i++) submit_bio(make_read(&bdev, bs, sector_t(t * 8 + i) * 16, 4096, &done));
        blk_finish_plug(&plug);
      }
    });
  for (auto& t : threads) t.join();
  while (done.count < 6 * 200 * 8) std::this_thread::yield();
  driver.shutdown();
  CHECK(driver.double_use == 0);
  CHECK(sbitmap_weight(&q.hctx(0)->tags->bitmap_tags->sb) == 0);
  CHECK(q.counters().requests == 6 * 200 * 8);
}

TEST_CASE("the striped target clones per chunk, maps sectors, and ends the bio once") {
  RecordingDriver d0, d1;
  TagSetConfig set;
  // nomerges=2: each clone its own request, to see the mapping (a child's clones for adjacent
  // stripes would merge in the plug: blk_rq_merge_test).
  Toggles nomerge;
  nomerge.nomerges = NoMerges::none;
  RequestQueue q0(QueueLimits{}, &d0, nomerge), q1(QueueLimits{}, &d1, nomerge);
  REQUIRE(q0.init(set) == 0);
  REQUIRE(q1.init(set) == 0);
  BlockDevice c0, c1;
  c0.queue = &q0;
  c1.queue = &q1;
  c0.capacity = c1.capacity = 1 << 20;
  std::unique_ptr<StripeTarget> stripe_owner;
  REQUIRE(StripeTarget::create({&c0, &c1}, 8, BioCache::on, &stripe_owner).ok());  // 4 KiB chunks
  StripeTarget& stripe = *stripe_owner;
  CHECK(stripe.bdev()->capacity == 2 << 20);
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  Done done;
  // 20 KiB starting half way into chunk 1: pieces 2K (chunk 1), 4K (2), 4K (3), 4K (4), 4K (5), 2K (6).
  Bio* bio = make_read(stripe.bdev(), bs, 12, 20 * 1024, &done);
  BlkPlug plug;
  blk_start_plug(&plug);
  submit_bio(bio);
  blk_finish_plug(&plug);
  CHECK(done.count == 1);
  CHECK(stripe.clones() == 6);
  REQUIRE(d1.seen.size() == 3);  // odd chunks 1, 3, 5
  REQUIRE(d0.seen.size() == 3);  // even chunks 2, 4, 6
  CHECK(d1.seen[0].sector == 4);   // chunk 1 -> child 1 stripe 0, offset 4
  CHECK(d1.seen[0].bytes == 2048);
  CHECK(d0.seen[0].sector == 8);   // chunk 2 -> child 0 stripe 1
  CHECK(d0.seen[2].sector == 24);  // chunk 6 -> child 0 stripe 3
  CHECK(d0.seen[2].bytes == 2048);
  // An error on one child reaches the parent, once.
  d0.fail_with = BLK_STS_IOERR;
  Done failed;
  blk_start_plug(&plug);
  submit_bio(make_read(stripe.bdev(), bs, 0, 16 * 1024, &failed));
  blk_finish_plug(&plug);
  CHECK(failed.count == 1);
  CHECK(failed.errors == 1);
}

// ---- kernel rules (v6.18), blockcore/README.md "Kernel rules followed" ----

TEST_CASE("v6.18 bio_split_rw_at dma_alignment: a bio of 1026 + 3070 bytes on NVMe-like limits fails whole with BLK_STS_INVAL, nothing reaches the driver") {
  QueueLimits lim;
  lim.max_hw_sectors = 1024;
  lim.virt_boundary_mask = PAGE_SIZE - 1;  // PRP
  lim.max_segment_size = UINT32_MAX;
  lim.dma_alignment = 3;                   // nvme_set_ctrl_limits(): dword alignment
  Queue qu({}, 64, lim);
  Done done;
  Bio* bio = bio_alloc_bioset(&qu.bdev, 2, REQ_OP_READ, GFP_KERNEL, &qu.bs);
  REQUIRE(bio_add_page(bio, buf, 1026, 0) == 1026);
  REQUIRE(bio_add_page(bio, buf + 2 * PAGE_SIZE, 3070, 0) == 3070);
  bio->bi_end_io = on_done;
  bio->bi_private = &done;
  bio_get(bio);
  BlkPlug plug;
  blk_start_plug(&plug);
  submit_bio(bio);
  blk_finish_plug(&plug);
  CHECK(done.count.load() == 1);
  CHECK(bio->bi_status == BLK_STS_INVAL);
  CHECK(blk_status_to_errno(bio->bi_status) == -EINVAL);
  CHECK(qu.driver.seen.empty());  // not even the first 1024 bytes
  CHECK(qu.q->counters().requests == 0);
  bio_put(bio);
  // The same layout with aligned lengths is legal: split at the PRP gap, both halves issued.
  Done ok;
  Bio* good = bio_alloc_bioset(&qu.bdev, 2, REQ_OP_READ, GFP_KERNEL, &qu.bs);
  REQUIRE(bio_add_page(good, buf, 1024, 0) == 1024);
  REQUIRE(bio_add_page(good, buf + 2 * PAGE_SIZE, 3072, 0) == 3072);
  good->bi_end_io = on_done;
  good->bi_private = &ok;
  submit_bio(good);
  CHECK(ok.count.load() == 1);
  CHECK(ok.errors.load() == 0);
  CHECK(qu.driver.seen.size() == 2);
}

TEST_CASE("v6.18 __blk_start_plug: multiple_queues is reset only when the plug starts, not at a flush") {
  Queue qa, qb;
  Done done;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 32);
  submit_bio(make_read(&qa.bdev, qa.bs, 0, 4096, &done));
  submit_bio(make_read(&qb.bdev, qb.bs, 0, 4096, &done));
  CHECK(plug.multiple_queues);
  blk_flush_plug(&plug);
  CHECK(done.count.load() == 2);
  CHECK(plug.multiple_queues);  // kept across the flush
  // So the plug still holds up to 2 * BLK_MAX_REQUEST_COUNT: 40 requests to one queue stay.
  for (int i = 0; i < 40; i++) submit_bio(make_read(&qa.bdev, qa.bs, sector_t(i) * 16, 4096, &done));
  CHECK(done.count.load() == 2);
  CHECK(plug.rq_count == 40);
  blk_finish_plug(&plug);
  CHECK(done.count.load() == 42);
  blk_start_plug(&plug);
  CHECK_FALSE(plug.multiple_queues);  // __blk_start_plug
  blk_finish_plug(&plug);
}

TEST_CASE("v6.18 blk_add_rq_to_plug: with several queues the plug holds 64 requests (2 * BLK_MAX_REQUEST_COUNT) and the 65th flushes") {
  Queue qa, qb;
  Done done;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 32);
  for (int i = 0; i < 64; i++) {
    Queue& qu = i % 2 ? qb : qa;
    submit_bio(make_read(&qu.bdev, qu.bs, sector_t(i) * 16, 4096, &done));
  }
  CHECK(plug.multiple_queues);
  CHECK(plug.rq_count == 64);
  CHECK(done.count.load() == 0);  // 64 held: blk_plug_max_rq_count() is 64, not 32
  submit_bio(make_read(&qa.bdev, qa.bs, 64 * 16, 4096, &done));
  CHECK(done.count.load() == 64);  // the 65th flushed the 64, then joined the plug
  CHECK(plug.rq_count == 1);
  blk_finish_plug(&plug);
  CHECK(done.count.load() == 65);
  // One queue: 32 are held and the 33rd flushes them.
  Done one;
  blk_start_plug_nr_ios(&plug, 32);
  for (int i = 0; i < 32; i++) submit_bio(make_read(&qa.bdev, qa.bs, sector_t(i) * 16, 4096, &one));
  CHECK(one.count.load() == 0);
  submit_bio(make_read(&qa.bdev, qa.bs, 32 * 16, 4096, &one));
  CHECK(one.count.load() == 32);
  blk_finish_plug(&plug);
}

TEST_CASE("v6.18 blk_add_rq_to_plug: the plug's oldest request (rq_list_peek) of >= BLK_PLUG_FLUSH_SIZE flushes it when the next request joins") {
  QueueLimits lim;
  lim.max_sectors = lim.max_hw_sectors = 512;  // 256 KiB: a 128 KiB bio stays one request
  Queue qu({}, 64, lim);
  static_assert(BLK_PLUG_FLUSH_SIZE == 128 * 1024);
  constexpr uint32_t big = 128 * 1024, small = 4096;
  BlkPlug plug;
  {  // 128 KiB first: the next request flushes it.
    Done done;
    blk_start_plug(&plug);
    submit_bio(make_read(&qu.bdev, qu.bs, 0, big, &done));
    CHECK(done.count.load() == 0);
    submit_bio(make_read(&qu.bdev, qu.bs, 1024, small, &done));
    CHECK(done.count.load() == 1);  // the 128 KiB request went to the driver
    CHECK(plug.rq_count == 1);
    blk_finish_plug(&plug);
    CHECK(done.count.load() == 2);
  }
  {  // 128 KiB - 512 first: below the limit, nothing is flushed.
    Done done;
    blk_start_plug(&plug);
    submit_bio(make_read(&qu.bdev, qu.bs, 0, big - 512, &done));
    submit_bio(make_read(&qu.bdev, qu.bs, 1024, small, &done));
    CHECK(done.count.load() == 0);
    blk_finish_plug(&plug);
    CHECK(done.count.load() == 2);
  }
  {  // 4 KiB first, then 128 KiB: the oldest request is what is looked at, so the 128 KiB one
     // added after it does not flush the plug when a third request joins.
    Done done;
    blk_start_plug(&plug);
    submit_bio(make_read(&qu.bdev, qu.bs, 0, small, &done));
    submit_bio(make_read(&qu.bdev, qu.bs, 16, big, &done));  // not adjacent: no merge
    submit_bio(make_read(&qu.bdev, qu.bs, 1024, small, &done));
    CHECK(done.count.load() == 0);
    CHECK(plug.rq_count == 3);
    blk_finish_plug(&plug);
    CHECK(done.count.load() == 3);
  }
}

namespace {
unsigned list_length(const RqList& l) {
  unsigned n = 0;
  for (Request* rq = l.head; rq; rq = rq->rq_next) n++;
  return n;
}
void start_tags_at_0(Queue& qu) { tags_of(qu.q.get())->sb.cpu[sbitmap_current_cpu()].alloc_hint.store(0); }
}  // namespace

TEST_CASE("v6.18 blk_start_plug_nr_ios: a nested blk_start_plug is a no-op, the outer plug holds and flushes everything") {
  Queue qu;
  Done done;
  BlkPlug outer, inner;
  blk_start_plug_nr_ios(&outer, 4);
  for (int i = 0; i < 2; i++) submit_bio(make_read(&qu.bdev, qu.bs, sector_t(i) * 16, 4096, &done));
  blk_start_plug(&inner);  // current->plug is set: returns at once
  CHECK(current_plug() == &outer);
  for (int i = 2; i < 4; i++) submit_bio(make_read(&qu.bdev, qu.bs, sector_t(i) * 16, 4096, &done));
  CHECK(outer.rq_count == 4);
  CHECK(inner.rq_count == 0);
  blk_finish_plug(&inner);  // not current->plug: nothing happens
  CHECK(done.count.load() == 0);
  CHECK(current_plug() == &outer);
  blk_finish_plug(&outer);
  CHECK(done.count.load() == 4);
  CHECK(current_plug() == nullptr);
}

TEST_CASE("v6.18 __blk_mq_alloc_requests_batch: the plug's cached requests are a LIFO list (rq_list_add_head), the batch's last tag is used first") {
  Queue qu;
  start_tags_at_0(qu);
  Done done;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 8);
  for (int i = 0; i < 8; i++) submit_bio(make_read(&qu.bdev, qu.bs, sector_t(i) * 16, 4096, &done));
  blk_finish_plug(&plug);
  REQUIRE(qu.driver.seen.size() == 8);
  for (int i = 0; i < 8; i++) CHECK(qu.driver.seen[i].tag == 7 - i);  // tags 0..7, used 7 first
  CHECK(qu.q->counters().tag_calls == 1);
}

TEST_CASE("v6.18 blk_mq_peek_cached_request: a cached request serves only a bio of its own queue, hctx type and op_is_flush()") {
  Done done;
  BlkPlug plug;
  SUBCASE("another queue allocates its own") {
    Queue qa, qb;
    start_tags_at_0(qa);
    blk_start_plug_nr_ios(&plug, 8);
    submit_bio(make_read(&qa.bdev, qa.bs, 0, 4096, &done));  // a batch of 8 in qa: 7 cached
    CHECK(list_length(plug.cached_rqs) == 7);
    submit_bio(make_read(&qb.bdev, qb.bs, 0, 4096, &done));
    CHECK(list_length(plug.cached_rqs) == 7);  // qa's are left alone
    submit_bio(make_read(&qa.bdev, qa.bs, 16, 4096, &done));  // not adjacent: no merge
    CHECK(list_length(plug.cached_rqs) == 6);
    blk_finish_plug(&plug);
    REQUIRE(qa.driver.seen.size() == 2);
    CHECK(qa.driver.seen[0].tag == 7);
    CHECK(qa.driver.seen[1].tag == 6);
    CHECK(qb.driver.seen.size() == 1);
    CHECK(sbitmap_weight(&tags_of(qa.q.get())->sb) == 0);  // the unused cached ones were freed
  }
  SUBCASE("a polled bio does not take a default queue's request") {
    RecordingDriver d;
    TagSetConfig set;
    set.queue_depth = 64;
    set.nr_poll_queues = 1;
    RequestQueue q(QueueLimits{}, &d);
    REQUIRE(q.init(set) == 0);
    BlockDevice bdev;
    bdev.queue = &q;
    bdev.capacity = 1 << 20;
    BioSet bs(16, 0, BIOSET_NEED_BVECS);
    REQUIRE(bs.init() == 0);
    blk_start_plug_nr_ios(&plug, 8);
    submit_bio(make_read(&bdev, bs, 0, 4096, &done));  // the batch comes from the default hctx
    CHECK(list_length(plug.cached_rqs) == 7);
    submit_bio(make_read(&bdev, bs, 16, 4096, &done, REQ_POLLED));
    CHECK(list_length(plug.cached_rqs) == 7);
    blk_finish_plug(&plug);
    REQUIRE(d.seen.size() == 2);
    CHECK_FALSE(d.seen[0].polled);
    CHECK(d.seen[1].polled);
  }
  SUBCASE("a FUA write does not take a request allocated for a plain write") {
    QueueLimits lim;
    lim.write_cache = true;  // so REQ_FUA reaches the queue
    Queue qu({}, 64, lim);
    start_tags_at_0(qu);
    blk_start_plug_nr_ios(&plug, 8);
    submit_bio(make_read(&qu.bdev, qu.bs, 0, 4096, &done, REQ_OP_WRITE));  // tags 0..7, 7 used
    submit_bio(make_read(&qu.bdev, qu.bs, 8, 4096, &done, REQ_OP_WRITE | REQ_FUA));
    CHECK(list_length(plug.cached_rqs) == 7);  // op_is_flush() differs: a new tag instead
    submit_bio(make_read(&qu.bdev, qu.bs, 16, 4096, &done, REQ_OP_WRITE));
    CHECK(list_length(plug.cached_rqs) == 6);
    blk_finish_plug(&plug);
    REQUIRE(qu.driver.seen.size() == 3);
    CHECK(qu.driver.seen[0].tag == 7);
    CHECK(qu.driver.seen[1].tag == 8);  // a single tag, the first free one
    CHECK(qu.driver.seen[2].tag == 6);
  }
}

TEST_CASE("v6.18 bio_may_need_split through blk-mq: a bio starting inside a bvec never reaches the driver as a request over max_segments or max_sectors") {
  Done done;
  {  // max_segments 1: the rest of one page and the start of another are two requests.
    QueueLimits lim;
    lim.max_segments = 1;
    Queue qu({}, 64, lim);
    Bio* bio = bio_alloc_bioset(&qu.bdev, 2, REQ_OP_READ, GFP_KERNEL, &qu.bs);
    REQUIRE(bio_add_page(bio, buf, PAGE_SIZE, 0) == PAGE_SIZE);
    REQUIRE(bio_add_page(bio, buf + 2 * PAGE_SIZE, PAGE_SIZE, 0) == PAGE_SIZE);
    bio_advance(bio, 2048);
    bio->bi_iter.bi_size = 3072;  // 2 KiB left in the first bvec, 1 KiB of the second
    bio->bi_iter.bi_sector = 0;
    bio->bi_end_io = on_done;
    bio->bi_private = &done;
    submit_bio(bio);
    CHECK(done.count.load() == 1);
    REQUIRE(qu.driver.seen.size() == 2);
    CHECK(qu.driver.seen[0].bytes == 2048);
    CHECK(qu.driver.seen[1].bytes == 1024);
    CHECK(qu.driver.seen[1].sector == 4);
    for (const auto& r : qu.driver.seen) CHECK(r.segs == 1);
  }
  {  // max_sectors 8 (4 KiB): 14 KiB starting 2 KiB into a 16 KiB bvec.
    QueueLimits lim;
    lim.max_sectors = lim.max_hw_sectors = 8;
    Queue qu({}, 64, lim);
    Bio* bio = make_read(&qu.bdev, qu.bs, 0, 16384, &done);
    bio_advance(bio, 2048);
    REQUIRE(bio->bi_iter.bi_bvec_done == 2048);
    bio->bi_iter.bi_sector = 100;
    submit_bio(bio);
    CHECK(done.count.load() == 2);
    REQUIRE(qu.driver.seen.size() == 4);
    uint32_t total = 0;
    sector_t next = 100;
    for (const auto& r : qu.driver.seen) {
      CHECK(r.bytes <= 4096);
      CHECK(r.sector == next);
      next += r.bytes >> SECTOR_SHIFT;
      total += r.bytes;
    }
    CHECK(total == 14336);
  }
}

TEST_CASE("v6.18 blk_mq_end_request_batch: tags are freed in groups of at most TAG_COMP_BATCH (32) per hctx, one sbitmap_queue_clear_batch (one wake-up) per group") {
  // A driver that keeps what it is given, for the test to complete in one batch.
  class HoldingDriver : public BlkMqOps {
   public:
    std::vector<Request*> held;
    blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
      held.push_back(rq);
      return BLK_STS_OK;
    }
  };
  HoldingDriver da, db;
  TagSetConfig set;
  set.queue_depth = 128;
  RequestQueue qa(QueueLimits{}, &da), qb(QueueLimits{}, &db);
  REQUIRE(qa.init(set) == 0);
  REQUIRE(qb.init(set) == 0);
  BlockDevice a, b;
  a.queue = &qa;
  b.queue = &qb;
  a.capacity = b.capacity = 1 << 20;
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  Done done;
  SbitmapQueue* ta = qa.hctx(0)->tags->bitmap_tags.get();
  SbitmapQueue* tb = qb.hctx(0)->tags->bitmap_tags.get();
  // 70 requests of one hctx: groups of 32, 32 and 6.
  for (int i = 0; i < 70; i++) submit_bio(make_read(&a, bs, sector_t(i) * 16, 4096, &done));
  REQUIRE(da.held.size() == 70);
  IoCompBatch iob;
  for (Request* rq : da.held) REQUIRE(blk_mq_add_to_batch(rq, &iob, BLK_STS_OK));
  da.held.clear();
  blk_mq_end_request_batch(&iob);
  CHECK(done.count.load() == 70);
  SbitmapStats s = sbitmap_queue_stats(ta);
  CHECK(s.batch_frees == 3);
  CHECK(s.batch_freed == 70);
  CHECK(sbitmap_weight(&ta->sb) == 0);
  // Requests of two hctxs interleaved: a new group at every change of hctx.
  for (int i = 0; i < 3; i++) {
    submit_bio(make_read(&a, bs, sector_t(i) * 16, 4096, &done));
    submit_bio(make_read(&b, bs, sector_t(i) * 16, 4096, &done));
  }
  for (int i = 0; i < 3; i++) {
    blk_mq_add_to_batch(da.held[size_t(i)], &iob, BLK_STS_OK);
    blk_mq_add_to_batch(db.held[size_t(i)], &iob, BLK_STS_OK);
  }
  blk_mq_end_request_batch(&iob);
  CHECK(done.count.load() == 76);
  CHECK(sbitmap_queue_stats(ta).batch_frees == 3 + 3);
  CHECK(sbitmap_queue_stats(tb).batch_frees == 3);
  CHECK(sbitmap_queue_stats(tb).batch_freed == 3);
  CHECK(sbitmap_weight(&ta->sb) == 0);
  CHECK(sbitmap_weight(&tb->sb) == 0);
}

TEST_CASE("v6.18 blk_mq_submit_bio: REQ_POLLED on a queue without poll queues (!blk_mq_can_poll) ends with BLK_STS_NOTSUPP") {
  Queue qu;  // no poll queues
  REQUIRE(qu.q->nr_poll_queues() == 0);
  Done done;
  Bio* bio = make_read(&qu.bdev, qu.bs, 0, 4096, &done, REQ_POLLED);
  bio_get(bio);
  submit_bio(bio);
  CHECK(done.count.load() == 1);
  CHECK(bio->bi_status == BLK_STS_NOTSUPP);
  CHECK(blk_status_to_errno(bio->bi_status) == -EOPNOTSUPP);
  CHECK(qu.driver.seen.empty());
  bio_put(bio);
  // With a poll queue the same bio is taken, on the poll queue.
  RecordingDriver d;
  TagSetConfig set;
  set.nr_poll_queues = 1;
  RequestQueue pq(QueueLimits{}, &d);
  REQUIRE(pq.init(set) == 0);
  BlockDevice pdev;
  pdev.queue = &pq;
  pdev.capacity = 1 << 20;
  Done polled;
  submit_bio(make_read(&pdev, qu.bs, 0, 4096, &polled, REQ_POLLED));
  CHECK(polled.count.load() == 1);
  CHECK(polled.errors.load() == 0);
  CHECK(d.seen.size() == 1);
}

TEST_CASE("v6.18 blk_mq_submit_bio: bio_unaligned, a size or a start that is not a multiple of the logical block size, ends the bio with BLK_STS_IOERR before any request") {
  QueueLimits lim;
  lim.logical_block_size = 4096;
  Queue qu({}, 64, lim);
  struct Case {
    sector_t sector;
    uint32_t bytes;
    bool ok;
  } cases[] = {
      {8, 4096, true},     // aligned in both
      {1, 4096, false},    // the start is not (bi_sector << 9 & 4095)
      {0, 2048, false},    // the size is not (bi_size & 4095)
      {4, 8192, false},    // half a block in
  };
  for (const Case& c : cases) {
    CAPTURE(c.sector);
    CAPTURE(c.bytes);
    qu.driver.seen.clear();
    const uint64_t requests = qu.q->counters().requests;
    Done done;
    Bio* bio = make_read(&qu.bdev, qu.bs, c.sector, c.bytes, &done);
    bio_get(bio);
    submit_bio(bio);
    CHECK(done.count.load() == 1);
    if (c.ok) {
      CHECK(bio->bi_status == BLK_STS_OK);
      CHECK(qu.driver.seen.size() == 1);
    } else {
      CHECK(bio->bi_status == BLK_STS_IOERR);  // bio_io_error()
      CHECK(qu.driver.seen.empty());
      CHECK(qu.q->counters().requests == requests);  // no request was made
    }
    bio_put(bio);
  }
}

// Issue 45: v6.18 blk_start_plug_nr_ios() caps nr_ios at BLK_MAX_REQUEST_COUNT (32), so a plug
// never asks for more tags at once than it may hold requests. Every other test passes 32 or
// less. On a queue of 256 tags (64-bit sbitmap words) a batch of 40 would fit a word: without
// the cap the first bio's allocation takes 40 tags; with it, 32.
TEST_CASE("v6.18 blk_start_plug_nr_ios: nr_ios is capped at BLK_MAX_REQUEST_COUNT (32), a plug asking for 40 takes a batch of 32 tags") {
  Queue qu({}, 256);
  REQUIRE(tags_of(qu.q.get())->sb.shift == 6);  // 64-bit words: a batch of 40 would fit
  start_tags_at_0(qu);
  Done done;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, 40);
  CHECK(plug.nr_ios == BLK_MAX_REQUEST_COUNT);
  submit_bio(make_read(&qu.bdev, qu.bs, 0, 4096, &done));
  CHECK(sbitmap_weight(&tags_of(qu.q.get())->sb) == BLK_MAX_REQUEST_COUNT);  // one used, 31 cached
  blk_finish_plug(&plug);
  CHECK(done.count.load() == 1);
  CHECK(sbitmap_weight(&tags_of(qu.q.get())->sb) == 0);  // the cached ones were freed
  BlkPlug big;
  blk_start_plug_nr_ios(&big, 1000);
  CHECK(big.nr_ios == BLK_MAX_REQUEST_COUNT);
  blk_finish_plug(&big);
}

// Issue 45: the group is exactly TAG_COMP_BATCH. The case above (70 tags: 32 + 32 + 6) passes
// with a cap of 31 (31 + 31 + 8) or 33 (33 + 33 + 4) as well; 33 completions are two groups only
// with a cap of at most 32, and 64 are two only with a cap of at least 32.
TEST_CASE("v6.18 blk_mq_end_request_batch: 33 completions free their tags in two groups and 64 in two, so a group is exactly TAG_COMP_BATCH (32)") {
  class HoldingDriver : public BlkMqOps {
   public:
    std::vector<Request*> held;
    blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
      held.push_back(rq);
      return BLK_STS_OK;
    }
  };
  HoldingDriver d;
  TagSetConfig set;
  set.queue_depth = 128;
  RequestQueue q(QueueLimits{}, &d);
  REQUIRE(q.init(set) == 0);
  BlockDevice dev;
  dev.queue = &q;
  dev.capacity = 1 << 20;
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  Done done;
  SbitmapQueue* tags = q.hctx(0)->tags->bitmap_tags.get();
  uint64_t frees = 0, freed = 0;
  for (const int n : {33, 64}) {
    for (int i = 0; i < n; i++) submit_bio(make_read(&dev, bs, sector_t(i) * 16, 4096, &done));
    REQUIRE(d.held.size() == size_t(n));
    IoCompBatch iob;
    for (Request* rq : d.held) REQUIRE(blk_mq_add_to_batch(rq, &iob, BLK_STS_OK));
    d.held.clear();
    blk_mq_end_request_batch(&iob);
    const SbitmapStats s = sbitmap_queue_stats(tags);
    CAPTURE(n);
    CHECK(s.batch_frees - frees == 2);  // 32 + 1, 32 + 32
    CHECK(s.batch_freed - freed == uint64_t(n));
    frees = s.batch_frees;
    freed = s.batch_freed;
    CHECK(sbitmap_weight(&tags->sb) == 0);
  }
  CHECK(done.count.load() == 33 + 64);
}

namespace {
// Runs fn on a new thread (its own tls CPU, unset) pinned to cpu; false if the pin failed.
template <typename Fn>
bool on_new_thread_pinned(int cpu, Fn fn) {
  bool pinned = false;
  std::thread([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pinned = sched_setaffinity(0, sizeof(set), &set) == 0;
    if (pinned) fn();
  }).join();
  return pinned;
}
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}
// A driver that notes the hardware queue each request reached, and completes it.
class HctxRecordingDriver : public BlkMqOps {
 public:
  std::mutex lock;
  std::vector<BlkMqHwCtx*> hctxs;
  blk_status_t queue_rq(BlkMqHwCtx* hctx, Request* rq, bool) override {
    {
      std::lock_guard g(lock);
      hctxs.push_back(hctx);
    }
    blk_mq_end_request(rq, BLK_STS_OK);
    return BLK_STS_OK;
  }
};
}  // namespace

// Issue 45 (the departures table: "hardware queue = cpu % nr_hw_queues of the CPU a thread
// first submitted from"). The kernel's blk_mq_map_queue() takes the current CPU's ctx and its
// hctx of the bio's type; biofs takes the CPU a thread first submitted from, modulo the
// *default* queues only (poll queues come after them and serve REQ_POLLED bios). Each case runs
// a fresh thread pinned to one CPU, so the rule bites with two and three default queues: a
// thread on CPU c submits to hctx(c % nr_default), also with a poll queue after them (with one
// default queue and a poll queue, CPU 1 must still get hctx 0, not the poll queue), and keeps
// that queue after it moves to another CPU.
TEST_CASE("blk_mq map_queue (biofs): with 2 or 3 default queues a thread submits to hctx (first CPU % nr default queues), poll queues excluded, kept after a migration") {
  const std::vector<int> cpus = allowed_cpus();
  REQUIRE(!cpus.empty());
  if (cpus.size() < 2) MESSAGE("only one CPU allowed: the cases with a second CPU are skipped");
  struct Shape {
    unsigned nr_default, nr_poll;
  };
  for (const Shape sh : {Shape{2, 0}, Shape{3, 1}, Shape{2, 2}, Shape{1, 1}}) {
    CAPTURE(sh.nr_default);
    CAPTURE(sh.nr_poll);
    HctxRecordingDriver d;
    TagSetConfig set;
    set.nr_hw_queues = sh.nr_default;
    set.nr_poll_queues = sh.nr_poll;
    set.queue_depth = 16;
    RequestQueue q(QueueLimits{}, &d);
    REQUIRE(q.init(set) == 0);
    REQUIRE(q.nr_hw_queues() == sh.nr_default + sh.nr_poll);
    BlockDevice dev;
    dev.queue = &q;
    dev.capacity = 1 << 20;
    BioSet bs(16, 0, BIOSET_NEED_BVECS);
    REQUIRE(bs.init() == 0);
    for (const int cpu : cpus) {
      CAPTURE(cpu);
      BlkMqHwCtx* mapped = nullptr;
      BlkMqHwCtx* after_move = nullptr;
      const int other = cpus.size() > 1 ? (cpu == cpus[0] ? cpus[1] : cpus[0]) : -1;
      Done done;
      REQUIRE(on_new_thread_pinned(cpu, [&] {
        submit_bio(make_read(&dev, bs, 0, 4096, &done));
        mapped = q.map_queue(REQ_OP_READ);
        if (other >= 0) {
          cpu_set_t s;
          CPU_ZERO(&s);
          CPU_SET(other, &s);
          if (sched_setaffinity(0, sizeof(s), &s) == 0) {
            submit_bio(make_read(&dev, bs, 16, 4096, &done));
            after_move = q.map_queue(REQ_OP_READ);
          }
        }
      }));
      BlkMqHwCtx* expected = q.hctx(unsigned(cpu) % sh.nr_default);
      CHECK(mapped == expected);
      REQUIRE(!d.hctxs.empty());
      CHECK(d.hctxs.front() == expected);  // the submission went there
      CHECK_FALSE(expected->polled);
      if (after_move) {
        CHECK(after_move == expected);  // the first CPU's queue, not the new CPU's
        CHECK(d.hctxs.back() == expected);
      }
      CHECK(done.count.load() == int(d.hctxs.size()));
      d.hctxs.clear();
    }
  }
}

namespace {
// Refuses hardware queue `refuse` in init_hctx, as a driver without the resources for it does.
class RefusingDriver : public RecordingDriver {
 public:
  explicit RefusingDriver(unsigned refuse) : refuse_(refuse) {}
  int init_hctx(BlkMqHwCtx*, unsigned hctx_idx) override { return hctx_idx == refuse_ ? -ENOMEM : 0; }

 private:
  unsigned refuse_;
};

// RequestQueue::init's result and its line for one tag set and limits.
std::pair<int, std::string> queue_init(unsigned queues, unsigned poll_queues, unsigned qd, QueueLimits lim = {}) {
  RecordingDriver d;
  RequestQueue q(lim, &d);
  TagSetConfig set;
  set.nr_hw_queues = queues;
  set.nr_poll_queues = poll_queues;
  set.queue_depth = qd;
  std::string why;
  const int ret = q.init(set, &why);
  return {ret, why};
}
}  // namespace

TEST_CASE("blk_mq_alloc_tag_set (biofs): queues, poll_queues and qd out of range are -EINVAL with one line, the bounds are taken") {
  using R = std::pair<int, std::string>;
  CHECK(queue_init(0, 0, 64) == R{-EINVAL, "queues=0: expected 1..256"});
  CHECK(queue_init(257, 0, 64) == R{-EINVAL, "queues=257: expected 1..256"});
  CHECK(queue_init(1, 257, 64) == R{-EINVAL, "poll_queues=257: expected 0..256"});
  CHECK(queue_init(1, 0, 0) == R{-EINVAL, "qd=0: expected 1..65536"});
  CHECK(queue_init(1, 0, 65537) == R{-EINVAL, "qd=65537: expected 1..65536"});
  CHECK(queue_init(256, 256, 1) == R{0, ""});
  CHECK(queue_init(1, 0, 65536) == R{0, ""});
  QueueLimits bad;
  bad.logical_block_size = 1000;
  CHECK(queue_init(1, 0, 64, bad) ==
        R{-EINVAL, "queue limits: logical_block_size 1000 is not a power of two between 512 and 65536"});
}

TEST_CASE("blk_mq_alloc_tag_set (biofs): a hardware queue the driver refuses in init_hctx fails the set-up, naming it") {
  RefusingDriver d(2);
  RequestQueue q(QueueLimits{}, &d);
  TagSetConfig set;
  set.nr_hw_queues = 2;
  set.nr_poll_queues = 1;  // queue 2 is the poll queue
  std::string why;
  CHECK(q.init(set, &why) == -EINVAL);
  CHECK(why == "driver refused hardware queue 2");
  RefusingDriver fine(3);
  RequestQueue ok(QueueLimits{}, &fine);
  CHECK(ok.init(set) == 0);
  CHECK(ok.nr_hw_queues() == 3);
}

TEST_CASE("the striped target's geometry: no children, a chunk that is not a power of two or below a child's block, in one line") {
  RecordingDriver d;
  RequestQueue q(QueueLimits{}, &d);
  REQUIRE(q.init(TagSetConfig{}) == 0);
  QueueLimits big;
  big.logical_block_size = 4096;
  RecordingDriver d4k;
  RequestQueue q4k(big, &d4k);
  REQUIRE(q4k.init(TagSetConfig{}) == 0);
  BlockDevice c512, c4k;
  c512.queue = &q;
  c4k.queue = &q4k;
  c512.capacity = c4k.capacity = 1 << 20;
  std::unique_ptr<StripeTarget> t;
  auto refused = [&](std::vector<BlockDevice*> children, uint32_t chunk) {
    const Status s = StripeTarget::create(std::move(children), chunk, BioCache::on, &t);
    CHECK_FALSE(t);
    CHECK(s.code() == Status::Code::invalid_argument);
    return s.message();
  };
  CHECK(refused({}, 8) == "stripe: no child devices");
  CHECK(refused({&c512}, 12) == "stripe: chunk of 12 sectors is not a power of two");
  CHECK(refused({&c512}, 0) == "stripe: chunk of 0 sectors is not a power of two");
  CHECK(refused({&c512, &c4k}, 4) == "stripe: chunk smaller than a child's logical block");
  REQUIRE(StripeTarget::create({&c512, &c4k}, 8, BioCache::on, &t).ok());  // one 4 KiB block: enough
  CHECK(t->bdev()->capacity == 2 << 20);
}
