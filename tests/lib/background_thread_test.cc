// lib/background_thread.h: the thread carries its name, a stop request ends a wait on a
// condition_variable_any given the thread's stop_token (however long the wait), and work the
// loop was given before the stop is still done: what each background loop relies on.
#include <doctest/doctest.h>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "lib/background_thread.h"

using namespace biofs;
using namespace std::chrono_literals;

TEST_CASE("background thread: named, and a stop ends an hour-long wait at once") {
  std::mutex m;
  std::condition_variable_any cv;
  std::atomic<bool> waiting{false};
  char name[16] = {};
  std::jthread t = start_background_thread("biofs-test", [&](std::stop_token stop) {
    pthread_getname_np(pthread_self(), name, sizeof name);
    std::unique_lock g(m);
    waiting = true;
    cv.wait_for(g, stop, 1h, [] { return false; });
  });
  while (!waiting) std::this_thread::sleep_for(1ms);
  const auto t0 = std::chrono::steady_clock::now();
  stop_background_thread(t);
  CHECK(std::chrono::steady_clock::now() - t0 < 30s);  // bounded by the hour, not by a timing
  CHECK(!t.joinable());
  CHECK(std::strcmp(name, "biofs-test") == 0);
  stop_background_thread(t);  // a second stop, or one of a thread never started, does nothing
}

TEST_CASE("background thread: many loops, each given work then stopped, finish every item they were given") {
  constexpr int kThreads = 16, kItems = 2000;
  struct Loop {
    std::mutex m;
    std::condition_variable_any cv;
    std::vector<int> queued;
    long done = 0;
    std::jthread thread;
  };
  std::vector<Loop> loops(kThreads);
  for (Loop& l : loops)
    l.thread = start_background_thread("biofs-test", [&l](std::stop_token stop) {
      std::unique_lock g(l.m);
      for (;;) {
        l.cv.wait(g, stop, [&] { return !l.queued.empty(); });
        if (l.queued.empty()) return;  // stopped, and drained
        l.done += long(l.queued.size());
        l.queued.clear();
      }
    });
  for (int i = 0; i < kItems; i++) {
    Loop& l = loops[size_t(i % kThreads)];
    {
      std::lock_guard g(l.m);
      l.queued.push_back(i);
    }
    l.cv.notify_one();
  }
  for (Loop& l : loops) stop_background_thread(l.thread);
  long total = 0;
  for (Loop& l : loops) total += l.done;
  CHECK(total == kItems);
}
