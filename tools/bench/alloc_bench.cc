// `biofs-bench alloc`: what the per-CPU bio cache buys on the allocation path.
//
// Three shapes of work, each run with the cache off, on (v6.18's put form) and home (puts go back
// to the allocating thread's cache) in the same process, the order rotating every repeat so drift
// hits all three equally:
//   local  1 thread   allocate a batch of bios, put them all, repeat (the submit/complete
//                     pattern of one t/io_uring thread, batch = its submit batch)
//   local  N threads  the same on every CPU at once, one set shared by all
//   remote 2 threads  one thread allocates, another puts (the cache patch's worst case: allocate on
//                     CPU A, free on CPU B); batches cross through a lock-free ring. `on` frees
//                     them there (no cache is on CPU B, as the kernel's IRQ list on B fills
//                     and frees); `home` sends them back to A's cache
// A fourth line prices the per-CPU choice itself: the cost of finding the calling thread's
// cache domain, against sched_getcpu(), the alternative.
#include "alloc_bench.h"

#include <sched.h>
#include <stdexcept>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/bio_set.h"
#include "blockcore/toggles.h"
#include "json.h"
#include "cli.h"
#include "stats.h"

namespace biofs::bench {
namespace {

struct Config {
  unsigned batch = 32;
  double seconds = 0.3;
  unsigned repeats = 5;
  unsigned threads = 2;
  uint16_t nr_vecs = 1;
  AllocatorKind allocator = Allocator::default_kind();
  bool json = false;
};

struct Result {
  double ns_per_op = 0;
  uint64_t ops = 0;
  BioCacheCounters cache;
};

// One thread's loop: allocate `batch`, put `batch`, until the deadline.
uint64_t local_loop(BioSet& bs, const Config& cfg, uint64_t deadline) {
  std::vector<Bio*> bios(cfg.batch);
  uint64_t ops = 0;
  do {
    for (unsigned i = 0; i < cfg.batch; i++)
      bios[i] = bio_alloc_bioset(nullptr, cfg.nr_vecs, REQ_OP_READ, GFP_KERNEL, &bs);
    for (unsigned i = 0; i < cfg.batch; i++) bio_put(bios[i]);
    ops += cfg.batch;
  } while (now_ns() < deadline);
  return ops;
}

Result run_local(BioCache cache, unsigned threads, const Config& cfg) {
  BioSet bs(64, 0, BIOSET_NEED_BVECS | bio_cache_flags(cache), cfg.allocator);
  if (int e = bs.init(); e) throw std::runtime_error(bioset_init_error(e));
  std::atomic<uint64_t> total{0};
  std::atomic<unsigned> ready{0};
  std::atomic<uint64_t> start_at{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      pin_to_cpu(int(t));
      local_loop(bs, cfg, now_ns() + 20'000'000);  // warm up: fill caches and heaps
      ready++;
      while (start_at.load() == 0) std::this_thread::yield();
      total += local_loop(bs, cfg, start_at.load() + uint64_t(cfg.seconds * 1e9));
    });
  while (ready.load() < threads) std::this_thread::yield();
  const uint64_t t0 = now_ns();
  start_at = t0;
  for (auto& t : ts) t.join();
  const double elapsed = double(now_ns() - t0);
  Result r;
  r.ops = total;
  r.ns_per_op = elapsed * threads / double(total);  // per thread: ns of one CPU per pair
  r.cache = bs.stats().total;
  return r;
}

// Single-producer single-consumer ring of bio pointers.
class Ring {
 public:
  explicit Ring(unsigned order) : mask_((1u << order) - 1), slots_(1u << order) {}
  bool push(Bio* const* bios, unsigned n) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail + n - head_.load(std::memory_order_acquire) > slots_.size()) return false;
    for (unsigned i = 0; i < n; i++) slots_[(tail + i) & mask_] = bios[i];
    tail_.store(tail + n, std::memory_order_release);
    return true;
  }
  template <typename Fn>
  unsigned pop_all(Fn&& fn) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t tail = tail_.load(std::memory_order_acquire);
    for (uint64_t i = head; i < tail; i++) fn(slots_[i & mask_]);
    head_.store(tail, std::memory_order_release);
    return unsigned(tail - head);
  }

 private:
  const unsigned mask_;
  std::vector<Bio*> slots_;
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

Result run_remote(BioCache cache, const Config& cfg) {
  BioSet bs(64, 0, BIOSET_NEED_BVECS | bio_cache_flags(cache), cfg.allocator);
  if (int e = bs.init(); e) throw std::runtime_error(bioset_init_error(e));
  Ring ring(12);
  std::atomic<bool> producing{true};
  std::atomic<uint64_t> put{0};
  std::thread consumer([&] {
    pin_to_cpu(1);
    uint64_t n = 0;
    for (;;) {
      const bool last = !producing.load(std::memory_order_acquire);
      const unsigned got = ring.pop_all([](Bio* b) { bio_put(b); });
      n += got;
      if (last && got == 0) break;
    }
    put = n;
  });
  pin_to_cpu(0);
  std::vector<Bio*> batch(cfg.batch);
  uint64_t ops = 0;
  const uint64_t warm = now_ns() + 20'000'000;
  uint64_t t0 = 0, deadline = ~0ull, ops_at_start = 0;
  for (;;) {
    for (unsigned i = 0; i < cfg.batch; i++)
      batch[i] = bio_alloc_bioset(nullptr, cfg.nr_vecs, REQ_OP_READ, GFP_KERNEL, &bs);
    while (!ring.push(batch.data(), cfg.batch)) std::this_thread::yield();
    ops += cfg.batch;
    const uint64_t now = now_ns();
    if (!t0 && now >= warm) {
      t0 = now;
      ops_at_start = ops;
      deadline = t0 + uint64_t(cfg.seconds * 1e9);
    }
    if (now >= deadline) break;
  }
  const double elapsed = double(now_ns() - t0);
  producing.store(false, std::memory_order_release);
  consumer.join();
  Result r;
  r.ops = ops - ops_at_start;
  r.ns_per_op = elapsed / double(r.ops);  // wall ns per bio through the pipeline
  r.cache = bs.stats().total;
  return r;
}

// Cost of the per-CPU decision: finding this thread's domain vs asking for the CPU number.
void price_domain_lookup(const Config& cfg) {
  BioSet bs(4, 0, BIOSET_PERCPU_CACHE, cfg.allocator);
  if (int e = bs.init(); e) throw std::runtime_error(bioset_init_error(e));
  constexpr int kCalls = 20'000'000;
  uintptr_t sink = 0;
  uint64_t t0 = now_ns();
  for (int i = 0; i < kCalls; i++) {
    sink += reinterpret_cast<uintptr_t>(bs.this_thread_cache());
    asm volatile("" ::: "memory");
  }
  const double tls_ns = double(now_ns() - t0) / kCalls;
  t0 = now_ns();
  for (int i = 0; i < kCalls; i++) sink += unsigned(sched_getcpu());
  const double cpu_ns = double(now_ns() - t0) / kCalls;
  if (cfg.json) {
    print_line({{"kind", "domain_lookup"}, {"per_thread_ns", fixed(tls_ns, 2)}, {"sched_getcpu_ns", fixed(cpu_ns, 2)}});
  } else {
    std::printf("\ncache domain lookup: per-thread slot %.2f ns, sched_getcpu() %.2f ns (sink %lu)\n",
                tls_ns, cpu_ns, (unsigned long)(sink & 1));
  }
}

struct Case {
  const char* mode;  // "alloc+put"
  const char* free;  // local | remote
  unsigned threads;
};

}  // namespace

int alloc_main(int argc, char** argv) {
  Config cfg;
  CLI::App app("biofs-bench alloc: the cost of bio_alloc_bioset + bio_put, bio cache off vs on, interleaved",
               "biofs-bench alloc");
  cfg.threads = unsigned(online_cpus());
  app.add_option("--batch", cfg.batch, "bios allocated, then put, per round")->check(CLI::Range(1u, 4096u))->capture_default_str();
  app.add_option("--seconds", cfg.seconds, "per measurement")->check(CLI::Range(0.01, 600.0))->capture_default_str();
  app.add_option("--repeats", cfg.repeats, "interleaved repeats")->check(CLI::Range(1u, 1000u))->capture_default_str();
  app.add_option("--threads", cfg.threads, "threads of the `local` case")->check(CLI::Range(1u, 1024u))->capture_default_str();
  app.add_option("--nr-vecs", cfg.nr_vecs, "vecs per bio")->check(CLI::Range(uint16_t(0), uint16_t(BIO_INLINE_VECS)))->capture_default_str();
  std::string alloc = allocator_kind_name(Allocator::default_kind());
  app.add_option("--allocator", alloc, "the bio set's allocator")->check(CLI::IsMember({"tbb", "system"}))->capture_default_str();
  app.add_flag("--json", cfg.json, "one JSON object per measurement");
  if (const int rc = parse_cli(app, argc, argv); rc >= 0) return rc;
  cfg.allocator = alloc == "tbb" ? AllocatorKind::tbb : AllocatorKind::system;

  const Case cases[] = {{"alloc+put", "local", 1}, {"alloc+put", "local", cfg.threads}, {"alloc+put", "remote", 2}};
  const size_t ncases = cfg.threads == 1 ? 1 : 3;
  BioSet probe(1, 0, 0, cfg.allocator);
  if (int e = probe.init(); e) throw std::runtime_error(bioset_init_error(e));
  if (!cfg.json) {
    std::printf("biofs-bench alloc: batch=%u seconds=%.2f repeats=%u nr_vecs=%u allocator=%s cpus=%d\n",
                cfg.batch, cfg.seconds, cfg.repeats, cfg.nr_vecs, allocator_kind_name(cfg.allocator),
                online_cpus());
    std::printf("sizeof(Bio)=%zu bytes, per-bio allocation=%zu bytes, cache worst case=%u bios = %zu KiB per domain\n",
                sizeof(Bio), probe.bio_alloc_size(), ALLOC_CACHE_MAX,
                ALLOC_CACHE_MAX * probe.bio_alloc_size() / 1024);
    std::printf("threads pinned to CPUs 0..n-1 (remote: allocator on CPU 0, putter on CPU 1)\n");
  }

  constexpr BioCache kModes[3] = {BioCache::off, BioCache::on, BioCache::home};
  std::vector<double> ns[3][3];
  std::vector<double> hit_rate[3][3];
  for (unsigned rep = 0; rep < cfg.repeats; rep++) {
    for (size_t c = 0; c < ncases; c++) {
      for (unsigned k = 0; k < 3; k++) {
        const unsigned m = (k + rep) % 3;  // off,on,home / on,home,off / home,off,on
        const Case& cs = cases[c];
        const Result r = std::string(cs.free) == "remote" ? run_remote(kModes[m], cfg)
                                                          : run_local(kModes[m], cs.threads, cfg);
        ns[c][m].push_back(r.ns_per_op);
        const uint64_t eligible = r.cache.alloc_hits + r.cache.alloc_misses;
        if (eligible) hit_rate[c][m].push_back(double(r.cache.alloc_hits) / double(eligible));
        if (cfg.json)
          print_line({{"kind", "run"}, {"mode", cs.mode}, {"free", cs.free}, {"threads", cs.threads},
                      {"bio_cache", bio_cache_name(kModes[m])}, {"repeat", rep}, {"ns_per_op", fixed(r.ns_per_op, 3)},
                      {"ops", r.ops}, {"cache_hits", r.cache.alloc_hits}, {"cache_misses", r.cache.alloc_misses},
                      {"remote_puts", r.cache.put_remote}, {"splices", r.cache.splices}});
      }
    }
  }

  if (!cfg.json)
    std::printf("\n%-10s %-7s %7s %10s %10s %10s %8s %8s %8s %8s %8s\n", "mode", "free", "threads", "off ns", "on ns",
                "home ns", "off/on", "home/on", "spread", "hits on", "home");
  for (size_t c = 0; c < ncases; c++) {
    const double off = median(ns[c][0]), on = median(ns[c][1]), home = median(ns[c][2]);
    const double sp = std::max({spread(ns[c][0]), spread(ns[c][1]), spread(ns[c][2])});
    const double hr_on = median(hit_rate[c][1]), hr_home = median(hit_rate[c][2]);
    if (cfg.json)
      print_line({{"kind", "median"}, {"mode", cases[c].mode}, {"free", cases[c].free},
                  {"threads", cases[c].threads}, {"off_ns_per_op", fixed(off, 3)}, {"on_ns_per_op", fixed(on, 3)},
                  {"home_ns_per_op", fixed(home, 3)}, {"ratio_off_on", fixed(off / on, 3)},
                  {"ratio_home_on", fixed(home / on, 3)}, {"spread", fixed(sp, 3)},
                  {"hit_rate", fixed(hr_on, 4)}, {"hit_rate_home", fixed(hr_home, 4)}});
    else
      std::printf("%-10s %-7s %7u %10.2f %10.2f %10.2f %7.2fx %7.2fx %7.1f%% %7.1f%% %7.1f%%\n", cases[c].mode,
                  cases[c].free, cases[c].threads, off, on, home, off / on, home / on, sp * 100, hr_on * 100,
                  hr_home * 100);
  }
  price_domain_lookup(cfg);
  return 0;
}

}  // namespace biofs::bench
