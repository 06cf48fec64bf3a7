// Stress: producers allocate bios, consumers (other threads) and the producers themselves put
// them, for BIOFS_STRESS_SECONDS. Every bio carries a tag in the set's front pad; the test
// checks no bio is handed out while still in use and every one is put exactly once. Run under
// TSan and ASan by the sanitizer configurations.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "blockcore/bio_set.h"

using namespace biofs;

namespace {

enum class State : uint32_t { free = 0, in_use = 0xB10B10 };
struct Tag {  // the caller's structure in front of the bio, as fs_bio_set users have
  State state;
  uint32_t producer;
  uint64_t seq;
};

// A plain blocking queue between threads. (TBB's queues are not instrumented for TSan.)
class BioQueue {
 public:
  void push(Bio* bio) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return q_.size() < 1024; });
    q_.push_back(bio);
    not_empty_.notify_one();
  }
  Bio* pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return !q_.empty(); });
    Bio* bio = q_.front();
    q_.pop_front();
    not_full_.notify_one();
    return bio;
  }

 private:
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Bio*> q_;
};

double stress_seconds() {
  const char* s = std::getenv("BIOFS_STRESS_SECONDS");
  return s ? std::atof(s) : 1.0;
}

struct Run {
  std::atomic<uint64_t> allocated{0}, put{0}, double_handout{0}, bad_put{0};
};

void stress(unsigned flags, unsigned producers, unsigned consumers, double seconds) {
  BioSet bs(16, sizeof(Tag), flags);
  REQUIRE(bs.init() == 0);
  BioQueue queue;
  Run run;
  std::atomic<bool> stop{false};

  auto put_checked = [&](Bio* bio) {
    Tag* tag = static_cast<Tag*>(bs.front_of(bio));
    if (tag->state != State::in_use) run.bad_put++;
    tag->state = State::free;
    bio_put(bio);
    run.put++;
  };

  std::vector<std::thread> threads;
  for (unsigned p = 0; p < producers; p++)
    threads.emplace_back([&, p] {
      uint64_t seq = 0;
      std::vector<Bio*> mine;
      while (!stop.load(std::memory_order_relaxed)) {
        const uint16_t nr_vecs = (seq % 13 == 0) ? 9 : uint16_t(seq % 3);
        Bio* bio = bio_alloc_bioset(nullptr, nr_vecs, REQ_OP_READ, GFP_KERNEL, &bs);
        Tag* tag = static_cast<Tag*>(bs.front_of(bio));
        if (tag->state == State::in_use) run.double_handout++;
        *tag = Tag{State::in_use, p, seq};
        run.allocated++;
        if (seq % 4 == 0) {  // a quarter are put by the allocating thread, in small batches
          mine.push_back(bio);
          if (mine.size() == 8) {
            for (Bio* b : mine) put_checked(b);
            mine.clear();
          }
        } else {
          queue.push(bio);
        }
        seq++;
      }
      for (Bio* b : mine) put_checked(b);
    });
  for (unsigned c = 0; c < consumers; c++)
    threads.emplace_back([&] {
      while (Bio* bio = queue.pop()) {
        if (bio->bi_pool != &bs) run.bad_put++;
        put_checked(bio);
      }
    });

  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (unsigned p = 0; p < producers; p++) threads[p].join();
  for (unsigned c = 0; c < consumers; c++) queue.push(nullptr);
  for (unsigned c = 0; c < consumers; c++) threads[producers + c].join();

  CHECK(run.allocated > 1000);
  CHECK(run.double_handout == 0);
  CHECK(run.bad_put == 0);
  CHECK(run.put == run.allocated);
  const BioSetStats s = bs.stats();
  if (flags & BIOSET_PERCPU_CACHE) {
    // All threads have exited: every domain was pruned, nothing is left cached, and every
    // cache-eligible allocation was counted as a hit or a miss.
    CHECK(s.total.cached == 0);
    CHECK(s.total.alloc_hits > 0);
    CHECK(s.total.put_remote > 0);
    MESSAGE("allocated=" << run.allocated << " hits=" << s.total.alloc_hits
                         << " misses=" << s.total.alloc_misses << " remote=" << s.total.put_remote
                         << " splices=" << s.total.splices << " full=" << s.remote_put_full);
  }
  CHECK(bs.bio_pool().curr_nr() == 16);
}

}  // namespace

TEST_CASE("stress: 4 producers, 4 consumers, cache on") {
  stress(BIOSET_PERCPU_CACHE | BIOSET_NEED_BVECS, 4, 4, stress_seconds());
}

TEST_CASE("stress: 4 producers, 4 consumers, cache off") {
  stress(BIOSET_NEED_BVECS, 4, 4, stress_seconds() / 2);
}

TEST_CASE("stress: 1 producer, 7 consumers, cache on (alloc on one CPU, free on others)") {
  stress(BIOSET_PERCPU_CACHE | BIOSET_NEED_BVECS, 1, 7, stress_seconds() / 2);
}

TEST_CASE("stress: producers churn threads, so domains end and are adopted while bios fly") {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(stress_seconds() / 2);
  BioSet bs(8, 0, BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  BioQueue queue;
  std::atomic<uint64_t> allocated{0}, put{0};
  std::thread consumer([&] {
    while (Bio* bio = queue.pop()) {
      bio_put(bio);
      put++;
    }
  });
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::thread> gen;
    for (int t = 0; t < 3; t++)
      gen.emplace_back([&] {
        for (int i = 0; i < 500; i++) {
          Bio* bio = bio_alloc_bioset(nullptr, 0, REQ_OP_WRITE, GFP_KERNEL, &bs);
          allocated++;
          if (i % 2)
            queue.push(bio);
          else {
            bio_put(bio);
            put++;
          }
        }
      });
    for (auto& t : gen) t.join();
  }
  queue.push(nullptr);
  consumer.join();
  CHECK(put == allocated);
  const BioSetStats s = bs.stats();
  CHECK(s.domains.size() <= 3 + 1);  // ended domains were adopted, not leaked
  CHECK(s.total.cached == 0);
}
