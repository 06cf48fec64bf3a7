// Drops the kernel's pages of a file, then runs what was waiting for it (the reply to a direct
// write, cached_opens.h), on a thread of its own: the kernel's invalidation waits for each
// locked page, and a page being read stays locked until the daemon answers its READ, so a
// thread that serves requests must never be the one waiting.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace biofs {

class PageDropper {
 public:
  using Drop = std::function<void(uint64_t ino)>;  // the notice to the kernel
  explicit PageDropper(Drop drop);
  ~PageDropper();  // drops what is queued, runs its replies, then stops
  PageDropper(const PageDropper&) = delete;
  PageDropper& operator=(const PageDropper&) = delete;

  // `then` runs once the file's pages are gone (the slow path: a heap allocation is fine).
  void drop_then(uint64_t ino, std::function<void()> then);
  uint64_t dropped() const;  // for the stats and tests

 private:
  void run(std::stop_token stop);

  struct Work {
    uint64_t ino;
    std::function<void()> then;
  };
  const Drop drop_;
  mutable std::mutex m_;
  std::condition_variable_any cv_;
  std::deque<Work> queue_;
  uint64_t dropped_ = 0;
  std::jthread thread_;  // last: started once the rest is made, joined first
};

}  // namespace biofs
