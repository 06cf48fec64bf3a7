#include "bio_cache_trim.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "bio_set.h"
#include "lib/background_thread.h"
#include "lib/parse_number.h"

namespace biofs {

namespace {

struct Trimmer {
  std::mutex lock;  // held while a pass runs, so unregister waits for it
  std::condition_variable_any wake;  // only stop requests wake it
  std::vector<BioSet*> sets;
  std::jthread thread;

  void run(std::stop_token stop) {
    std::unique_lock g(lock);
    for (;;) {
      wake.wait_for(g, stop, std::chrono::milliseconds(bio_cache_trim_interval_ms()), [] { return false; });
      if (stop.stop_requested()) return;
      for (BioSet* bs : sets) bs->trim_idle_caches();
    }
  }
  // The running thread, told to stop: joined by the caller outside `lock`, which it needs to
  // end. A register meanwhile starts a new thread with a stop_token of its own.
  std::jthread stop_locked() {
    thread.request_stop();
    return std::move(thread);
  }
  ~Trimmer() {  // a set still registered at exit
    std::jthread t;
    {
      std::lock_guard g(lock);
      t = stop_locked();
    }
    stop_background_thread(t);
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
  if (!t.thread.joinable())
    t.thread = start_background_thread("biofs-trim", [&t](std::stop_token stop) { t.run(stop); });
}

void bio_cache_trim_unregister(BioSet* bs) {
  Trimmer& t = trimmer();
  std::jthread done;
  {
    std::lock_guard g(t.lock);
    t.sets.erase(std::remove(t.sets.begin(), t.sets.end(), bs), t.sets.end());
    if (!t.sets.empty()) return;
    done = t.stop_locked();
  }
  stop_background_thread(done);
}

}  // namespace biofs
