// The ring guard (daemon/ring_guard.h): a SCHED_IDLE thread kept from running by a busy thread
// on its CPU goes back to SCHED_OTHER, and to SCHED_IDLE again once its CPU is calm.
#include <doctest/doctest.h>

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "daemon/ring_guard.h"

using namespace biofs;
using namespace std::chrono;

namespace {

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

template <class F>
bool wait_until(F f, seconds limit) {
  const auto end = steady_clock::now() + limit;
  while (!f() && steady_clock::now() < end) std::this_thread::sleep_for(milliseconds(5));
  return f();
}

// A stand-in ring thread: named `name`, on CPU 0, SCHED_IDLE, always wanting the CPU (as a ring
// thread with requests waiting) until `stop`; its thread id lands in `tid`.
std::thread idle_spinner(const char* name, std::atomic<bool>& stop, std::atomic<pid_t>& tid) {
  return std::thread([name, &stop, &tid] {
    pthread_setname_np(pthread_self(), name);
    pin(0);
    const sched_param p{0};
    REQUIRE(sched_setscheduler(0, SCHED_IDLE, &p) == 0);
    tid = pid_t(syscall(SYS_gettid));
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
}

}  // namespace

TEST_CASE("ring guard: an idle-class thread starved by a busy one on its CPU runs as SCHED_OTHER until the CPU is calm") {
  if (geteuid() != 0) {
    MESSAGE("skipped: leaving SCHED_IDLE needs root (or RLIMIT_NICE)");
    return;
  }
  std::atomic<bool> stop{false}, hog{true};
  std::atomic<pid_t> ring_tid{0};
  std::thread ring = idle_spinner("guardtest-ring", stop, ring_tid);
  // The CPU-bound work on the same CPU, until told to stop.
  std::thread busy([&] {
    pin(0);
    while (hog.load(std::memory_order_relaxed)) {
    }
  });
  REQUIRE(wait_until([&] { return ring_tid.load() != 0; }, seconds(5)));
  RingGuard::Config c;
  c.rings = 1;
  c.name_prefix = "guardtest-ring";
  {
    RingGuard guard(c);
    CHECK(wait_until([&] { return guard.watched() == 1; }, seconds(5)));
    CHECK(wait_until([&] { return guard.boosted() == 1; }, seconds(10)));
    CHECK(sched_getscheduler(ring_tid) == SCHED_OTHER);
    CHECK(guard.boosts() >= 1);
    hog = false;  // the CPU is the ring's alone now: back to SCHED_IDLE
    busy.join();
    CHECK(wait_until([&] { return guard.boosted() == 0; }, seconds(10)));
    CHECK(sched_getscheduler(ring_tid) == SCHED_IDLE);
    CHECK(guard.error() == "");
  }
  stop = true;
  ring.join();
}

TEST_CASE("ring guard: idle-class threads with their CPUs to themselves are left alone") {
  std::atomic<bool> stop{false};
  std::thread ring([&] {
    pthread_setname_np(pthread_self(), "guardtest-calm");
    const sched_param p{0};
    REQUIRE(sched_setscheduler(0, SCHED_IDLE, &p) == 0);
    while (!stop.load()) std::this_thread::sleep_for(milliseconds(1));  // mostly asleep, as an idle ring
  });
  RingGuard::Config c;
  c.rings = 1;
  c.name_prefix = "guardtest-calm";
  {
    RingGuard guard(c);
    CHECK(wait_until([&] { return guard.watched() == 1; }, seconds(5)));
    std::this_thread::sleep_for(milliseconds(300));
    CHECK(guard.boosts() == 0);
  }
  stop = true;
  ring.join();
}

TEST_CASE("ring guard: with reads and writes in flight an idle-class ring that waits runs as SCHED_OTHER, and goes back once none are") {
  if (geteuid() != 0) {
    MESSAGE("skipped: leaving SCHED_IDLE needs root (or RLIMIT_NICE)");
    return;
  }
  std::atomic<bool> stop{false};
  std::atomic<pid_t> ring_tid{0};
  std::thread ring = idle_spinner("guardtest-io", stop, ring_tid);
  // A requester on the same CPU that runs half the time: the ring waits about half of each
  // period, more than io_pct and less than starved_pct.
  std::thread requester([&] {
    pin(0);
    while (!stop.load(std::memory_order_relaxed)) {
      const auto until = steady_clock::now() + milliseconds(2);
      while (steady_clock::now() < until) {
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  REQUIRE(wait_until([&] { return ring_tid.load() != 0; }, seconds(5)));
  std::atomic<unsigned> in_flight{0};
  RingGuard::Config c;
  c.rings = 1;
  c.name_prefix = "guardtest-io";
  c.async_io = &in_flight;
  // The I/O rule alone: a test beside this one on CPU 0 could starve the ring past
  // starved_pct, and a ring moved for starvation is not moved again for I/O.
  c.starved_pct = 1000000;
  {
    RingGuard guard(c);
    CHECK(wait_until([&] { return guard.watched() == 1; }, seconds(5)));
    std::this_thread::sleep_for(milliseconds(300));
    CHECK(guard.io_boosts() == 0);  // nothing in flight: waiting alone is no reason below starved_pct
    in_flight = 3;
    CHECK(wait_until([&] { return guard.io_boosted() == 1; }, seconds(10)));
    CHECK(sched_getscheduler(ring_tid) == SCHED_OTHER);
    in_flight = 0;  // the ring still waits behind the requester, but has nothing to complete
    CHECK(wait_until([&] { return guard.io_boosted() == 0; }, seconds(10)));
    const uint64_t boosts = guard.boosts();
    const int policy = sched_getscheduler(ring_tid);
    if (guard.boosts() == boosts && guard.boosted() == 0) CHECK(policy == SCHED_IDLE);  // unless starved since
    CHECK(guard.io_boosts() >= 1);
    CHECK(guard.error() == "");
  }
  stop = true;
  ring.join();
  requester.join();
}
