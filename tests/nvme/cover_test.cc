// The completion cover (blockcore/blk_cover.h) on the emulated namespace's real driver, every
// command through io_uring (inline=off): the covering thread reaps its queue's completions
// where the completion descriptor wakes it; the completion thread stands down while the queue
// is covered, takes over at once when the covering thread is about to sleep
// (sched_submit_work()), and still finds what a covering thread that never reaps leaves behind.
#include <doctest/doctest.h>

#include <poll.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "blockcore/blk_cover.h"
#include "nvme/nvme_driver.h"
#include "nvme_test_util.h"

using namespace biofs;
using namespace biofs::test;

namespace {

struct Ends {
  std::atomic<int> done{0};
  std::atomic<int> here{0};  // ends that ran on the covering (test) thread
  std::thread::id self = std::this_thread::get_id();
};

void end_read(Bio* bio) {
  auto* e = static_cast<Ends*>(bio->bi_private);
  CHECK(bio->bi_status == BLK_STS_OK);
  if (std::this_thread::get_id() == e->self) e->here.fetch_add(1, std::memory_order_relaxed);
  bio_put(bio);
  e->done.fetch_add(1, std::memory_order_release);
}

void submit_read(Device& dev, BioSet& bs, sector_t sector, void* buf, Ends* e) {
  Bio* bio = bio_alloc_bioset(dev.bdev(), 1, REQ_OP_READ, GFP_KERNEL, &bs);
  REQUIRE(bio_add_virt(bio, buf, 4096) == 4096);
  bio->bi_iter.bi_sector = sector;
  bio->bi_end_io = end_read;
  bio->bi_private = e;
  submit_bio(bio);
}

// Yields until `n` have ended; false after 20 s (a completion nobody reaps).
bool ended_within(Ends& e, int n) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (e.done.load(std::memory_order_acquire) < n) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

struct Rig {
  TempPath tmp{"cover"};
  std::unique_ptr<Device> dev;
  BioSet bs{16, 0, BIOSET_NEED_BVECS};
  alignas(4096) static inline uint8_t buf[4096];
  explicit Rig(unsigned look_ms = COVER_LOOK_MS) {
    REQUIRE(bs.init() == 0);
    DeviceOptions o;
    o.cover_look_ms = look_ms;
    dev = open_test_device("emu:" + tmp.path + ",size=8M,inline=off", o);
    REQUIRE(dev->nvme());
    // Blocks on the backing file, so that a read waits for it (a hole would be answered
    // inside the submission, and its submitter would reap it there).
    std::memset(buf, 0x5a, sizeof(buf));
    for (int i = 0; i < 32; i++)
      REQUIRE(sync_io(*dev, bs, REQ_OP_WRITE | REQ_FUA, sector_t(i) * 8, buf, 4096) == BLK_STS_OK);
  }
  BlkMqHwCtx* hctx() { return dev->queue()->map_queue(0); }
};

}  // namespace

TEST_CASE("cover: the covering thread reaps its queue where the completion descriptor wakes it") {
  Rig r;
  REQUIRE(blk_cover_claim(r.hctx()));
  const int fd = blk_cover_fd();
  REQUIRE(fd >= 0);
  Ends e;
  const int n = 32;
  for (int i = 0; i < n; i++) {
    submit_read(*r.dev, r.bs, sector_t(i) * 8, Rig::buf, &e);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (e.done.load() <= i && std::chrono::steady_clock::now() < give_up) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 100);
      blk_cover_reap();
    }
  }
  CHECK(e.done.load() == n);
  // The completion thread may still catch one now and then (it looks every COVER_LOOK_MS).
  CHECK(e.here.load() > 0);
  blk_cover_release();
}

TEST_CASE("cover: the completion thread takes over at once when the covering thread is about to sleep") {
  // A standing-down completion thread looks only once a minute here: a hand-back that did not
  // wake it would leave each read for that long (ended_within gives up after 20 s).
  Rig r(60'000);
  REQUIRE(blk_cover_claim(r.hctx()));
  Ends e;
  const int n = 32;
  for (int i = 0; i < n; i++) {
    blk_cover_resume();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the completion thread stands down
    sched_submit_work();  // about to wait without reaping: the completion thread must reap
    submit_read(*r.dev, r.bs, sector_t(i) * 8, Rig::buf, &e);
    REQUIRE(ended_within(e, i + 1));
  }
  // Each read was reaped by the completion thread after the hand-back, none while covered.
  CHECK(r.dev->nvme()->cover_misses() == 0);
  blk_cover_release();
}

TEST_CASE("cover: while a thread covers the queue its completion thread reaps nothing") {
  Rig r(60'000);  // a standing-down completion thread looks once a minute
  REQUIRE(blk_cover_claim(r.hctx()));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (r.dev->nvme()->standing_down() == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(r.dev->nvme()->standing_down() == 1);
  Ends e;
  const int n = 8;
  BlkPlug plug;  // one doorbell; the submitter's own reap after it may end some (inline ones)
  blk_start_plug_nr_ios(&plug, n);
  for (int i = 0; i < n; i++) submit_read(*r.dev, r.bs, sector_t(i) * 8, Rig::buf, &e);
  blk_finish_plug(&plug);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(e.done.load() == e.here.load());  // nothing ended elsewhere
  while (e.done.load() < n && std::chrono::steady_clock::now() < give_up) {
    pollfd p{blk_cover_fd(), POLLIN, 0};
    poll(&p, 1, 100);
    blk_cover_reap();
  }
  CHECK(e.done.load() == n);
  CHECK(e.here.load() == n);
  CHECK(r.dev->nvme()->cover_misses() == 0);
  blk_cover_release();
}

TEST_CASE("cover: a covering thread that never reaps loses nothing: the standing-down completion thread finds it") {
  Rig r;
  REQUIRE(blk_cover_claim(r.hctx()));
  Ends e;
  const int n = 8;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, n);
  // Every other block: adjacent reads in one plug would merge into one command (one miss).
  for (int i = 0; i < n; i++) submit_read(*r.dev, r.bs, sector_t(2 * i) * 8, Rig::buf, &e);
  blk_finish_plug(&plug);
  CHECK(ended_within(e, n));  // yielding, never reaping, never sleeping through sched_submit_work
  // Each read the submitter did not end itself (inside its submission) was found by the
  // completion thread's look while the queue was covered: counted just after that reap ends it.
  const uint64_t want = uint64_t(n - e.here.load());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (r.dev->nvme()->cover_misses() < want && std::chrono::steady_clock::now() < give_up)
    std::this_thread::yield();
  CHECK(r.dev->nvme()->cover_misses() == want);
  blk_cover_release();
}
