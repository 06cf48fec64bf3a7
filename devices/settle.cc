#include "settle.h"

// Debian's valgrind package ships the client-request header; without it the requests are no-ops.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

#include <atomic>
#include <chrono>

#include "nvme/uring_util.h"

namespace biofs {

namespace {

std::atomic<bool> g_settle{false};
std::atomic<uint64_t> g_doorbells{0};

uint64_t now_ns() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

class SettleQueue final : public NvmeQueue {
 public:
  explicit SettleQueue(std::unique_ptr<NvmeQueue> inner) : NvmeQueue(inner->name()), inner_(std::move(inner)) {}
  void submit(RqList* rqs, bool commit) override {
    inner_->submit(rqs, commit);
    if (commit) settle();
  }
  void commit() override {
    inner_->commit();
    settle();
  }
  // (g_doorbells counts in settle(): relaxed, uncounted.)
  int reap(IoCompBatch* iob, RqList* failed) override { return inner_->reap(iob, failed); }
  void wait() override { inner_->wait(); }
  void wake() override { inner_->wake(); }

 private:
  // Waits for a completion to be ready (the inner wait() consumes nothing; it returns after
  // REAP_WAIT_MS at most, so a return that took that long is waited again: a ready completion
  // makes the next return immediate). One command per doorbell is what the bench's I/Os make.
  void settle() {
    if (!g_settle.load(std::memory_order_relaxed)) return;
    CALLGRIND_TOGGLE_COLLECT;
    g_doorbells.fetch_add(1, std::memory_order_relaxed);
    for (int tries = 0; tries < 1000; tries++) {  // 10 s at most: then the count will show it
      const uint64_t t0 = now_ns();
      inner_->wait();
      if (now_ns() - t0 < uint64_t(REAP_WAIT_MS) * 900'000) break;
    }
    CALLGRIND_TOGGLE_COLLECT;
  }
  std::unique_ptr<NvmeQueue> inner_;
};

class SettleTransport final : public NvmeTransport {
 public:
  explicit SettleTransport(std::unique_ptr<NvmeTransport> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  uint32_t nsid() const override { return inner_->nsid(); }
  uint32_t max_user_pages() const override { return inner_->max_user_pages(); }
  int admin_cmd(const NvmeCommand& cmd, void* data, uint32_t len) override {
    return inner_->admin_cmd(cmd, data, len);
  }
  Status create_queue(const NvmeQueueParams& p, std::unique_ptr<NvmeQueue>* out) override {
    out->reset();
    std::unique_ptr<NvmeQueue> inner;
    if (Status s = inner_->create_queue(p, &inner); !s.ok()) return s;
    *out = std::make_unique<SettleQueue>(std::move(inner));
    return Status();
  }

 private:
  std::unique_ptr<NvmeTransport> inner_;
};

}  // namespace

std::unique_ptr<NvmeTransport> make_settle_transport(std::unique_ptr<NvmeTransport> inner) {
  return std::make_unique<SettleTransport>(std::move(inner));
}

void set_settling(bool on) { g_settle.store(on, std::memory_order_relaxed); }

uint64_t settled_doorbells() { return g_doorbells.load(std::memory_order_relaxed); }

}  // namespace biofs
