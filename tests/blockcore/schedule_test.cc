// schedule() and the sleeping primitives built on it (blockcore/schedule.h): each dispatches
// the sleeper's plug before it blocks, because what it waits for may sit in that plug (the
// kernel's schedule() -> sched_submit_work() -> blk_flush_plug()). Each test plugs a write on a
// RAM disk that completes at dispatch, and then sleeps on something that only the write's
// completion ends: a primitive that slept with the plug held would never wake (the test
// fails after 10 s instead of hanging).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "blockcore/bio_set.h"
#include "blockcore/brd.h"
#include "tests/blockcore/test_brd.h"
#include "blockcore/schedule.h"

using namespace biofs;

namespace {

// Runs `wait` on a thread of its own after plugging a write whose end_io calls `wake`.
// True when `wait` returned within 10 s.
bool woken_by_plugged_write(void (*wake)(void*), void* arg, const std::function<void()>& wait) {
  static const std::unique_ptr<BrdDevice> dev_owner = test::make_test_brd(1 << 20);
  static BrdDevice& dev = *dev_owner;
  static BioSet bs(4, 0, BIOSET_NEED_BVECS);
  static const int bs_init = bs.init();  // once, with the set
  REQUIRE(bs_init == 0);
  struct Ctx {
    void (*wake)(void*);
    void* arg;
  } ctx{wake, arg};
  // A detached thread: one that never wakes is left behind, and the test fails rather than hangs.
  auto ended = std::make_shared<std::promise<void>>();
  std::future<void> f = ended->get_future();
  std::thread([ctx, wait, ended] () mutable {
    alignas(4096) static uint8_t data[4096];
    BlkPlug plug;
    blk_start_plug(&plug);
    Bio* bio = bio_alloc_bioset(dev.bdev(), 1, REQ_OP_WRITE, GFP_KERNEL, &bs);
    bio_add_virt(bio, data, sizeof(data));
    bio->bi_private = &ctx;
    bio->bi_end_io = [](Bio* b) {
      auto* c = static_cast<Ctx*>(b->bi_private);
      bio_put(b);
      c->wake(c->arg);
    };
    submit_bio(bio);  // into the plug: nothing is dispatched yet
    wait();
    blk_finish_plug(&plug);
    ended->set_value();
  }).detach();
  return f.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
}

}  // namespace

TEST_CASE("schedule: runs the sleep after dispatching the plug") {
  std::atomic<bool> done{false};
  CHECK(woken_by_plugged_write([](void* a) { static_cast<std::atomic<bool>*>(a)->store(true); }, &done, [&] {
    schedule([&] {
      while (!done.load()) std::this_thread::yield();
    });
  }));
}

TEST_CASE("schedule: wait_for_completion dispatches the plug before it sleeps") {
  Completion c;
  CHECK(woken_by_plugged_write([](void* a) { static_cast<Completion*>(a)->complete(); }, &c,
                               [&] { c.wait_for_completion(); }));
  CHECK(c.completion_done());
}

TEST_CASE("schedule: wait_event dispatches the plug before it sleeps, and a met condition does not sleep") {
  struct Q {
    WaitQueueHead wq;
    bool flag = false;
  } q;
  CHECK(woken_by_plugged_write([](void* a) {
    auto* q = static_cast<Q*>(a);
    wake_up_all(q->wq, [q] { q->flag = true; });
  }, &q, [&] { wait_event(q.wq, [&] { return q.flag; }); }));
  wait_event(q.wq, [&] { return q.flag; });  // already true: returns at once
}

TEST_CASE("schedule: wait_var_event_zero (inode_dio_wait) dispatches the plug before it sleeps") {
  std::atomic<int> count{1};
  CHECK(woken_by_plugged_write([](void* a) {
    auto* c = static_cast<std::atomic<int>*>(a);
    if (c->fetch_sub(1) == 1) wake_up_var(*c);
  }, &count, [&] { wait_var_event_zero(count); }));
  CHECK(count.load() == 0);
}

TEST_CASE("schedule: a completion may be freed as soon as its waiter returns") {
  // complete() does its last touch under the completion's lock, which the waiter takes before
  // it returns (ASan sees a use after free otherwise).
  for (int i = 0; i < 200; i++) {
    auto* c = new Completion;
    std::thread t([c] { c->complete(); });
    c->wait_for_completion();
    delete c;
    t.join();
  }
}
