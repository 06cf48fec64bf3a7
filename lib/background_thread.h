// The daemon's background loops (the commit, end-io work, bio cache trim, ring guard, NVMe
// completion, null_blk timer and emulated write-cache threads) run on std::jthread: its
// destructor asks the loop to stop and joins it, and a wait on a std::condition_variable_any
// given the thread's stop_token ends when stop is asked, so no loop keeps a stop flag, a wake-up
// for it or a join of its own.
#pragma once

#include <pthread.h>

#include <stop_token>
#include <thread>
#include <utility>

namespace biofs {

// Starts `body(stop_token)` on a thread named `name` (at most 15 characters: pthread's limit;
// tools/biofs-compare reports CPU time by these names).
template <class Body>
std::jthread start_background_thread(const char* name, Body&& body) {
  return std::jthread([name, body = std::forward<Body>(body)](std::stop_token stop) mutable {
    pthread_setname_np(pthread_self(), name);
    body(stop);
  });
}

// Asks `t` to stop and waits for it (what ~jthread does, for where the order matters).
inline void stop_background_thread(std::jthread& t) {
  if (!t.joinable()) return;
  t.request_stop();
  t.join();
}

}  // namespace biofs
