// The one way a thread that submits I/O goes to sleep: the counterpart of schedule()
// (kernel/sched/core.c, v6.18), which calls sched_submit_work() before the task leaves the CPU
// and sched_update_worker() when it is back. Every sleeping primitive of the kernel reaches it:
// wait_event (include/linux/wait.h), wait_for_completion (kernel/sched/completion.c),
// wait_var_event (include/linux/wait_bit.h), the rw_semaphore's and mutex's slow paths, the tag
// wait's io_schedule(), mempool_alloc's wait. Here each of those passes its sleep to schedule(),
// so the plug is dispatched, and a covered queue handed back, in this one place.
//
// Spinning and polling are not sleeping: a poller flushes its plug itself, as bio_poll() does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "blk_mq.h"

namespace biofs {

// Dispatches what the thread's plug holds (it may be what the sleep waits for) and hands a
// covered queue to its completion thread (blk_cover.h), then runs `sleep`, which blocks.
template <class Sleep>
void schedule(Sleep&& sleep) {
  sched_submit_work();
  std::forward<Sleep>(sleep)();
}

// struct wait_queue_head with wait_event()/wake_up(): cond is read under the head's lock, and
// the waker changes what cond reads under it too, so no wake is lost.
struct WaitQueueHead {
  std::mutex lock;
  std::condition_variable cv;
};
template <class Cond>
void wait_event(WaitQueueHead& wq, Cond cond) {
  {
    std::lock_guard g(wq.lock);
    if (cond()) return;
  }
  schedule([&] {
    std::unique_lock g(wq.lock);
    wq.cv.wait(g, cond);
  });
}
// Changes what waiters test, under the head's lock, and wakes them all.
template <class Change>
void wake_up_all(WaitQueueHead& wq, Change&& change) {
  std::lock_guard g(wq.lock);
  std::forward<Change>(change)();
  wq.cv.notify_all();
}

// struct completion: done once, waited for once or more. complete() touches the completion
// only under its lock, so the waiter may free it as soon as wait_for_completion() returns.
class Completion {
 public:
  void complete() {
    wake_up_all(wq_, [this] { done_ = true; });
  }
  void wait_for_completion() {
    wait_event(wq_, [this] { return done_; });
  }
  bool completion_done() {
    std::lock_guard g(wq_.lock);
    return done_;
  }
  void reinit_completion() {
    std::lock_guard g(wq_.lock);
    done_ = false;
  }

 private:
  WaitQueueHead wq_;
  bool done_ = false;
};

// wait_var_event() on a counter: sleeps until it reads zero (inode_dio_wait's wait). The side
// that drops it to zero calls wake_up_var().
inline void wait_var_event_zero(std::atomic<int>& var) {
  if (var.load(std::memory_order_acquire) == 0) return;
  schedule([&] {
    for (int v; (v = var.load(std::memory_order_acquire)) != 0;) var.wait(v);
  });
}
inline void wake_up_var(std::atomic<int>& var) { var.notify_all(); }

}  // namespace biofs
