#include "end_io_work.h"

#include "blockcore/schedule.h"
#include "lib/background_thread.h"

namespace biofs {

EndIoWork::EndIoWork(Run run)
    : run_(std::move(run)),
      thread_(start_background_thread("biofs-endio", [this](std::stop_token stop) { worker(stop); })) {}

EndIoWork::~EndIoWork() {
  drain();
  stop_background_thread(thread_);
}

void EndIoWork::begin() {
  std::lock_guard g(lock_);
  outstanding_++;
}

void EndIoWork::queue(Item* item) {
  bool was_empty;
  {
    std::lock_guard g(lock_);
    was_empty = queued_.empty();
    queued_.push_back(item);
  }
  if (was_empty) wake_.notify_one();
}

void EndIoWork::end() {
  std::lock_guard g(lock_);
  if (--outstanding_ == 0) idle_.notify_all();
}

void EndIoWork::drain() {
  schedule([this] {
    std::unique_lock g(lock_);
    idle_.wait(g, [this] { return outstanding_ == 0; });
  });
}

void EndIoWork::worker(std::stop_token stop) {
  std::vector<Item*> batch;
  std::unique_lock g(lock_);
  for (;;) {
    wake_.wait(g, stop, [this] { return !queued_.empty(); });
    if (queued_.empty()) return;  // stopping, and drained before that
    batch.swap(queued_);
    g.unlock();
    run_(batch);
    batch.clear();
    g.lock();
  }
}

}  // namespace biofs
