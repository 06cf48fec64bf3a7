// Keeps the FUSE reactor's threads (fuse_reactor.h) in SCHED_IDLE (fuse_uring_sched=idle) from
// starving; below, a "ring thread" is one of them. A SCHED_IDLE
// thread runs only when its CPU has nothing else to run; that is what keeps a requester on its
// ring's CPU (the scheduler counts a CPU running only such threads as idle), and also what
// would hold the filesystem up while CPU-bound work fills every CPU. The guard reads each ring
// thread's run delay (time spent runnable, not running: /proc/self/task/TID/schedstat, the
// kernel's sched_info) every period; a thread that waited more than a share of a period goes
// back to SCHED_OTHER, and returns to SCHED_IDLE once it has waited less than a tenth of that
// share for ten periods in a row. No kernel twin: the kernel's own answer to SCHED_IDLE
// starvation is the tiny weight it gives such threads (3 against 1024).
//
// With `async_io` (fuse_uring_sched=auto) a ring thread also leaves SCHED_IDLE while reads and
// writes not run to completion are in flight (the daemon's count, not the thread's) and it
// waited more than io_pct of a period: their device completions are io_uring task work of the
// thread that submitted them (a ring thread), so an idle-class ring that waits behind its
// requester delays every completion, and the disk sees fewer I/Os in flight (docs/results.md,
// "Ring threads in SCHED_OTHER while I/O is in flight"). It returns to SCHED_IDLE after ten
// periods with none in flight, whatever it waited: the requests that follow (metadata, one at
// a time) are the ones SCHED_IDLE serves best.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <stop_token>
#include <thread>
#include <vector>

namespace biofs {

class RingGuard {
 public:
  struct Config {
    unsigned rings = 1;            // ring threads to find (one per CPU)
    unsigned period_ms = 10;
    // Waited this share of a period: back to SCHED_OTHER. A starved idle-class thread waits
    // nearly all of it; one sharing its CPU with a busy requester waits for moments.
    unsigned starved_pct = 75;
    unsigned calm_periods = 10;    // this many periods with under a tenth of it: SCHED_IDLE again
    // Reads and writes in flight that complete on the ring thread's task work; nullptr: the
    // guard looks at starvation only (fuse_uring_sched=idle).
    const std::atomic<unsigned>* async_io = nullptr;
    unsigned io_pct = 10;          // with async_io above zero, waited this share: SCHED_OTHER
    std::string task_dir = "/proc/self/task";
    std::string name_prefix = "fuse-reactor-";
  };
  // Whether this process may move a thread from SCHED_IDLE back to SCHED_OTHER: root, or an
  // RLIMIT_NICE that permits nice 0 (sched_setscheduler(2)). Without it the guard can only
  // report that it could not.
  static bool may_leave_idle();

  explicit RingGuard(const Config& c);
  ~RingGuard();  // stops the watcher; leaves each thread's class as it is
  RingGuard(const RingGuard&) = delete;
  RingGuard& operator=(const RingGuard&) = delete;

  uint64_t boosts() const { return boosts_.load(std::memory_order_relaxed); }    // to SCHED_OTHER
  unsigned boosted() const { return boosted_.load(std::memory_order_relaxed); }  // now in SCHED_OTHER
  uint64_t io_boosts() const { return io_boosts_.load(std::memory_order_relaxed); }    // of them, for I/O
  unsigned io_boosted() const { return io_boosted_.load(std::memory_order_relaxed); }  // now, for I/O
  unsigned watched() const { return watched_.load(std::memory_order_relaxed); }  // ring threads found
  // The first error of sched_setscheduler (an unprivileged daemon may not leave SCHED_IDLE
  // unless RLIMIT_NICE allows nice 0); "" while none.
  std::string error() const;

 private:
  struct Ring {
    pid_t tid;
    int fd;                 // its schedstat, open for the guard's life
    uint64_t last_delay;    // ns
    bool boosted = false;
    bool for_io = false;    // boosted because I/O was in flight (else: starved)
    unsigned calm = 0;
  };
  void run(std::stop_token stop);
  void find_rings();
  void check(Ring& r, bool io_in_flight);
  bool move(Ring& r, bool to_other);

  Config cfg_;
  std::vector<Ring> rings_;
  std::atomic<uint64_t> boosts_{0}, io_boosts_{0};
  std::atomic<unsigned> boosted_{0}, io_boosted_{0}, watched_{0};
  mutable std::mutex mu_;  // error_, and the watcher's sleep
  std::condition_variable_any cv_;
  std::string error_;
  std::jthread thread_;  // last: stopped before the members it reads go
};

}  // namespace biofs
