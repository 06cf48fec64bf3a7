// The counters the tools read: per-thread I/O accounting and the sampled per-stage histograms
// (blockcore/percpu_stat.h, blockcore/stage_clock.h), on the RAM disk.
#include <doctest/doctest.h>

#include <thread>

#include "blockcore/brd.h"
#include "blockcore/stage_clock.h"

using namespace biofs;

namespace {

uint64_t count(const BlkStatSnapshot& a, const BlkStatSnapshot& b, Stage s) {
  return b.stages[s].count() - a.stages[s].count();
}

void end_io(Bio* bio) { bio_put(bio); }

// Four 4 KiB writes under one plug, 4 KiB apart so that none merges; brd completes them inline.
void plugged_writes(BrdDevice& d, BioSet& bs, void* buf) {
  BlkPlug plug;
  blk_start_plug(&plug);
  for (int i = 0; i < 4; i++) {
    Bio* bio = bio_alloc_bioset(d.bdev(), 1, REQ_OP_WRITE, GFP_KERNEL, &bs);
    REQUIRE(bio_add_virt(bio, buf, 4096) == 4096);
    bio->bi_iter.bi_sector = sector_t(i) * 16;  // not adjacent: four requests, no merge
    bio->bi_end_io = end_io;
    submit_bio(bio);
  }
  blk_finish_plug(&plug);
}

struct SampleGuard {
  unsigned saved = stage_clock_sample();
  ~SampleGuard() { stage_clock_set_sample(saved); }
};

}  // namespace

TEST_CASE("stage histogram buckets hold each value once, in order, at most 12.5% wide") {
  unsigned prev = 0;
  for (uint64_t v = 0; v < (uint64_t(1) << 40); v = v < 64 ? v + 1 : v + v / 7) {
    const unsigned b = stat_hist_bucket(v);
    REQUIRE(b < STAT_HIST_BUCKETS);
    REQUIRE(b >= prev);
    REQUIRE(stat_hist_lower(b) <= v);
    REQUIRE(v <= stat_hist_upper(b));
    if (v >= 8) REQUIRE(stat_hist_upper(b) - stat_hist_lower(b) + 1 <= stat_hist_lower(b) / 8);
    prev = b;
  }
  CHECK(stat_hist_bucket(UINT64_MAX) == STAT_HIST_BUCKETS - 1);
}

TEST_CASE("stage histogram quantiles are the midpoints of the buckets holding them") {
  StageHist h;
  h.buckets[stat_hist_bucket(100)] = 98;     // [96, 103]
  h.buckets[stat_hist_bucket(10000)] = 2;    // [9216, 10239]
  CHECK(h.count() == 100);
  CHECK(h.quantile(0.5) == 99);
  CHECK(h.quantile(0.98) == 99);
  CHECK(h.quantile(0.99) == 9216 + 511);
  StageHist empty;
  CHECK(empty.quantile(0.5) == 0);
}

TEST_CASE("a sampled bio is stamped at allocation and tag, then at its plug flush, sampling off stamps nothing") {
  SampleGuard guard;
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t buf[4096];

  stage_clock_set_sample(1);
  tls_stage = StageTrace{};  // the countdown at the sampling point
  BlkStatSnapshot a = blk_stat_snapshot();
  plugged_writes(d, bs, buf);
  BlkStatSnapshot b = blk_stat_snapshot();
  // 1 in 1: the first bio starts a trace, which follows it alone to the flush (the others are
  // not sampled while it runs), so every plug traces one bio.
  CHECK(count(a, b, STAGE_BIO_ALLOC_HIT) + count(a, b, STAGE_BIO_ALLOC_MISS) == 1);
  CHECK(count(a, b, STAGE_TAG) == 1);
  CHECK(count(a, b, STAGE_PLUG_FLUSH) == 1);
  CHECK(count(a, b, STAGE_SPLIT) == 0);
  CHECK(b.ios[1] - a.ios[1] == 4);
  CHECK(b.bytes[1] - a.bytes[1] == 4 * 4096);
  CHECK(b.errors == a.errors);

  stage_clock_set_sample(0);
  plugged_writes(d, bs, buf);  // the thread notices at its next sampling decision
  a = blk_stat_snapshot();
  plugged_writes(d, bs, buf);
  b = blk_stat_snapshot();
  for (unsigned s = 0; s < NR_STAGES; s++) CHECK(count(a, b, Stage(s)) == 0);
  CHECK(b.ios[1] - a.ios[1] == 4);  // accounting does not depend on sampling
}

TEST_CASE("a FUSE token records the total wherever the reply is sent, the reply stage only on its own thread") {
  SampleGuard guard;
  stage_clock_set_sample(1);
  tls_stage = StageTrace{};  // the countdown at the sampling point
  BlkStatSnapshot a = blk_stat_snapshot();
  StageToken t = stage_request_received();
  REQUIRE(t.start_ns != 0);
  stage_request_reply(t);
  BlkStatSnapshot b = blk_stat_snapshot();
  CHECK(count(a, b, STAGE_REQUEST_TOTAL) == 1);
  CHECK(count(a, b, STAGE_REPLY) == 1);

  StageToken t2 = stage_request_received();
  REQUIRE(t2.start_ns != 0);
  std::thread([t2] { stage_request_reply(t2); }).join();
  BlkStatSnapshot c = blk_stat_snapshot();
  CHECK(count(b, c, STAGE_REQUEST_TOTAL) == 1);
  CHECK(count(b, c, STAGE_REPLY) == 0);

  stage_request_reply(StageToken{});  // an unsampled request records nothing
  CHECK(count(c, blk_stat_snapshot(), STAGE_REQUEST_TOTAL) == 0);
}

TEST_CASE("a sampled request's submission is stamped in it and recorded once at completion, on any thread") {
  SampleGuard guard;
  stage_clock_set_sample(1);
  Request rq[2]{};
  rq[0].rq_next = &rq[1];
  tls_stage = StageTrace{};
  stage_bio_alloc_begin();  // countdown 0: this starts a trace
  REQUIRE(tls_stage.on);
  BlkStatSnapshot a = blk_stat_snapshot();
  stage_rqs_submitted(&rq[0]);
  CHECK(rq[0].io_start_time_ns != 0);
  CHECK(rq[1].io_start_time_ns == rq[0].io_start_time_ns);
  stage_dispatched();
  CHECK(!tls_stage.on);  // a trace a bio started ends at dispatch
  std::thread([&] {
    stage_rq_completed(&rq[0]);
    stage_rq_completed(&rq[1]);
    stage_rq_completed(&rq[1]);  // already recorded: nothing more
  }).join();
  BlkStatSnapshot b = blk_stat_snapshot();
  CHECK(count(a, b, STAGE_SUBMIT) == 1);
  CHECK(count(a, b, STAGE_BIO_ALLOC_HIT) + count(a, b, STAGE_BIO_ALLOC_MISS) == 0);
  CHECK(count(a, b, STAGE_COMPLETE) == 2);
  CHECK(rq[1].io_start_time_ns == 0);
}

TEST_CASE("counts made by a thread that has exited are kept, and its block is freed") {
  const BlkStatSnapshot a = blk_stat_snapshot();
  const size_t live = blk_stat_live_threads();
  std::thread([live] {
    blk_stat_account_done(REQ_OP_WRITE, 512, true);
    blk_stat_account_done(REQ_OP_FLUSH, 0, false);
    blk_stat_account_done(REQ_OP_WRITE, 4096, false);
    blk_stat_count_flush();
    blk_stat_count_fua();
    blk_stat_count_clone();
    blk_stat_record(STAGE_TAG, 100);
    REQUIRE(blk_stat_live_threads() == live + 1);
  }).join();
  CHECK(blk_stat_live_threads() == live);  // folded into the retired total at exit
  const BlkStatSnapshot b = blk_stat_snapshot();
  CHECK(count(a, b, STAGE_TAG) == 1);
  CHECK(b.ios[1] - a.ios[1] == 2);
  CHECK(b.bytes[1] - a.bytes[1] == 4608);
  CHECK(b.ios[2] - a.ios[2] == 1);
  CHECK(b.flushes - a.flushes == 1);
  CHECK(b.fua_writes - a.fua_writes == 1);
  CHECK(b.errors - a.errors == 1);
  CHECK(b.clones - a.clones == 1);
}

TEST_CASE("a sampled FUSE request stamps every bio it submits, and its reply") {
  SampleGuard guard;
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t buf[4096];
  stage_clock_set_sample(1);
  tls_stage = StageTrace{};
  const BlkStatSnapshot a = blk_stat_snapshot();
  const StageToken t = stage_request_received();
  plugged_writes(d, bs, buf);
  stage_request_reply(t);
  const BlkStatSnapshot b = blk_stat_snapshot();
  CHECK(count(a, b, STAGE_BIO_ALLOC_HIT) + count(a, b, STAGE_BIO_ALLOC_MISS) == 4);
  CHECK(count(a, b, STAGE_TAG) == 4);
  CHECK(count(a, b, STAGE_PLUG_FLUSH) == 1);
  CHECK(count(a, b, STAGE_REPLY) == 1);
  CHECK(count(a, b, STAGE_REQUEST_TOTAL) == 1);
  CHECK(!tls_stage.on);
}

TEST_CASE("FUSE requests are sampled 1 in N even when each carries exactly one bio") {
  // With one countdown for both, a request's received and its bio's allocation took turns and
  // the sample always fell on the bio: no FUSE request was ever traced.
  SampleGuard guard;
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t buf[4096];
  stage_clock_set_sample(4);
  tls_stage = StageTrace{};
  const BlkStatSnapshot a = blk_stat_snapshot();
  for (int i = 0; i < 64; i++) {
    const StageToken t = stage_request_received();
    BlkPlug plug;
    blk_start_plug(&plug);
    Bio* bio = bio_alloc_bioset(d.bdev(), 1, REQ_OP_WRITE, GFP_KERNEL, &bs);
    REQUIRE(bio_add_virt(bio, buf, 4096) == 4096);
    bio->bi_end_io = end_io;
    submit_bio(bio);
    blk_finish_plug(&plug);
    stage_request_reply(t);
  }
  const BlkStatSnapshot b = blk_stat_snapshot();
  CHECK(count(a, b, STAGE_REQUEST_TOTAL) == 16);
  CHECK(count(a, b, STAGE_REPLY) == 16);
  // The other 48 requests' bios are sampled on their own count, 1 in 4 * BIO_SAMPLE_FACTOR:
  // the first of them (the countdown starts at 0), then none of the remaining 47.
  static_assert(4 * BIO_SAMPLE_FACTOR > 48);
  CHECK(count(a, b, STAGE_TAG) == 16 + 1);
}

TEST_CASE("a sampled bio put without being submitted ends its trace: later allocations are not stamped") {
  // The trace used to end only at dispatch: a bio freed before it (an error path, the alloc
  // benchmark) left the thread traced, and every later allocation paid for the stamps.
  SampleGuard guard;
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  stage_clock_set_sample(1);
  tls_stage = StageTrace{};
  const BlkStatSnapshot a = blk_stat_snapshot();
  Bio* first = bio_alloc_bioset(d.bdev(), 1, REQ_OP_WRITE, GFP_KERNEL, &bs);
  REQUIRE(tls_stage.on);
  Bio* other = bio_alloc_bioset(d.bdev(), 1, REQ_OP_WRITE, GFP_KERNEL, &bs);
  bio_put(other);  // not the traced bio: the trace goes on
  CHECK(tls_stage.on);
  bio_put(first);
  CHECK(!tls_stage.on);
  for (int i = 0; i < 10; i++) bio_put(bio_alloc_bioset(d.bdev(), 1, REQ_OP_WRITE, GFP_KERNEL, &bs));
  const BlkStatSnapshot b = blk_stat_snapshot();
  // `first` and `other` (allocated while the trace ran) were stamped; of the ten, none: the
  // next sample is BIO_SAMPLE_FACTOR bios away.
  CHECK(count(a, b, STAGE_BIO_ALLOC_HIT) + count(a, b, STAGE_BIO_ALLOC_MISS) == 2);
}
