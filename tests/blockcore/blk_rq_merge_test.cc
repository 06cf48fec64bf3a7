// Bio merging in the plug (blockcore/blk_rq_merge.h), Linux v6.18's block/blk-merge.c rules:
// one test case per rule, each with the fixture where the rule decides, so that breaking the
// rule's line fails the case that names it.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "blockcore/blk_mq.h"
#include "blockcore/blk_rq_merge.h"

using namespace biofs;

namespace {

alignas(PAGE_SIZE) uint8_t mem[64 * PAGE_SIZE];
uint8_t* page(unsigned i) { return mem + size_t(i) * PAGE_SIZE; }

// A driver that records each request as it reaches it, then ends it (with fail_with) inline.
class MergeRecorder : public BlkMqOps {
 public:
  struct Seen {
    sector_t sector;
    uint32_t bytes;
    uint16_t segs;
    blk_opf_t cmd_flags;
    std::vector<sector_t> bios;  // each bio's sector, in rq->bio .. biotail order
  };
  blk_status_t fail_with = BLK_STS_OK;
  std::vector<Seen> seen;

  blk_status_t queue_rq(BlkMqHwCtx*, Request* rq, bool) override {
    record(rq);
    blk_mq_end_request(rq, fail_with);
    return BLK_STS_OK;
  }
  void queue_rqs(RqList* rqs) override {
    while (Request* rq = rqs->pop()) {
      record(rq);
      blk_mq_end_request(rq, fail_with);
    }
  }

 private:
  void record(Request* rq) {
    Seen s{blk_rq_pos(rq), blk_rq_bytes(rq), rq->nr_phys_segments, rq->cmd_flags, {}};
    for (Bio* b = rq->bio; b; b = b->bi_next) s.bios.push_back(b->bi_iter.bi_sector);
    CHECK(rq->biotail->bi_next == nullptr);
    seen.push_back(std::move(s));
  }
};

struct Done {
  int count = 0;
  int errors = 0;
  blk_status_t last = BLK_STS_OK;
};
void on_done(Bio* bio) {
  auto* d = static_cast<Done*>(bio->bi_private);
  d->count++;
  if (bio->bi_status != BLK_STS_OK) d->errors++;
  d->last = bio->bi_status;
  bio_put(bio);
}

struct Queue {
  MergeRecorder driver;
  std::unique_ptr<RequestQueue> q;
  BlockDevice bdev;
  BioSet bs{16, 0, BIOSET_NEED_BVECS};
  explicit Queue(QueueLimits lim = {}, NoMerges nm = NoMerges::all) {
    REQUIRE(bs.init() == 0);
    Toggles t;
    t.nomerges = nm;
    q = std::make_unique<RequestQueue>(lim, &driver, t);
    REQUIRE(q->init(TagSetConfig{}) == 0);
    bdev.queue = q.get();
    bdev.capacity = 1 << 30;
  }
  QueueCounters counters() const { return q->counters(); }
};

struct Vec {
  uint8_t* addr;
  uint32_t len;
};

// A bio over `vecs` (each its own bvec) at `sector`.
Bio* make_bio(Queue& qu, blk_opf_t opf, sector_t sector, std::initializer_list<Vec> vecs, Done* done) {
  Bio* bio = bio_alloc_bioset(&qu.bdev, uint16_t(vecs.size()), opf, GFP_KERNEL, &qu.bs);
  for (const Vec& v : vecs) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(v.addr);
    uint8_t* base = reinterpret_cast<uint8_t*>(a & ~uintptr_t(PAGE_SIZE - 1));
    const uint32_t off = uint32_t(a & (PAGE_SIZE - 1));
    // bio_add_page joins a vec that continues the last one: force separate vecs by hand.
    REQUIRE(bio->bi_vcnt < bio->bi_max_vecs);
    bio->bi_io_vec[bio->bi_vcnt++] = BioVec{base, v.len, off};
    bio->bi_iter.bi_size += v.len;
  }
  bio->bi_iter.bi_sector = sector;
  bio->bi_end_io = on_done;
  bio->bi_private = done;
  return bio;
}

// 4 KiB reads of page p at `sector`, all submitted under one plug.
Bio* read4k(Queue& qu, sector_t sector, unsigned p, Done* done, blk_opf_t extra = 0) {
  return make_bio(qu, REQ_OP_READ | extra, sector, {{page(p), 4096}}, done);
}

void plugged(const std::vector<Bio*>& bios) {
  BlkPlug plug;
  blk_start_plug(&plug);
  for (Bio* b : bios) submit_bio(b);
  blk_finish_plug(&plug);
}

QueueLimits prp_limits() {  // NVMe PCIe's shape: the 4 KiB virt boundary
  QueueLimits lim;
  lim.max_hw_sectors = 1024;
  lim.virt_boundary_mask = PAGE_SIZE - 1;
  lim.max_segment_size = UINT32_MAX;
  return lim;
}

}  // namespace

TEST_CASE("v6.18 bio_attempt_back_merge: bios that continue the plug's last request join it, chained in order, as one request") {
  Queue qu;
  Done done;
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 8, 1, &done), read4k(qu, 16, 2, &done), read4k(qu, 24, 3, &done)});
  CHECK(done.count == 4);
  REQUIRE(qu.driver.seen.size() == 1);
  const auto& s = qu.driver.seen[0];
  CHECK(s.sector == 0);
  CHECK(s.bytes == 16384);
  CHECK(s.segs == 4);  // each bio's segment counted (ll_new_hw_segment)
  CHECK(s.bios == std::vector<sector_t>{0, 8, 16, 24});
  const QueueCounters c = qu.counters();
  CHECK(c.requests == 1);
  CHECK(c.read_merges == 3);
  CHECK(c.write_merges == 0);
}

TEST_CASE("v6.18 bio_attempt_front_merge: a bio that ends where the plug's last request starts becomes its first bio and moves its start") {
  Queue qu;
  Done done;
  plugged({read4k(qu, 24, 3, &done), read4k(qu, 16, 2, &done), read4k(qu, 8, 1, &done), read4k(qu, 0, 0, &done)});
  CHECK(done.count == 4);
  REQUIRE(qu.driver.seen.size() == 1);
  const auto& s = qu.driver.seen[0];
  CHECK(s.sector == 0);
  CHECK(s.bytes == 16384);
  CHECK(s.segs == 4);
  CHECK(s.bios == std::vector<sector_t>{0, 8, 16, 24});
  CHECK(qu.counters().read_merges == 3);
}

TEST_CASE("v6.18 blk_try_merge: a bio that neither continues nor precedes the request is not merged") {
  Queue qu;
  Done done;
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 16, 1, &done), read4k(qu, 40, 2, &done)});
  CHECK(qu.driver.seen.size() == 3);
  CHECK(qu.counters().read_merges == 0);
}

TEST_CASE("v6.18 blk_attempt_plug_merge: only the plug's last request of the queue is tried, not an older one") {
  Queue qu;
  Done done;
  // R1 at 0, R2 at 100; a bio at 8 continues R1, which is not the last: a request of its own.
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 100, 1, &done), read4k(qu, 8, 2, &done)});
  REQUIRE(qu.driver.seen.size() == 3);
  CHECK(qu.driver.seen[2].sector == 8);
}

TEST_CASE("v6.18 blk_attempt_plug_merge: with several queues in the plug, the first request of this queue from the oldest is tried") {
  Queue qa, qb;
  Done done;
  // qa at 0, then qb (the plug has two queues; qb's is last): qa's bio at 8 merges into qa's.
  plugged({read4k(qa, 0, 0, &done), read4k(qb, 0, 1, &done), read4k(qa, 8, 2, &done)});
  REQUIRE(qa.driver.seen.size() == 1);
  CHECK(qa.driver.seen[0].bytes == 8192);
  CHECK(qb.driver.seen.size() == 1);
  // The scan stops at the first request of this queue even when it cannot take the bio.
  Queue qc, qd;
  Done d2;
  plugged({read4k(qc, 0, 0, &d2), read4k(qc, 100, 1, &d2), read4k(qd, 0, 2, &d2), read4k(qc, 108, 3, &d2)});
  CHECK(qc.driver.seen.size() == 3);  // 108 continues the second request of qc, which is not tried
}

TEST_CASE("v6.18 blk_rq_merge_ok: a bio of another op is not merged (read after write, write after read)") {
  Queue qu;
  Done done;
  plugged({make_bio(qu, REQ_OP_WRITE, 0, {{page(0), 4096}}, &done), read4k(qu, 8, 1, &done),
           make_bio(qu, REQ_OP_WRITE, 16, {{page(2), 4096}}, &done)});
  CHECK(qu.driver.seen.size() == 3);
  const QueueCounters c = qu.counters();
  CHECK(c.read_merges + c.write_merges == 0);
  // Writes merge, and are counted as writes.
  Queue qw;
  Done dw;
  plugged({make_bio(qw, REQ_OP_WRITE, 0, {{page(0), 4096}}, &dw), make_bio(qw, REQ_OP_WRITE, 8, {{page(1), 4096}}, &dw)});
  CHECK(qw.driver.seen.size() == 1);
  CHECK(qw.counters().write_merges == 1);
  CHECK(qw.counters().read_merges == 0);
}

TEST_CASE("v6.18 blk_rq_merge_ok: bios of different I/O priority are not merged") {
  Queue qu;
  Done done;
  Bio* a = read4k(qu, 0, 0, &done);
  Bio* b = read4k(qu, 8, 1, &done);
  b->bi_ioprio = 2;
  plugged({a, b});
  CHECK(qu.driver.seen.size() == 2);
}

TEST_CASE("v6.18 bio_mergeable: a bio with REQ_NOMERGE is not merged into the last request") {
  Queue qu;
  Done done;
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 8, 1, &done, REQ_NOMERGE)});
  CHECK(qu.driver.seen.size() == 2);
}

TEST_CASE("v6.18 rq_mergeable: nothing merges into a request whose bio had REQ_NOMERGE") {
  Queue qu;
  Done done;
  plugged({read4k(qu, 0, 0, &done, REQ_NOMERGE), read4k(qu, 8, 1, &done)});
  CHECK(qu.driver.seen.size() == 2);
}

TEST_CASE("v6.18 REQ_NOMERGE_FLAGS: a REQ_FUA write neither merges nor takes merges on a queue with a write cache") {
  QueueLimits lim;
  lim.write_cache = true;
  Queue qu(lim);
  Done done;
  plugged({make_bio(qu, REQ_OP_WRITE, 0, {{page(0), 4096}}, &done),
           make_bio(qu, REQ_OP_WRITE | REQ_FUA, 8, {{page(1), 4096}}, &done),
           make_bio(qu, REQ_OP_WRITE, 16, {{page(2), 4096}}, &done)});
  CHECK(qu.driver.seen.size() == 3);
}

TEST_CASE("v6.18 bio_submit_split: the front piece of a split gets REQ_NOMERGE, so nothing front-merges into it") {
  // A virt-boundary split (a gap between the two vecs) makes A = [8, 12) and B = [12, 16) on qa.
  // Then a bio of qb (the plug now has two queues), then Y = [0, 8) on qa: the scan reaches A
  // first, which would take Y by every limit, but is REQ_NOMERGE.
  Queue qa(prp_limits()), qb;
  Done done;
  Bio* x = make_bio(qa, REQ_OP_READ, 8, {{page(0), 2048}, {page(5), 2048}}, &done);
  plugged({x, read4k(qb, 0, 1, &done), read4k(qa, 0, 9, &done)});
  CHECK(done.count == 3);
  REQUIRE(qa.driver.seen.size() == 3);
  CHECK(qa.counters().splits == 1);
  CHECK((qa.driver.seen[0].cmd_flags & REQ_NOMERGE) != 0);
  CHECK(qa.counters().read_merges == 0);
}

TEST_CASE("v6.18 ll_back_merge_fn: a merge may reach max_sectors but not pass it, and the full request takes no more (req_set_nomerge)") {
  QueueLimits lim;
  lim.max_hw_sectors = lim.max_sectors = 16;  // 8 KiB
  Queue qu(lim);
  Done done;
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 8, 1, &done), read4k(qu, 16, 2, &done)});
  REQUIRE(qu.driver.seen.size() == 2);
  CHECK(qu.driver.seen[0].bytes == 8192);  // exactly max_sectors
  CHECK(qu.driver.seen[1].sector == 16);
  CHECK((qu.driver.seen[0].cmd_flags & REQ_NOMERGE) != 0);  // the failed merge marked it
  CHECK((qu.driver.seen[1].cmd_flags & REQ_NOMERGE) == 0);
}

TEST_CASE("v6.18 ll_front_merge_fn: a front merge may not pass max_sectors either") {
  QueueLimits lim;
  lim.max_hw_sectors = lim.max_sectors = 16;
  Queue qu(lim);
  Done done;
  plugged({read4k(qu, 16, 2, &done), read4k(qu, 8, 1, &done), read4k(qu, 0, 0, &done)});
  REQUIRE(qu.driver.seen.size() == 2);
  CHECK(qu.driver.seen[0].sector == 8);
  CHECK(qu.driver.seen[0].bytes == 8192);
  CHECK((qu.driver.seen[0].cmd_flags & REQ_NOMERGE) != 0);
}

TEST_CASE("v6.18 blk_rq_get_max_sectors: a back merge does not cross a chunk_sectors boundary") {
  QueueLimits lim;
  lim.chunk_sectors = 16;  // 8 KiB chunks
  Queue qu(lim);
  Done done;
  // [8, 16) + [16, 24) would cross 16; [0, 8) + [8, 16) fills the chunk.
  plugged({read4k(qu, 8, 1, &done), read4k(qu, 16, 2, &done)});
  CHECK(qu.driver.seen.size() == 2);
  Queue qv(lim);
  plugged({read4k(qv, 0, 0, &done), read4k(qv, 8, 1, &done)});
  REQUIRE(qv.driver.seen.size() == 1);
  CHECK(qv.driver.seen[0].bytes == 8192);
}

TEST_CASE("v6.18 ll_front_merge_fn: a front merge's chunk_sectors limit counts from the bio's sector, the merged request's start") {
  QueueLimits lim;
  lim.chunk_sectors = 16;
  Queue qu(lim);
  Done done;
  // [16, 24) then [8, 16): merged [8, 24) crosses 16 (from 16 itself the chunk would have room).
  plugged({read4k(qu, 16, 2, &done), read4k(qu, 8, 1, &done)});
  CHECK(qu.driver.seen.size() == 2);
  Queue qv(lim);
  plugged({read4k(qv, 8, 1, &done), read4k(qv, 0, 0, &done)});  // [0, 16): one chunk
  REQUIRE(qv.driver.seen.size() == 1);
  CHECK(qv.driver.seen[0].sector == 0);
}

TEST_CASE("v6.18 ll_new_hw_segment: the merged request's segments stay within max_segments, and the bio's segments are added") {
  QueueLimits lim;
  lim.max_segments = 4;
  Queue qu(lim);
  Done done;
  // Each bio: two 2 KiB vecs in pages far apart (two segments).
  auto two = [&](sector_t s, unsigned p) {
    return make_bio(qu, REQ_OP_READ, s, {{page(p), 2048}, {page(p + 2), 2048}}, &done);
  };
  plugged({two(0, 0), two(8, 4), two(16, 8)});
  REQUIRE(qu.driver.seen.size() == 2);
  CHECK(qu.driver.seen[0].segs == 4);  // 2 + 2: exactly max_segments
  CHECK(qu.driver.seen[0].bytes == 8192);
  CHECK(qu.driver.seen[1].segs == 2);
  CHECK((qu.driver.seen[0].cmd_flags & REQ_NOMERGE) != 0);
}

TEST_CASE("v6.18 bio_will_gap: page-aligned vecs in different pages merge under a virt boundary") {
  Queue qu(prp_limits());
  Done done;
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 8, 5, &done)});
  CHECK(qu.driver.seen.size() == 1);
}

TEST_CASE("v6.18 bio_will_gap: the last vec ending inside the boundary, and the next not continuing it in memory, is a gap") {
  Queue qu(prp_limits());
  Done done;
  plugged({make_bio(qu, REQ_OP_READ, 0, {{page(0), 2048}}, &done), make_bio(qu, REQ_OP_READ, 4, {{page(5), 2048}}, &done)});
  CHECK(qu.driver.seen.size() == 2);
}

TEST_CASE("v6.18 bio_will_gap (biovec_phys_mergeable): the next vec continuing the last one in memory is no gap") {
  Queue qu(prp_limits());
  Done done;
  plugged({make_bio(qu, REQ_OP_READ, 0, {{page(0), 2048}}, &done),
           make_bio(qu, REQ_OP_READ, 4, {{page(0) + 2048, 2048}}, &done)});
  CHECK(qu.driver.seen.size() == 1);
}

TEST_CASE("v6.18 bio_will_gap: a vec that starts at a non-zero offset after a full page is a gap") {
  Queue qu(prp_limits());
  Done done;
  plugged({read4k(qu, 0, 0, &done), make_bio(qu, REQ_OP_READ, 8, {{page(5) + 2048, 2048}}, &done)});
  CHECK(qu.driver.seen.size() == 2);
}

TEST_CASE("v6.18 bio_will_gap: nothing merges into a request whose first vec starts off the boundary") {
  Queue qu(prp_limits());
  Done done;
  // The first request is [page 0 + 2048, 2048): it ends on the boundary, but starts off it.
  plugged({make_bio(qu, REQ_OP_READ, 0, {{page(0) + 2048, 2048}}, &done), read4k(qu, 4, 5, &done)});
  CHECK(qu.driver.seen.size() == 2);
}

TEST_CASE("v6.18 req_gap_front_merge: a front merge checks the bio's last vec against the request's first") {
  Queue qu(prp_limits());
  Done done;
  // The request is [4, 8) at page 5 offset 0; the bio [0, 4) ends inside its page: a gap.
  plugged({make_bio(qu, REQ_OP_READ, 4, {{page(5), 2048}}, &done), make_bio(qu, REQ_OP_READ, 0, {{page(0), 2048}}, &done)});
  CHECK(qu.driver.seen.size() == 2);
  Queue qv(prp_limits());
  plugged({make_bio(qv, REQ_OP_READ, 8, {{page(5), 2048}}, &done), read4k(qv, 0, 0, &done)});
  CHECK(qv.driver.seen.size() == 1);  // a full page before it: no gap
}

TEST_CASE("v6.18 blk_mq_end_request: every merged bio ends once, through its own bi_end_io, with the request's status") {
  Queue qu;
  Done a, b, c;
  plugged({read4k(qu, 0, 0, &a), read4k(qu, 8, 1, &b), read4k(qu, 16, 2, &c)});
  REQUIRE(qu.driver.seen.size() == 1);
  CHECK(a.count == 1);
  CHECK(b.count == 1);
  CHECK(c.count == 1);
  CHECK(a.errors + b.errors + c.errors == 0);
  qu.driver.fail_with = BLK_STS_MEDIUM;
  Done e, f, g;
  plugged({read4k(qu, 100, 0, &e), read4k(qu, 108, 1, &f), read4k(qu, 92, 2, &g)});
  REQUIRE(qu.driver.seen.size() == 2);
  for (Done* d : {&e, &f, &g}) {
    CHECK(d->count == 1);
    CHECK(d->last == BLK_STS_MEDIUM);
  }
}

TEST_CASE("v6.18 blk_rq_set_mixed_merge: bios of different failfast merge, and after a front merge the request carries its first bio's flags") {
  Queue qu;
  Done done;
  Bio* ff = read4k(qu, 8, 1, &done, REQ_FAILFAST);
  plugged({ff, read4k(qu, 0, 0, &done)});
  REQUIRE(qu.driver.seen.size() == 1);
  CHECK((qu.driver.seen[0].cmd_flags & REQ_FAILFAST) == 0);  // the new first bio has none
  Queue qv;
  plugged({read4k(qv, 0, 0, &done), read4k(qv, 8, 1, &done, REQ_FAILFAST)});
  REQUIRE(qv.driver.seen.size() == 1);
  CHECK((qv.driver.seen[0].cmd_flags & REQ_FAILFAST) == 0);  // a back merge keeps the first's
}

TEST_CASE("v6.18 nomerges=2 (QUEUE_FLAG_NOMERGES): no bio is merged, and blk_add_rq_to_plug skips its BLK_PLUG_FLUSH_SIZE test") {
  Queue qu({}, NoMerges::none);
  Done done;
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 8, 1, &done), read4k(qu, 16, 2, &done)});
  CHECK(qu.driver.seen.size() == 3);
  CHECK(qu.counters().read_merges == 0);
  // A 128 KiB request followed by another: with merges the plug is flushed first, without not.
  QueueLimits lim;
  lim.max_sectors = lim.max_hw_sectors = 512;
  for (NoMerges nm : {NoMerges::all, NoMerges::none}) {
    CAPTURE(nomerges_name(nm));
    Queue qf(lim, nm);
    BlkPlug plug;
    Done d;
    blk_start_plug(&plug);
    Bio* big = bio_alloc_bioset(&qf.bdev, 1, REQ_OP_READ, GFP_KERNEL, &qf.bs);
    REQUIRE(bio_add_virt(big, mem, 128 * 1024) == 128 * 1024);
    big->bi_end_io = on_done;
    big->bi_private = &d;
    submit_bio(big);
    submit_bio(read4k(qf, 1024, 40, &d));
    CHECK(d.count == (nm == NoMerges::none ? 0 : 1));
    blk_finish_plug(&plug);
    CHECK(d.count == 2);
  }
}

TEST_CASE("v6.18 nomerges=1 (QUEUE_FLAG_NOXMERGES) stops only an elevator's extended merges: with none, plug merges go on") {
  Queue qu({}, NoMerges::simple);
  Done done;
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 8, 1, &done), read4k(qu, 16, 2, &done)});
  CHECK(qu.driver.seen.size() == 1);
  CHECK(qu.counters().read_merges == 2);
}

TEST_CASE("nomerges is live: set_toggles() takes effect for the next bio, and the toggle table names its values") {
  Queue qu;
  Done done;
  Toggles t = qu.q->toggles();
  t.nomerges = NoMerges::none;
  qu.q->set_toggles(t);
  CHECK(qu.q->toggles().nomerges == NoMerges::none);
  plugged({read4k(qu, 0, 0, &done), read4k(qu, 8, 1, &done)});
  CHECK(qu.driver.seen.size() == 2);
  t.nomerges = NoMerges::all;
  qu.q->set_toggles(t);
  plugged({read4k(qu, 100, 0, &done), read4k(qu, 108, 1, &done)});
  CHECK(qu.driver.seen.size() == 3);
  Toggles u;
  CHECK(u.nomerges == NoMerges::all);  // the kernel's default, 0
  const ToggleInfo* info = find_toggle("nomerges");
  REQUIRE(info);
  CHECK(std::string(info->values) == "0|1|2");
  CHECK(std::string(info->ab_a) == "2");
  CHECK(std::string(info->ab_b) == "0");
  for (const char* v : {"0", "1", "2"}) {
    CHECK(set_toggle(&u, "nomerges", v).ok());
    CHECK(std::string(info->get(u)) == v);
  }
  CHECK_FALSE(set_toggle(&u, "nomerges", "3").ok());
}

TEST_CASE("v6.18 blk_account_io_merge_bio: discards merge (one range, no segment added) and count in their own column") {
  QueueLimits lim;
  lim.max_discard_sectors = 1024;
  Queue qu(lim);
  Done done;
  auto discard = [&](sector_t s) {
    Bio* bio = bio_alloc_bioset(&qu.bdev, 0, REQ_OP_DISCARD, GFP_KERNEL, &qu.bs);
    bio->bi_iter.bi_sector = s;
    bio->bi_iter.bi_size = 4096;
    bio->bi_end_io = on_done;
    bio->bi_private = &done;
    return bio;
  };
  plugged({discard(0), discard(8), discard(16)});
  REQUIRE(qu.driver.seen.size() == 1);
  CHECK(qu.driver.seen[0].bytes == 12288);
  CHECK(qu.driver.seen[0].segs == 1);
  CHECK(qu.counters().discard_merges == 2);
  CHECK(done.count == 3);
}

TEST_CASE("no plug, no merge: a bio submitted without a plug goes alone") {
  Queue qu;
  Done done;
  submit_bio(read4k(qu, 0, 0, &done));
  submit_bio(read4k(qu, 8, 1, &done));
  CHECK(qu.driver.seen.size() == 2);
}
