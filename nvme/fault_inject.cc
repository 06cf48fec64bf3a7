// Fault injection under the driver (see fault_inject.h): decisions, and the queue wrapper that
// fails, delays or times out commands and releases held completions from its reaper, as
// nvme_timeout() ends an expired command from the host side.
#include "fault_inject.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "uring_util.h"

namespace biofs {

namespace {

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint32_t FaultInjector::threshold(double p) {
  if (p <= 0) return 0;
  if (p >= 1) return UINT32_MAX;
  return uint32_t(std::llround(p * 4294967296.0));
}

void FaultInjector::set(const FaultConfig& cfg) {
  fail_read_.store(threshold(cfg.fail_read), std::memory_order_relaxed);
  fail_write_.store(threshold(cfg.fail_write), std::memory_order_relaxed);
  fail_flush_.store(threshold(cfg.fail_flush), std::memory_order_relaxed);
  delay_.store(threshold(cfg.delay), std::memory_order_relaxed);
  timeout_.store(threshold(cfg.timeout), std::memory_order_relaxed);
  delay_us_.store(cfg.delay_us, std::memory_order_relaxed);
  timeout_ms_.store(cfg.timeout_ms, std::memory_order_relaxed);
  dont_retry_.store(cfg.dont_retry, std::memory_order_relaxed);
  seed_.store(cfg.seed, std::memory_order_relaxed);
  after_.store(cfg.after, std::memory_order_relaxed);
  seq_.store(0, std::memory_order_relaxed);
}

FaultConfig FaultInjector::config() const {
  auto frac = [](uint32_t t) { return t == UINT32_MAX ? 1.0 : double(t) / 4294967296.0; };
  FaultConfig c;
  c.fail_read = frac(fail_read_.load(std::memory_order_relaxed));
  c.fail_write = frac(fail_write_.load(std::memory_order_relaxed));
  c.fail_flush = frac(fail_flush_.load(std::memory_order_relaxed));
  c.delay = frac(delay_.load(std::memory_order_relaxed));
  c.timeout = frac(timeout_.load(std::memory_order_relaxed));
  c.delay_us = delay_us_.load(std::memory_order_relaxed);
  c.timeout_ms = timeout_ms_.load(std::memory_order_relaxed);
  c.dont_retry = dont_retry_.load(std::memory_order_relaxed);
  c.seed = seed_.load(std::memory_order_relaxed);
  c.after = after_.load(std::memory_order_relaxed);
  return c;
}

FaultCounters FaultInjector::counters() const {
  FaultCounters c;
  c.commands = seq_.load(std::memory_order_relaxed);
  c.failed = failed_.load(std::memory_order_relaxed);
  c.delayed = delayed_.load(std::memory_order_relaxed);
  c.timed_out = timed_out_.load(std::memory_order_relaxed);
  return c;
}

FaultInjector::Decision FaultInjector::decide(uint8_t opcode) {
  Decision d;
  const uint64_t n = seq_.fetch_add(1, std::memory_order_relaxed);
  if (n < after_.load(std::memory_order_relaxed)) return d;
  const uint64_t seed = seed_.load(std::memory_order_relaxed);
  // Three independent draws from one seeded stream position: fail, timeout, delay.
  const uint64_t r = splitmix64(seed * 0x100000001B3ull + n);
  const uint32_t r_fail = uint32_t(r), r_to = uint32_t(r >> 32), r_delay = uint32_t(splitmix64(r));
  uint32_t fail_t = 0;
  uint16_t status = NVME_SC_INTERNAL;
  switch (opcode) {
    case nvme_cmd_read:
      fail_t = fail_read_.load(std::memory_order_relaxed), status = NVME_SC_READ_ERROR;
      break;
    case nvme_cmd_write:
    case nvme_cmd_write_zeroes:
      fail_t = fail_write_.load(std::memory_order_relaxed), status = NVME_SC_WRITE_FAULT;
      break;
    case nvme_cmd_flush:
      fail_t = fail_flush_.load(std::memory_order_relaxed), status = NVME_SC_INTERNAL;
      break;
    default:
      break;
  }
  auto hit = [](uint32_t r32, uint32_t t) { return t == UINT32_MAX || r32 < t; };
  if (fail_t && hit(r_fail, fail_t)) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    d.kind = FAIL, d.status = status;
  } else if (const uint32_t t = timeout_.load(std::memory_order_relaxed); t && hit(r_to, t)) {
    timed_out_.fetch_add(1, std::memory_order_relaxed);
    d.kind = TIMEOUT, d.status = NVME_SC_HOST_ABORTED_CMD;
    d.hold_ns = uint64_t(timeout_ms_.load(std::memory_order_relaxed)) * 1'000'000;
  } else if (const uint32_t t2 = delay_.load(std::memory_order_relaxed); t2 && hit(r_delay, t2)) {
    delayed_.fetch_add(1, std::memory_order_relaxed);
    d.kind = DELAY;
    d.hold_ns = uint64_t(delay_us_.load(std::memory_order_relaxed)) * 1000;
  }
  if (d.status && dont_retry_.load(std::memory_order_relaxed)) d.status |= NVME_STATUS_DNR;
  return d;
}

namespace {

// One wrapped queue. Completions the inner queue reports for delayed or timed-out commands,
// and commands failed without reaching the device, wait in `held_` until their time.
class FaultQueue final : public NvmeQueue {
 public:
  FaultQueue(std::unique_ptr<NvmeQueue> inner, FaultInjector* inj, unsigned depth)
      : NvmeQueue(inner->name()), inner_(std::move(inner)), inj_(inj), slots_(depth) {}

  void submit(RqList* rqs, bool commit) override;
  void commit() override { inner_->commit(); }
  int reap(IoCompBatch* iob, RqList* failed) override;
  bool completed_in_submit() const override { return inner_->completed_in_submit(); }
  void wait() override;
  void wake() override;

 private:
  struct Slot {  // per command id: what to do when the device completes it
    std::atomic<uint64_t> due_ns{0};  // 0: complete at once
    std::atomic<uint16_t> status{0};
  };
  struct Held {
    Request* rq;
    uint64_t due_ns;
    uint16_t status;
  };
  void hold(Request* rq, uint64_t due, uint16_t status) {
    std::lock_guard g(lock_);
    held_.push_back({rq, due, status});
  }

  std::unique_ptr<NvmeQueue> inner_;
  FaultInjector* inj_;
  std::vector<Slot> slots_;
  std::atomic<uint64_t> inner_inflight_{0};
  std::mutex lock_;  // held_, woken_
  std::condition_variable cv_;
  std::vector<Held> held_;
  bool woken_ = false;
};

void FaultQueue::submit(RqList* rqs, bool commit) {
  RqList fwd;
  bool failed_any = false;
  unsigned n = 0;
  while (Request* rq = rqs->pop()) {
    NvmeIod* iod = nvme_iod(rq);
    const FaultInjector::Decision d = inj_->decide(iod->cmd.opcode);
    const unsigned cid = iod->cmd.command_id;
    if (d.kind == FaultInjector::FAIL || cid >= slots_.size()) {
      // (A command id beyond the depth cannot be tracked: it fails too, loudly.)
      hold(rq, 0, d.kind == FaultInjector::FAIL ? d.status : uint16_t(NVME_SC_INTERNAL));
      failed_any = true;
      continue;
    }
    slots_[cid].due_ns.store(d.hold_ns ? now_ns() + d.hold_ns : 0, std::memory_order_relaxed);
    slots_[cid].status.store(d.kind == FaultInjector::TIMEOUT ? d.status : 0, std::memory_order_relaxed);
    fwd.add_tail(rq);
    n++;
  }
  inner_inflight_.fetch_add(n, std::memory_order_relaxed);
  inner_->submit(&fwd, commit);
  unsigned left = 0;
  for (Request* rq = fwd.head; rq; rq = rq->rq_next) left++;
  inner_inflight_.fetch_sub(left, std::memory_order_relaxed);
  *rqs = fwd;  // what the ring could not take stays with the caller, in order
  if (failed_any) {
    {
      std::lock_guard g(lock_);
      woken_ = true;
    }
    cv_.notify_all();
    inner_->wake();  // a completion thread blocked on the ring comes for the failed ones
  }
}

int FaultQueue::reap(IoCompBatch* iob, RqList* failed) {
  IoCompBatch done;
  RqList inner_failed;
  const int n = inner_->reap(&done, &inner_failed);
  if (n > 0) inner_inflight_.fetch_sub(uint64_t(n), std::memory_order_relaxed);
  const uint64_t now = now_ns();
  int count = 0;
  while (Request* rq = done.req_list.pop()) {
    Slot& s = slots_[nvme_iod(rq)->cmd.command_id];
    // Held from submission: a timeout counts from when the command was sent.
    if (const uint64_t due = s.due_ns.load(std::memory_order_relaxed)) {
      hold(rq, due, s.status.load(std::memory_order_relaxed));
      continue;
    }
    blk_mq_add_to_batch(rq, iob, BLK_STS_OK);
    count++;
  }
  while (Request* rq = inner_failed.pop()) {  // a real error: passed on as it is
    failed->add_tail(rq);
    count++;
  }
  std::vector<Held> due;
  {
    std::lock_guard g(lock_);
    for (size_t i = 0; i < held_.size();) {
      if (held_[i].due_ns <= now) {
        due.push_back(held_[i]);
        held_[i] = held_.back();
        held_.pop_back();
      } else {
        i++;
      }
    }
  }
  for (const Held& h : due) {
    if (h.status == NVME_SC_SUCCESS) {
      h.rq->status = BLK_STS_OK;
      blk_mq_add_to_batch(h.rq, iob, BLK_STS_OK);
    } else {
      fail(nvme_iod(h.rq), h.status, failed);  // logged and mapped like a device error
    }
    count++;
  }
  return count;
}

void FaultQueue::wait() {
  uint64_t earliest = UINT64_MAX;
  {
    std::lock_guard g(lock_);
    for (const Held& h : held_) earliest = std::min(earliest, h.due_ns);
  }
  if (earliest == UINT64_MAX || inner_inflight_.load(std::memory_order_relaxed)) {
    inner_->wait();  // returns within REAP_WAIT_MS, soon enough for a held completion
    return;
  }
  // Only held completions: sleep until the first is due (or a wake()).
  const uint64_t now = now_ns();
  if (earliest <= now) return;
  const uint64_t wait_ns = std::min<uint64_t>(earliest - now, uint64_t(REAP_WAIT_MS) * 1'000'000);
  std::unique_lock g(lock_);
  cv_.wait_for(g, std::chrono::nanoseconds(wait_ns), [this] { return woken_; });
  woken_ = false;
}

void FaultQueue::wake() {
  {
    std::lock_guard g(lock_);
    woken_ = true;
  }
  cv_.notify_all();
  inner_->wake();
}

}  // namespace

FaultTransport::FaultTransport(std::unique_ptr<NvmeTransport> inner, const FaultConfig& cfg)
    : inner_(std::move(inner)), injector_(cfg) {}

Status FaultTransport::create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) {
  out->reset();
  std::unique_ptr<NvmeQueue> inner;
  if (Status s = inner_->create_queue(p, &inner); !s.ok()) return s;
  *out = std::make_unique<FaultQueue>(std::move(inner), &injector_, p.depth);
  return Status();
}

}  // namespace biofs
