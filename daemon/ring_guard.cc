#include "ring_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "lib/background_thread.h"

namespace biofs {

bool RingGuard::may_leave_idle() {
  if (geteuid() == 0) return true;
  rlimit rl;
  return getrlimit(RLIMIT_NICE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 20);
}

RingGuard::RingGuard(const Config& c) : cfg_(c) {
  thread_ = start_background_thread("biofs-ringguard", [this](std::stop_token stop) { run(stop); });
}

RingGuard::~RingGuard() {
  stop_background_thread(thread_);
  for (Ring& r : rings_) close(r.fd);
}

std::string RingGuard::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

void RingGuard::run(std::stop_token stop) {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait_for(l, stop, std::chrono::milliseconds(cfg_.period_ms), [] { return false; });
    if (stop.stop_requested()) return;
    l.unlock();
    if (rings_.size() < cfg_.rings) find_rings();  // the rings start after the mount
    const bool io = cfg_.async_io && cfg_.async_io->load(std::memory_order_relaxed) > 0;
    for (Ring& r : rings_) check(r, io);
    l.lock();
  }
}

// The run delay of a schedstat line: "exec_ns delay_ns timeslices".
static bool read_delay(int fd, uint64_t* delay) {
  char buf[96];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  char* end;
  std::strtoull(buf, &end, 10);
  *delay = std::strtoull(end, nullptr, 10);
  return true;
}

void RingGuard::find_rings() {
  DIR* d = opendir(cfg_.task_dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const pid_t tid = pid_t(std::atol(e->d_name));
    if (tid <= 0) continue;
    bool known = false;
    for (const Ring& r : rings_) known |= r.tid == tid;
    if (known) continue;
    std::string comm;
    std::getline(std::ifstream(cfg_.task_dir + "/" + e->d_name + "/comm"), comm);
    if (comm.rfind(cfg_.name_prefix, 0) != 0) continue;
    const int fd = open((cfg_.task_dir + "/" + e->d_name + "/schedstat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    uint64_t delay;
    if (!read_delay(fd, &delay)) {
      close(fd);
      continue;
    }
    rings_.push_back(Ring{tid, fd, delay});
  }
  closedir(d);
  watched_.store(unsigned(rings_.size()), std::memory_order_relaxed);
}

void RingGuard::check(Ring& r, bool io_in_flight) {
  uint64_t delay;
  if (!read_delay(r.fd, &delay)) return;  // the thread has ended (unmount)
  const uint64_t waited = delay - r.last_delay;
  r.last_delay = delay;
  const uint64_t period = uint64_t(cfg_.period_ms) * 1000000;
  const uint64_t starved = period * cfg_.starved_pct / 100;
  if (!r.boosted) {
    if (waited > starved) {
      move(r, true);
    } else if (io_in_flight && waited > period * cfg_.io_pct / 100 && move(r, true)) {
      r.for_io = true;
      io_boosts_.fetch_add(1, std::memory_order_relaxed);
      io_boosted_.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  const bool calm = r.for_io ? !io_in_flight : waited < starved / 10;
  r.calm = calm ? r.calm + 1 : 0;
  if (r.calm < cfg_.calm_periods || !move(r, false)) return;
  if (r.for_io) io_boosted_.fetch_sub(1, std::memory_order_relaxed);
  r.for_io = false;
}

// Moves a ring to SCHED_OTHER or back to SCHED_IDLE; false (the first error kept) if it could not.
bool RingGuard::move(Ring& r, bool to_other) {
  const sched_param p{0};
  if (sched_setscheduler(r.tid, to_other ? SCHED_OTHER : SCHED_IDLE, &p) != 0) {
    std::lock_guard<std::mutex> l(mu_);
    if (error_.empty())
      error_ = std::string("cannot move FUSE ring thread ") + std::to_string(r.tid) + " to " +
               (to_other ? "SCHED_OTHER" : "SCHED_IDLE") + ": " + strerror(errno);
    return false;
  }
  r.boosted = to_other;
  r.calm = 0;
  if (to_other) {
    boosts_.fetch_add(1, std::memory_order_relaxed);
    boosted_.fetch_add(1, std::memory_order_relaxed);
  } else {
    boosted_.fetch_sub(1, std::memory_order_relaxed);
  }
  return true;
}

}  // namespace biofs
