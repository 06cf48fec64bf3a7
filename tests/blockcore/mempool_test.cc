// Tests for mempool.h: reserve use, refill before release, waiting for an element.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <thread>

#include "blockcore/mempool.h"

using namespace biofs;

namespace {
bool fail_always(void*) { return true; }
}  // namespace

TEST_CASE("the allocator is used first and the reserve only when it fails") {
  Allocator a;
  Mempool pool(3, 128, a);
  REQUIRE(pool.init() == 0);
  CHECK(pool.curr_nr() == 3);
  void* p = pool.alloc(GFP_KERNEL);
  CHECK(pool.curr_nr() == 3);  // came from the allocator
  CHECK(pool.is_saturated());
  a.set_fail_hook(fail_always, nullptr);
  void* r1 = pool.alloc(GFP_KERNEL);
  void* r2 = pool.alloc(GFP_KERNEL);
  CHECK(pool.curr_nr() == 1);
  CHECK_FALSE(pool.is_saturated());
  CHECK(pool.reserve_allocs() == 2);
  // Freeing refills the reserve first, whatever the element's origin.
  pool.free(p);
  CHECK(pool.curr_nr() == 2);
  pool.free(r1);
  CHECK(pool.curr_nr() == 3);
  a.set_fail_hook(nullptr, nullptr);
  pool.free(r2);  // reserve full: back to the allocator
  CHECK(pool.curr_nr() == 3);
}

TEST_CASE("GFP_NOWAIT fails on an empty reserve while GFP_KERNEL waits for a free") {
  Allocator a;
  Mempool pool(1, 64, a);
  REQUIRE(pool.init() == 0);
  a.set_fail_hook(fail_always, nullptr);
  void* only = pool.alloc(GFP_KERNEL);
  REQUIRE(only);
  CHECK(pool.alloc(GFP_NOWAIT) == nullptr);
  auto waiter = std::async(std::launch::async, [&] { return pool.alloc(GFP_KERNEL); });
  CHECK(waiter.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  pool.free(only);
  REQUIRE(waiter.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  void* got = waiter.get();
  CHECK(got == only);
  CHECK(pool.waits() >= 1);
  pool.free(got);
  a.set_fail_hook(nullptr, nullptr);
}

TEST_CASE("many threads sharing a tiny reserve all make progress") {
  Allocator a;
  Mempool pool(2, 64, a);
  REQUIRE(pool.init() == 0);
  a.set_fail_hook(fail_always, nullptr);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; t++)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; i++) {
        auto* p = static_cast<int*>(pool.alloc(GFP_KERNEL));
        *p = i;  // the element is ours alone while held
        std::this_thread::yield();
        CHECK(*p == i);
        pool.free(p);
      }
      done++;
    });
  for (auto& t : threads) t.join();
  CHECK(done == 6);
  CHECK(pool.curr_nr() == 2);
  a.set_fail_hook(nullptr, nullptr);
}

namespace {
// Says yes to the first *ctx allocations, then no.
bool fail_after(void* ctx) {
  auto* left = static_cast<int*>(ctx);
  if (*left == 0) return true;
  --*left;
  return false;
}
}  // namespace

TEST_CASE("init fails with -ENOMEM when the allocator cannot fill the reserve, and keeps nothing") {
  Allocator a;
  int left = 2;  // two of the three reserve elements, then no
  a.set_fail_hook(fail_after, &left);
  Mempool pool(3, 128, a);
  CHECK(pool.init() == -ENOMEM);
  CHECK(pool.curr_nr() == 0);
  a.set_fail_hook(nullptr, nullptr);
  CHECK(pool.init() == 0);  // memory came back: the same pool fills its reserve
  CHECK(pool.curr_nr() == 3);
}
