#include "bio_cache_trim.h"

#include <pthread.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "bio_set.h"
#include "lib/parse_number.h"

namespace biofs {

namespace {

struct Trimmer {
  std::mutex lock;  // held while a pass runs, so unregister waits for it
  std::condition_variable wake;
  std::vector<BioSet*> sets;
  std::thread thread;
  uint64_t generation = 0;  // bumped to stop the thread started under the previous value

  void run(uint64_t mine) {
    pthread_setname_np(pthread_self(), "biofs-trim");
    std::unique_lock g(lock);
    while (generation == mine) {
      wake.wait_for(g, std::chrono::milliseconds(bio_cache_trim_interval_ms()));
      if (generation != mine) break;
      for (BioSet* bs : sets) bs->trim_idle_caches();
    }
  }
  std::thread stop_locked() {
    generation++;
    return std::move(thread);
  }
  ~Trimmer() {  // a set still registered at exit
    std::thread t;
    {
      std::lock_guard g(lock);
      t = stop_locked();
    }
    wake.notify_all();
    if (t.joinable()) t.join();
  }
};

Trimmer& trimmer() {
  static Trimmer t;
  return t;
}

}  // namespace

unsigned bio_cache_trim_interval_ms() {
  static const unsigned ms = [] {
    uint64_t v;
    const char* env = getenv("BIOFS_BIO_CACHE_TRIM_MS");
    return env && parse_uint(env, &v, 1, 3'600'000) ? unsigned(v) : BIO_CACHE_TRIM_INTERVAL_MS;
  }();
  return ms;
}

void bio_cache_trim_register(BioSet* bs) {
  Trimmer& t = trimmer();
  std::lock_guard g(t.lock);
  t.sets.push_back(bs);
  // A thread told to stop but not yet joined exits on its own: its generation has passed.
  if (!t.thread.joinable()) t.thread = std::thread([&t, gen = t.generation] { t.run(gen); });
}

void bio_cache_trim_unregister(BioSet* bs) {
  Trimmer& t = trimmer();
  std::thread done;
  {
    std::lock_guard g(t.lock);
    t.sets.erase(std::remove(t.sets.begin(), t.sets.end(), bs), t.sets.end());
    if (!t.sets.empty()) return;
    done = t.stop_locked();
  }
  t.wake.notify_all();
  if (done.joinable()) done.join();
}

}  // namespace biofs
