// Counterpart of the per-CPU disk statistics (block/blk-core.c, include/linux/part_stat.h) and
// blk-stat's buckets: per-thread blocks, summed by readers.
#include "percpu_stat.h"

#include <atomic>
#include <bit>
#include <memory>
#include <mutex>

namespace biofs {

namespace {

// One writer (the owning thread): a relaxed load and store, no locked instruction.
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

struct ThreadBlock {
  std::atomic<uint64_t> ios[3]{}, bytes[3]{}, errors{0}, clones{0};  // one cache line, every I/O
  // NR_STAGES x STAT_HIST_BUCKETS, made at the thread's first sample: threads that never
  // sample (most completion-only threads) carry 40 KiB less.
  std::atomic<std::atomic<uint64_t>*> hist{nullptr};
  std::atomic<uint64_t> flushes{0}, fua_writes{0};  // blk-flush's slow path only
  ~ThreadBlock() { delete[] hist.load(std::memory_order_relaxed); }
};

struct Registry {
  std::mutex lock;
  std::vector<ThreadBlock*> live;  // guarded by lock
  BlkStatSnapshot retired;         // guarded by lock: blocks of threads that exited
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may exit after static teardown
  return *r;
}

void add_block(BlkStatSnapshot* s, const ThreadBlock& b) {
  for (int i = 0; i < 3; i++) {
    s->ios[i] += b.ios[i].load(std::memory_order_relaxed);
    s->bytes[i] += b.bytes[i].load(std::memory_order_relaxed);
  }
  s->errors += b.errors.load(std::memory_order_relaxed);
  s->clones += b.clones.load(std::memory_order_relaxed);
  s->flushes += b.flushes.load(std::memory_order_relaxed);
  s->fua_writes += b.fua_writes.load(std::memory_order_relaxed);
  const std::atomic<uint64_t>* h = b.hist.load(std::memory_order_acquire);
  if (!h) return;
  for (unsigned st = 0; st < NR_STAGES; st++)
    for (unsigned i = 0; i < STAT_HIST_BUCKETS; i++)
      s->stages[st].buckets[i] += h[st * STAT_HIST_BUCKETS + i].load(std::memory_order_relaxed);
}

constinit thread_local ThreadBlock* tls_block = nullptr;
constinit thread_local bool tls_block_gone = false;
ThreadBlock g_sink;  // for records made during a thread's teardown: counted nowhere

struct BlockExit {
  ~BlockExit() {
    ThreadBlock* b = tls_block;
    tls_block = nullptr;
    tls_block_gone = true;
    if (!b) return;
    Registry& r = registry();
    {
      std::lock_guard guard(r.lock);
      add_block(&r.retired, *b);
      std::erase(r.live, b);
    }
    delete b;
  }
};
thread_local BlockExit tls_block_exit;

[[gnu::noinline]] ThreadBlock* attach_block() {
  if (tls_block_gone) return &g_sink;
  (void)&tls_block_exit;  // registers the exit hook for this thread
  auto* b = new ThreadBlock;
  Registry& r = registry();
  {
    std::lock_guard guard(r.lock);
    r.live.push_back(b);
  }
  tls_block = b;
  return b;
}

inline ThreadBlock* this_block() {
  ThreadBlock* b = tls_block;
  if (!b) [[unlikely]]
    b = attach_block();
  return b;
}

}  // namespace

const char* stage_name(unsigned stage) {
  static const char* const names[NR_STAGES] = {"bio_alloc_hit", "bio_alloc_miss", "split", "tag",
                                               "plug_flush", "submit", "complete", "reply",
                                               "request_total"};
  return stage < NR_STAGES ? names[stage] : "?";
}

unsigned stat_hist_bucket(uint64_t ns) {
  if (ns < 8) return unsigned(ns);
  const unsigned e = unsigned(std::bit_width(ns)) - 1;  // 3..63
  return (e - 2) * 8 + unsigned((ns >> (e - 3)) & 7);
}

uint64_t stat_hist_lower(unsigned bucket) {
  if (bucket < 8) return bucket;
  const unsigned e = bucket / 8 + 2, sub = bucket % 8;
  return uint64_t(8 + sub) << (e - 3);
}

uint64_t stat_hist_upper(unsigned bucket) {
  if (bucket + 1 >= STAT_HIST_BUCKETS) return UINT64_MAX;
  return stat_hist_lower(bucket + 1) - 1;
}

uint64_t StageHist::count() const {
  uint64_t n = 0;
  for (uint64_t c : buckets) n += c;
  return n;
}

uint64_t StageHist::quantile(double q) const {
  const uint64_t n = count();
  if (!n) return 0;
  // The rank of the quantile, 1-based: the smallest value with at least q*n values at or below.
  uint64_t rank = uint64_t(q * double(n) + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  uint64_t seen = 0;
  for (unsigned i = 0; i < STAT_HIST_BUCKETS; i++) {
    seen += buckets[i];
    if (seen >= rank) return stat_hist_lower(i) + (stat_hist_upper(i) - stat_hist_lower(i)) / 2;
  }
  return 0;
}

StageHist& StageHist::operator-=(const StageHist& o) {
  for (unsigned i = 0; i < STAT_HIST_BUCKETS; i++)
    buckets[i] = buckets[i] >= o.buckets[i] ? buckets[i] - o.buckets[i] : 0;
  return *this;
}

BlkStatSnapshot blk_stat_snapshot() {
  Registry& r = registry();
  std::lock_guard guard(r.lock);
  BlkStatSnapshot s = r.retired;
  for (const ThreadBlock* b : r.live) add_block(&s, *b);
  return s;
}

size_t blk_stat_live_threads() {
  Registry& r = registry();
  std::lock_guard guard(r.lock);
  return r.live.size();
}

void blk_stat_account_done(req_op op, uint32_t bytes, bool error) {
  ThreadBlock* b = this_block();
  const int i = op == REQ_OP_READ ? 0 : op == REQ_OP_WRITE ? 1 : 2;
  bump(b->ios[i]);
  bump(b->bytes[i], bytes);
  if (error) [[unlikely]]
    bump(b->errors);
}

void blk_stat_count_clone() { bump(this_block()->clones); }
void blk_stat_count_flush() { bump(this_block()->flushes); }
void blk_stat_count_fua() { bump(this_block()->fua_writes); }

void blk_stat_record(Stage stage, uint64_t ns) {
  ThreadBlock* b = this_block();
  std::atomic<uint64_t>* h = b->hist.load(std::memory_order_relaxed);
  if (!h) [[unlikely]] {
    if (b == &g_sink) return;
    h = new std::atomic<uint64_t>[NR_STAGES * STAT_HIST_BUCKETS]();
    b->hist.store(h, std::memory_order_release);
  }
  bump(h[stage * STAT_HIST_BUCKETS + stat_hist_bucket(ns)]);
}

}  // namespace biofs
