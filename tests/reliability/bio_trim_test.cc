// Idle bio caches are trimmed from another thread (BioSet::trim_idle_caches): a thread that
// stops issuing I/O does not keep its cached bios, a thread that is busy keeps them, and the
// owner/trimmer handshake holds while owners allocate, put locally and remotely, and a trimmer
// runs beside them (label concurrent: the ThreadSanitizer configuration runs it).
#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "blockcore/bio_cache_trim.h"
#include "blockcore/bio_set.h"

using namespace biofs;

namespace {

Bio* alloc_one(BioSet& bs) { return bio_alloc_bioset(nullptr, 1, REQ_OP_READ, GFP_KERNEL, &bs); }

uint64_t cached(const BioSet& bs) { return bs.stats().total.cached; }

}  // namespace

TEST_CASE("bio cache trim: blockcore's trimmer empties an idle thread's cache of a BIOSET_TRIM_IDLE set by itself") {
  setenv("BIOFS_BIO_CACHE_TRIM_MS", "20", 1);  // read when the first such set registers
  REQUIRE(bio_cache_trim_interval_ms() == 20);
  BioSet bs(16, 0, BIOSET_PERCPU_CACHE | BIOSET_TRIM_IDLE);
  REQUIRE(bs.init() == 0);
  std::barrier sync(2);
  std::thread worker([&] {
    std::vector<Bio*> v;
    for (int i = 0; i < 50; i++) v.push_back(alloc_one(bs));
    for (Bio* b : v) bio_put(b);  // 50 bios in this thread's cache; then idle, alive
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  });
  sync.arrive_and_wait();
  // Nobody here calls trim_idle_caches(): the trimmer's passes (one to see the activity, one
  // to find none since) empty the domain within a few intervals.
  for (int i = 0; i < 500 && cached(bs) != 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(cached(bs) == 0);
  CHECK(bs.stats().total.pruned == 50);
  sync.arrive_and_wait();
  worker.join();
  BioSet plain(16, 0, BIOSET_PERCPU_CACHE);  // without the flag the trimmer leaves a set alone
  REQUIRE(plain.init() == 0);
  Bio* b = alloc_one(plain);
  bio_put(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(cached(plain) == 1);
}

TEST_CASE("bio cache trim: an idle thread's cache is emptied, a busy one's is kept") {
  BioSet bs(16, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  std::barrier sync(2);
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    std::vector<Bio*> v;
    for (int i = 0; i < 100; i++) v.push_back(alloc_one(bs));
    for (Bio* b : v) bio_put(b);  // 100 bios now sit in this thread's cache
    sync.arrive_and_wait();       // (1) filled
    sync.arrive_and_wait();       // (2) the main thread has trimmed while we were idle
    // Allocating again works (from the mempool now) and refills the cache.
    v.clear();
    for (int i = 0; i < 10; i++) v.push_back(alloc_one(bs));
    for (Bio* b : v) bio_put(b);
    sync.arrive_and_wait();       // (3)
    sync.arrive_and_wait();       // (4) first trim pass seen this activity
    while (!stop) {               // busy: allocating between the trims
      Bio* b = alloc_one(bs);
      bio_put(b);
    }
  });
  sync.arrive_and_wait();  // (1)
  CHECK(cached(bs) == 100);
  // The first pass only notes the activity; the second finds none since and trims.
  uint64_t freed = bs.trim_idle_caches();
  if (freed == 0) freed = bs.trim_idle_caches();
  CHECK(freed == 100);
  CHECK(cached(bs) == 0);
  CHECK(bs.stats().total.pruned == 100);
  sync.arrive_and_wait();  // (2)
  sync.arrive_and_wait();  // (3)
  CHECK(cached(bs) == 10);
  CHECK(bs.trim_idle_caches() == 0);  // it allocated since the last pass: not idle
  sync.arrive_and_wait();  // (4)
  stop = true;
  worker.join();
  // The thread has exited: its domain was emptied at exit, nothing is left to trim.
  CHECK(bs.trim_idle_caches() == 0);
  CHECK(cached(bs) == 0);
}

// Owners allocate and put (some bios put by another owner: the remote list) in bursts with
// idle stretches, while a trimmer sweeps continuously. Every bio is put exactly once; the bio
// set's teardown (and ASan/TSan in those builds) finds nothing leaked, doubly freed or racing.
TEST_CASE("bio cache trim: stress with owners, remote puts and a trimmer at once") {
  for (bool remote : {false, true}) {
    CAPTURE(remote);
    BioSet bs(32, 0, BIOSET_PERCPU_CACHE);
    REQUIRE(bs.init() == 0);
    constexpr int kThreads = 3, kRounds = 300;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> trimmed{0}, allocs{0};
    std::vector<std::atomic<Bio*>> handoff(kThreads);
    std::thread trimmer([&] {
      while (!stop) {
        trimmed += bs.trim_idle_caches();
        std::this_thread::yield();
      }
    });
    std::vector<std::thread> owners;
    for (int t = 0; t < kThreads; t++) {
      owners.emplace_back([&, t] {
        std::vector<Bio*> v;
        for (int r = 0; r < kRounds; r++) {
          const int n = 1 + (r * 7 + t * 13) % 40;
          for (int i = 0; i < n; i++) v.push_back(alloc_one(bs));
          allocs += uint64_t(n);
          for (Bio* b : v) {
            // Hand every fifth bio to the next owner to put (a remote put into our domain).
            Bio* old = remote && (reinterpret_cast<uintptr_t>(b) >> 6) % 5 == 0
                           ? handoff[size_t((t + 1) % kThreads)].exchange(b)
                           : b;
            if (old) bio_put(old);
          }
          v.clear();
          if (Bio* mine = handoff[size_t(t)].exchange(nullptr)) bio_put(mine);
          if (r % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // go idle
        }
      });
    }
    for (auto& th : owners) th.join();
    for (auto& h : handoff)
      if (Bio* b = h.exchange(nullptr)) bio_put(b);
    stop = true;
    trimmer.join();
    const BioSetStats s = bs.stats();
    // Every allocation was a hit or a miss of some domain; the owners have exited, so every
    // domain was emptied and every bio is back in the mempool (or the allocator).
    CHECK(s.total.alloc_hits + s.total.alloc_misses == allocs.load());
    CHECK(s.total.cached == 0);
    CHECK(bs.bio_pool().curr_nr() == bs.bio_pool().min_nr());
    MESSAGE(std::string(remote ? "remote puts: " : "local puts: ") << trimmed.load() << " bios trimmed while "
                                                                   << allocs.load() << " were allocated");
  }
}
