// Several submitter threads on one emulated namespace, each writing its own region with its
// own pattern in batches under a plug, then reading it back: data integrity with completions
// on completion threads (several hardware queues) and with submitters that poll. Written for
// ThreadSanitizer too (the `concurrent` label).
#include <doctest/doctest.h>

#include <barrier>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "nvme_test_util.h"

using namespace biofs;
using namespace biofs::test;

namespace {

// Each thread: `rounds` passes over its region of `blocks` 4 KiB blocks, writing batches of
// bios of mixed sizes (some unaligned in memory), then reading everything back.
void submitter(Device& dev, BioSet& bs, unsigned t, uint64_t blocks, bool polls, int* failures) {
  const size_t bytes = blocks * 4096;
  uint8_t* w = static_cast<uint8_t*>(std::aligned_alloc(PAGE_SIZE, bytes + PAGE_SIZE));
  uint8_t* r = static_cast<uint8_t*>(std::aligned_alloc(PAGE_SIZE, bytes + PAGE_SIZE));
  const sector_t base = sector_t(t) * blocks * 8;
  const uint32_t sizes[] = {4096, 8192, 16384, 65536};
  // A polling thread blocked on a tag frees none: keep every thread's share within the tags.
  const int max_inflight = polls ? 16 : 32;
  for (unsigned round = 0; round < 2; round++) {
    // Unaligned in memory on odd rounds: the bounce path under contention.
    uint8_t* wd = w + (round % 2 ? 80 : 0);
    uint8_t* rd = r + (round % 2 ? 144 : 0);
    fill_pattern(wd, bytes, t * 1000 + round);
    IoWait ww;
    int n = 0;
    uint64_t off = 0;
    while (off < bytes) {
      BlkPlug plug;
      blk_start_plug_nr_ios(&plug, 16);
      for (int i = 0; i < 16 && off < bytes; i++) {
        const uint32_t len = uint32_t(std::min<uint64_t>(sizes[(off / 4096 + t) % 4], bytes - off));
        submit_bio(make_bio(dev, bs, REQ_OP_WRITE, base + off / 512, wd + off, len, &ww));
        off += len;
        n++;
      }
      blk_finish_plug(&plug);
      while (n - ww.done.load(std::memory_order_acquire) > max_inflight) {
        if (!polls || dev.poll(true) == 0) std::this_thread::yield();
      }
    }
    wait_for(dev, ww, n);
    std::memset(rd, 0, bytes);
    IoWait rw;
    n = 0;
    for (off = 0; off < bytes; off += 65536, n++) {
      submit_bio(make_bio(dev, bs, REQ_OP_READ, base + off / 512, rd + off, uint32_t(std::min<uint64_t>(65536, bytes - off)), &rw));
      while (n + 1 - rw.done.load(std::memory_order_acquire) > max_inflight) {
        if (!polls || dev.poll(true) == 0) std::this_thread::yield();
      }
    }
    wait_for(dev, rw, n);
    if (ww.status.load() != BLK_STS_OK || rw.status.load() != BLK_STS_OK || std::memcmp(wd, rd, bytes) != 0)
      __atomic_add_fetch(failures, 1, __ATOMIC_RELAXED);
  }
  std::free(w);
  std::free(r);
}

void run(const std::string& opts, DeviceOptions o, unsigned threads, bool polls) {
  TempPath tmp("stress");
  const uint64_t blocks = 512;  // 2 MiB per thread
  auto dev = open_test_device("emu:" + tmp.path + ",size=" + std::to_string(threads * blocks * 4) + "K" + opts, o);
  BioSet bs(64, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  int failures = 0;
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      submitter(*dev, bs, t, blocks, polls, &failures);
      bs.prune_this_thread_cache();
    });
  for (auto& th : ts) th.join();
  CHECK(failures == 0);
  CHECK(dev->nvme()->inflight() == 0);
  CHECK(dev->queue()->counters().requests > 0);
}

}  // namespace

TEST_CASE("nvme stress: 4 submitters, 2 hardware queues, completion threads") {
  DeviceOptions o;
  o.queues = 2;
  o.qd = 64;
  for (const char* mode : {",inline=off", ",inline=on"}) {  // through the ring, or run inline
    CAPTURE(mode);
    run(std::string(",mdts=3") + mode, o, 4, false);
  }
}

TEST_CASE("nvme stress: 3 submitters on one queue that they poll themselves") {
  DeviceOptions o;
  o.queues = 1;
  o.qd = 128;  // three threads x at most 16 + a plug's 16 in flight each: within the tags
  o.completion_thread = false;
  run(",lba=4096,vwc,inline=off", o, 3, true);
}

TEST_CASE("nvme stress: submitters of an inline namespace end every command themselves, none is left behind") {
  // Rounds in lockstep: all threads submit at once, each waits for its own bio, then the next
  // round. No completion thread and nobody polls, so a command run inline that no submitter's
  // reap took (one found the reap's lock taken and left) would never end: the round would
  // wait forever. Half the rounds go through a plug (queue_rqs), half not (queue_rq).
  const unsigned threads = 4, rounds = 3000;
  TempPath tmp("inline-lockstep");
  DeviceOptions o;
  o.queues = 1;
  o.qd = 64;
  o.completion_thread = false;
  auto dev = open_test_device("emu:" + tmp.path + ",size=16M,inline=on", o);
  BioSet bs(64, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  std::barrier sync(threads);
  std::atomic<int> lost{0}, bad{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(PAGE_SIZE, 4096));
      for (unsigned r = 0; r < rounds && !lost.load(); r++) {
        std::memset(buf, int(t + r), 4096);
        IoWait w;
        sync.arrive_and_wait();
        Bio* bio = make_bio(*dev, bs, REQ_OP_WRITE, sector_t(t) * 8, buf, 4096, &w);
        if (r % 2) {
          BlkPlug plug;
          blk_start_plug(&plug);
          submit_bio(bio);
          blk_finish_plug(&plug);
        } else {
          submit_bio(bio);
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (w.done.load(std::memory_order_acquire) < 1) {
          if (std::chrono::steady_clock::now() > deadline) {
            lost++;
            while (w.done.load(std::memory_order_acquire) < 1) dev->poll(true);  // end it, to go on
          }
          std::this_thread::yield();
        }
        if (w.status.load() != BLK_STS_OK) bad++;
        sync.arrive_and_wait();
      }
      bs.prune_this_thread_cache();
      std::free(buf);
    });
  for (auto& th : ts) th.join();
  CHECK(lost.load() == 0);
  CHECK(bad.load() == 0);
  CHECK(dev->emu()->inline_commands() == uint64_t(threads) * rounds);
}
