// `biofs-bench [io]`: t/io_uring for the block core. Each submitter thread keeps `depth` bios in
// flight: it allocates a batch of bios, submits them under one plug (so tags come in batches),
// and counts completions, which arrive inline (null irqmode=none) or from the device's
// completion thread. Prints t/io_uring's lines (IOPS=…, BW=…, IOS/call=s/c, Maximum IOPS=…);
// `--ab TOGGLE` runs a toggle's two values interleaved and prints medians and the ratio. Each
// run also reports CPU time per completed I/O (process and submitter thread CPU clocks).
#include "io_bench.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/blk_mq.h"
#include "blockcore/null_blk.h"
#include "blockcore/toggles.h"
#include "devices/open_device.h"
#include "json.h"
#include "cli.h"
#include "stats.h"

namespace biofs::bench {
namespace {

struct Options {
  std::vector<std::string> devices{"null"};
  unsigned depth = 128, bs = 4096, submit = 32, complete = 32, threads = 1;
  double runtime = 3;
  unsigned queues = 1, qd = 256;
  NullBlkConfig::IrqMode irqmode = NullBlkConfig::IrqMode::none;
  uint64_t completion_nsec = 10'000;
  uint32_t chunk_sectors = 256;  // stripe chunk: 128 KiB
  Toggles toggles;
  bool random = true, write = false;
  std::string ab;  // toggle to compare
  std::string ab_a, ab_b;
  unsigned repeats = 3;
  bool json = false, quiet = false;
};

// The devices one run uses (devices/open_device.h knows every device string).
struct Devices {
  std::vector<std::unique_ptr<Device>> opened;
  std::vector<BlockDevice*> targets;  // what submitters aim at

  explicit Devices(const Options& o) {
    DeviceOptions d;
    d.queues = o.queues;
    d.qd = o.qd;
    d.toggles = o.toggles;
    d.null_irqmode = o.irqmode;
    d.null_completion_nsec = o.completion_nsec;
    d.stripe_chunk_sectors = o.chunk_sectors;
    for (const std::string& spec : o.devices) {
      opened.push_back(open_device(spec, d));
      targets.push_back(opened.back()->bdev());
    }
  }
  QueueCounters counters() const {
    QueueCounters c;
    for (const auto& d : opened)
      for (RequestQueue* q : d->queues()) c += q->counters();
    return c;
  }
};

struct alignas(64) Submitter {
  std::atomic<uint64_t> remote_done{0};  // completions seen on other threads
  uint64_t local_done = 0;               // completions on this thread (plain counter)
  uint64_t submitted = 0, submit_calls = 0, reaps = 0, reaped = 0;
  std::atomic<uint64_t> published{0};    // done count the sampler reads
  uint64_t cpu_ns = 0;                   // the thread's CPU time, set when it ends
  uint64_t rng = 0x9E3779B97F4A7C15ull;
};
thread_local Submitter* tls_submitter = nullptr;

void bench_end_io(Bio* bio) {
  auto* s = static_cast<Submitter*>(bio->bi_private);
  bio_put(bio);  // before counting: the drain at the end trusts the count
  if (s == tls_submitter)
    s->local_done++;
  else
    s->remote_done.fetch_add(1, std::memory_order_release);
}

struct RunResult {
  double iops = 0;            // over the whole run
  double max_iops = 0;        // best one-second sample
  double ios_per_submit = 0, ios_per_reap = 0;
  QueueCounters queue;
  BioCacheCounters cache;
  // CPU time per completed I/O, from CLOCK_PROCESS_CPUTIME_ID (every thread of the process:
  // submitters, completion threads, the sampler) and the submitters' CLOCK_THREAD_CPUTIME_ID.
  double cpu_ns_per_io = 0, submit_cpu_ns_per_io = 0;
};

uint64_t cpu_clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

RunResult run_once(const Options& o, bool print_lines) {
  Devices devs(o);
  BioSet bs(256, 0, BIOSET_NEED_BVECS | (o.toggles.bio_cache ? unsigned(BIOSET_PERCPU_CACHE) : 0u));
  const unsigned pages = (o.bs + PAGE_SIZE - 1) / PAGE_SIZE;
  std::vector<std::unique_ptr<Submitter>> subs;
  for (unsigned t = 0; t < o.threads; t++) subs.push_back(std::make_unique<Submitter>());
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const uint64_t cpu0 = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (unsigned t = 0; t < o.threads; t++) {
    threads.emplace_back([&, t] {
      const uint64_t thread_cpu0 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
      pin_to_cpu(int(t));
      Submitter* s = subs[t].get();
      tls_submitter = s;
      s->rng ^= uint64_t(t + 1) * 0xBF58476D1CE4E5B9ull;
      void* buf = std::aligned_alloc(PAGE_SIZE, size_t(pages) * PAGE_SIZE);
      const blk_opf_t op = o.write ? REQ_OP_WRITE : REQ_OP_READ;
      uint64_t seq = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t done = s->local_done + s->remote_done.load(std::memory_order_relaxed);
        const uint64_t inflight = s->submitted - done;
        const unsigned n = unsigned(std::min<uint64_t>(o.submit, o.depth - inflight));
        if (n) {
          BlkPlug plug;
          blk_start_plug_nr_ios(&plug, (unsigned short)n);
          for (unsigned i = 0; i < n; i++) {
            BlockDevice* bdev = devs.targets[(seq + i) % devs.targets.size()];
            Bio* bio = bio_alloc_bioset(bdev, uint16_t(pages), op, GFP_KERNEL, &bs);
            bio_add_virt(bio, buf, o.bs);
            const uint64_t blocks = (bdev->capacity << SECTOR_SHIFT) / o.bs;
            uint64_t block;
            if (o.random) {
              s->rng ^= s->rng << 13;
              s->rng ^= s->rng >> 7;
              s->rng ^= s->rng << 17;
              block = s->rng % blocks;
            } else {
              block = (seq + i) % blocks;
            }
            bio->bi_iter.bi_sector = block * (o.bs >> SECTOR_SHIFT);
            bio->bi_end_io = bench_end_io;
            bio->bi_private = s;
            submit_bio(bio);
          }
          s->submitted += n;
          s->submit_calls++;
          seq += n;
          blk_finish_plug(&plug);
        }
        const uint64_t after = s->local_done + s->remote_done.load(std::memory_order_relaxed);
        if (after > done) {
          s->reaps++;
          s->reaped += after - done;
        } else if (!n) {
          std::this_thread::yield();  // full and nothing completed yet: wait for the device
        }
        s->published.store(after, std::memory_order_relaxed);
      }
      // Drain: wait for everything in flight before the devices go away.
      while (s->local_done + s->remote_done.load(std::memory_order_acquire) < s->submitted) std::this_thread::yield();
      s->published.store(s->submitted, std::memory_order_relaxed);
      std::free(buf);
      s->cpu_ns = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - thread_cpu0;
      bs.prune_this_thread_cache();
    });
  }

  RunResult r;
  auto total_done = [&] {
    uint64_t d = 0;
    for (auto& s : subs) d += s->published.load(std::memory_order_relaxed);
    return d;
  };
  const uint64_t t0 = now_ns();
  uint64_t last_t = t0, last_done = 0;
  const uint64_t end = t0 + uint64_t(o.runtime * 1e9);
  while (now_ns() < end) {
    const uint64_t step = std::min<uint64_t>(end - now_ns(), 1'000'000'000ull);
    std::this_thread::sleep_for(std::chrono::nanoseconds(step));
    const uint64_t t = now_ns(), d = total_done();
    const double iops = double(d - last_done) * 1e9 / double(t - last_t);
    if (t - last_t > 500'000'000ull) r.max_iops = std::max(r.max_iops, iops);
    if (print_lines) {
      uint64_t sub = 0, calls = 0, reaped = 0, reaps = 0;
      for (auto& s : subs) {  // racy reads of plain counters, for display only
        sub += s->submitted;
        calls += s->submit_calls;
        reaped += s->reaped;
        reaps += s->reaps;
      }
      const double mib = iops * o.bs / (1 << 20);
      std::printf("IOPS=%.2fM, BW=%.*f%s, IOS/call=%.0f/%.0f\n", iops / 1e6, mib >= 1024 ? 2 : 0,
                  mib >= 1024 ? mib / 1024 : mib, mib >= 1024 ? "GiB/s" : "MiB/s",
                  calls ? double(sub) / double(calls) : 0,
                  reaps ? double(reaped) / double(reaps) : 0);
      std::fflush(stdout);
    }
    last_t = t;
    last_done = d;
  }
  stop = true;
  for (auto& th : threads) th.join();
  const uint64_t t1 = now_ns();
  const uint64_t cpu = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  uint64_t submit_cpu = 0;
  for (auto& s : subs) submit_cpu += s->cpu_ns;
  uint64_t done = 0, calls = 0, sub = 0, reaps = 0, reaped = 0;
  for (auto& s : subs) {
    done += s->submitted;
    calls += s->submit_calls;
    sub += s->submitted;
    reaps += s->reaps;
    reaped += s->reaped;
  }
  r.iops = double(done) * 1e9 / double(t1 - t0);
  r.cpu_ns_per_io = done ? double(cpu) / double(done) : 0;
  r.submit_cpu_ns_per_io = done ? double(submit_cpu) / double(done) : 0;
  if (r.max_iops == 0) r.max_iops = r.iops;
  r.ios_per_submit = calls ? double(sub) / double(calls) : 0;
  r.ios_per_reap = reaps ? double(reaped) / double(reaps) : 0;
  r.queue = devs.counters();
  r.cache = bs.stats().total;
  return r;
}

// Applies `toggle=value` to the options (blockcore/toggles.h); throws with one line if either
// is unknown. The bench spells toggles with '-' or '_'.
void apply_toggle(Options& o, std::string toggle, const std::string& value) {
  std::replace(toggle.begin(), toggle.end(), '-', '_');
  if (std::string why = set_toggle(&o.toggles, toggle, value); !why.empty())
    throw std::invalid_argument("--" + toggle + "=" + value + ": " + why);
}

void print_json(const Options& o, const std::string& toggle, const std::string& value, unsigned rep,
                const RunResult& r) {
  print_line({{"kind", "run"}, {"toggle", toggle}, {"value", value}, {"repeat", rep}, {"iops", fixed(r.iops, 0)},
              {"max_iops", fixed(r.max_iops, 0)}, {"bs", o.bs}, {"depth", o.depth}, {"threads", o.threads},
              {"ios_per_submit", fixed(r.ios_per_submit, 2)}, {"ios_per_reap", fixed(r.ios_per_reap, 2)},
              {"tag_calls", r.queue.tag_calls}, {"tags", r.queue.tags},
              {"tags_per_call", fixed(r.queue.tags_per_call(), 3)}, {"tag_waits", r.queue.tag_waits},
              {"splits", r.queue.splits}, {"plug_flushes", r.queue.plug_flushes},
              {"cache_hits", r.cache.alloc_hits}, {"cache_misses", r.cache.alloc_misses},
              {"remote_puts", r.cache.put_remote}, {"cpu_ns_per_io", fixed(r.cpu_ns_per_io, 1)},
              {"submit_cpu_ns_per_io", fixed(r.submit_cpu_ns_per_io, 1)}});
}

void describe(const Options& o) {
  std::printf("biofs-bench: devices=");
  for (size_t i = 0; i < o.devices.size(); i++) std::printf("%s%s", i ? "," : "", o.devices[i].c_str());
  std::printf(" bs=%u depth=%u submit=%u threads=%u queues=%u qd=%u irqmode=%s", o.bs, o.depth, o.submit,
              o.threads, o.queues, o.qd, o.irqmode == NullBlkConfig::IrqMode::none ? "none" : "timer");
  for (const ToggleInfo& t : toggle_table()) std::printf(" %s=%s", t.name, t.get(o.toggles));
  std::printf(" %s\n", o.write ? (o.random ? "randwrite" : "write") : (o.random ? "randread" : "read"));
}

}  // namespace

int io_main(int argc, char** argv) {
  Options o;
  CLI::App app("biofs-bench [io]: the block core alone, t/io_uring style: each submitter keeps --depth bios\n"
               "in flight, --submit of them per plug; prints IOPS each second and Maximum IOPS.", "biofs-bench io");
  std::vector<std::string> devs;
  app.add_option("--dev", devs,
                 "null | null:SIZE | stripe:N | emu:PATH[,...] (a plain PATH too) | nvme:/dev/ngXnY[,...]\n"
                 "(devices/README.md); repeat for several devices, used by each submitter in turn")
      ->default_str("null");
  app.add_option("--depth", o.depth, "bios in flight per thread")->check(CLI::Range(1u, 65536u))->capture_default_str();
  app.add_option("--bs", o.bs, "block size, a multiple of 512")->check(CLI::Range(512u, 1u << 20))->capture_default_str();
  app.add_option("--submit", o.submit, "bios per plug/submit batch")->check(CLI::Range(1u, 4096u))->capture_default_str();
  app.add_option("--threads", o.threads, "submitters")->check(CLI::Range(1u, 256u))->capture_default_str();
  app.add_option("--runtime", o.runtime, "seconds per run")->check(CLI::Range(0.05, 3600.0))->capture_default_str();
  std::string rw = "randread";
  app.add_option("--rw", rw, "pattern")->check(CLI::IsMember({"randread", "read", "randwrite", "write"}))->capture_default_str();
  app.add_option("--queues", o.queues, "hardware queues per device")->check(CLI::Range(1u, 256u))->capture_default_str();
  app.add_option("--qd", o.qd, "tags per hardware queue")->check(CLI::Range(1u, 65536u))->capture_default_str();
  std::string irq = "none";
  app.add_option("--irqmode", irq, "null devices: complete inline or from a timer thread")
      ->check(CLI::IsMember({"none", "timer"}))->capture_default_str();
  app.add_option("--completion-nsec", o.completion_nsec, "null devices, irqmode timer: completion delay")
      ->check(CLI::Range(uint64_t(0), uint64_t(10'000'000'000)))->capture_default_str();
  unsigned chunk_kb = o.chunk_sectors / 2;
  app.add_option("--chunk-kb", chunk_kb, "stripe chunk")->check(CLI::Range(1u, 1u << 20))->capture_default_str();
  std::vector<std::string> toggle_values;
  add_toggle_options(app, &toggle_values);
  std::string pairs;
  for (const ToggleInfo& t : toggle_table()) pairs += std::string(pairs.empty() ? "" : "; ") + t.name + " " + t.ab_a + "," + t.ab_b;
  app.add_option("--ab", o.ab, "TOGGLE[=A,B]: run A and B interleaved --repeats times (default pairs: " + pairs + ")");
  app.add_option("--repeats", o.repeats, "A/B repeats")->check(CLI::Range(1u, 1000u))->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per run");
  app.add_flag("--quiet", o.quiet, "no per-second lines");
  if (const int rc = parse_cli(app, argc, argv); rc >= 0) return rc;
  if (!devs.empty()) o.devices = devs;
  if (o.bs % 512) throw std::invalid_argument("--bs=" + std::to_string(o.bs) + ": not a multiple of 512");
  o.irqmode = irq == "timer" ? NullBlkConfig::IrqMode::timer : NullBlkConfig::IrqMode::none;
  o.chunk_sectors = chunk_kb * 2;
  o.random = rw.rfind("rand", 0) == 0;
  o.write = rw.find("write") != std::string::npos;
  for (size_t i = 0; i < toggle_table().size(); i++) apply_toggle(o, toggle_table()[i].name, toggle_values[i]);
  o.quiet = o.quiet || o.json;

  if (o.ab.empty()) {
    if (!o.json) describe(o);
    const RunResult r = run_once(o, !o.quiet);
    if (o.json) {
      print_json(o, "", "", 0, r);
    } else {
      std::printf("Maximum IOPS=%.2fM (whole run %.2fM), tags/call=%.2f, cache hits=%lu misses=%lu, splits=%lu\n",
                  r.max_iops / 1e6, r.iops / 1e6, r.queue.tags_per_call(), (unsigned long)r.cache.alloc_hits,
                  (unsigned long)r.cache.alloc_misses, (unsigned long)r.queue.splits);
      std::printf("CPU per I/O: %.0f ns (process), %.0f ns (submitters)\n", r.cpu_ns_per_io,
                  r.submit_cpu_ns_per_io);
    }
    return 0;
  }

  // --ab TOGGLE[=A,B]
  std::string toggle = o.ab, a, b;
  if (const size_t eq = toggle.find('='); eq != std::string::npos) {
    const std::string vals = toggle.substr(eq + 1);
    toggle = toggle.substr(0, eq);
    const size_t comma = vals.find(',');
    if (comma == std::string::npos) throw std::invalid_argument("--ab " + o.ab + ": expected TOGGLE=A,B");
    a = vals.substr(0, comma);
    b = vals.substr(comma + 1);
  }
  std::replace(toggle.begin(), toggle.end(), '-', '_');
  if (const ToggleInfo* t = find_toggle(toggle); t && a.empty()) a = t->ab_a, b = t->ab_b;
  Options oa = o, ob = o;
  apply_toggle(oa, toggle, a.empty() ? "?" : a);
  apply_toggle(ob, toggle, b);
  if (!o.json) {
    describe(o);
    std::printf("A/B: %s=%s vs %s=%s, %u repeats of %.1fs each, interleaved\n", toggle.c_str(), a.c_str(),
                toggle.c_str(), b.c_str(), o.repeats, o.runtime);
  }
  std::vector<double> iops_a, iops_b, tpc_a, tpc_b, cpu_a, cpu_b;
  for (unsigned rep = 0; rep < o.repeats; rep++) {
    for (int k = 0; k < 2; k++) {
      const bool first_a = rep % 2 == 0;
      const bool is_a = (k == 0) == first_a;
      const RunResult r = run_once(is_a ? oa : ob, false);
      (is_a ? iops_a : iops_b).push_back(r.iops);
      (is_a ? tpc_a : tpc_b).push_back(r.queue.tags_per_call());
      (is_a ? cpu_a : cpu_b).push_back(r.cpu_ns_per_io);
      if (o.json)
        print_json(o, toggle, is_a ? a : b, rep, r);
      else
        std::printf("  repeat %u %s=%-6s IOPS=%.2fM CPU/IO=%.0fns tags/call=%.2f splits=%lu cache hit rate=%.1f%%\n",
                    rep, toggle.c_str(), (is_a ? a : b).c_str(), r.iops / 1e6, r.cpu_ns_per_io,
                    r.queue.tags_per_call(), (unsigned long)r.queue.splits,
                    r.cache.alloc_hits + r.cache.alloc_misses
                        ? 100.0 * double(r.cache.alloc_hits) / double(r.cache.alloc_hits + r.cache.alloc_misses)
                        : 0.0);
    }
  }
  const double ma = median(iops_a), mb = median(iops_b);
  if (o.json)
    print_line({{"kind", "median"}, {"toggle", toggle}, {"a", a}, {"b", b}, {"iops_a", fixed(ma, 0)},
                {"iops_b", fixed(mb, 0)}, {"ratio_b_a", fixed(mb / ma, 4)}, {"spread_a", fixed(spread(iops_a), 4)},
                {"spread_b", fixed(spread(iops_b), 4)}, {"tags_per_call_a", fixed(median(tpc_a), 3)},
                {"tags_per_call_b", fixed(median(tpc_b), 3)}, {"cpu_ns_per_io_a", fixed(median(cpu_a), 1)},
                {"cpu_ns_per_io_b", fixed(median(cpu_b), 1)}});
  else
    std::printf("median IOPS: %s=%s %.2fM, %s=%s %.2fM, %s/%s = %.3f (spread %.1f%% / %.1f%%), tags/call %.2f / %.2f\n",
                toggle.c_str(), a.c_str(), ma / 1e6, toggle.c_str(), b.c_str(), mb / 1e6, b.c_str(), a.c_str(),
                mb / ma, 100 * spread(iops_a), 100 * spread(iops_b), median(tpc_a), median(tpc_b));
  return 0;
}

}  // namespace biofs::bench
