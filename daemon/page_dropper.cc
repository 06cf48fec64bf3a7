#include "page_dropper.h"

#include <pthread.h>

namespace biofs {

PageDropper::PageDropper(Drop drop) : drop_(std::move(drop)), thread_([this](std::stop_token st) { run(st); }) {
  pthread_setname_np(thread_.native_handle(), "biofs-pagedrop");
}

PageDropper::~PageDropper() {
  thread_.request_stop();
  cv_.notify_all();
}

void PageDropper::drop_then(uint64_t ino, std::function<void()> then) {
  {
    std::lock_guard g(m_);
    queue_.push_back({ino, std::move(then)});
  }
  cv_.notify_one();
}

uint64_t PageDropper::dropped() const {
  std::lock_guard g(m_);
  return dropped_;
}

void PageDropper::run(std::stop_token stop) {
  std::unique_lock l(m_);
  for (;;) {
    cv_.wait(l, stop, [this] { return !queue_.empty(); });
    if (queue_.empty()) return;  // stopped with nothing left
    Work w = std::move(queue_.front());
    queue_.pop_front();
    l.unlock();
    drop_(w.ino);
    if (w.then) w.then();
    l.lock();
    dropped_++;
  }
}

}  // namespace biofs
