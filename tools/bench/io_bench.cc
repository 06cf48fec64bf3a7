// `biofs-bench [io]`: t/io_uring for the block core. Each submitter thread keeps `depth` bios in
// flight. One loop turn stands for one io_uring_enter() of t/io_uring: it allocates and submits
// up to `submit` bios under one plug (so tags come in batches), then, when t/io_uring would
// wait (nothing could be submitted, or a further batch would not fit), waits until `complete`
// completions (at most what is in flight) are there, and reaps every completion there is.
// Completions arrive inline (null irqmode=none), from the device's completion thread, or, with
// -p1, from the submitter's own polling of its poll queue. The lines are t/io_uring's
// (tio_format.h): the header, IOPS=…, BW=…, IOS/call=s/c each second (IOPS: bios submitted in
// that second, less those that ended in error), "Exiting on timeout", "Maximum IOPS=…"; then
// biofs's own lines: the settings, the whole run, CPU time per I/O (process and submitter
// thread CPU clocks). `--ab TOGGLE` runs a toggle's two values interleaved and prints medians
// and the ratio.
#include "io_bench.h"

#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/blk_mq.h"
#include "blockcore/blk_poll.h"
#include "blockcore/null_blk.h"
#include "blockcore/toggles.h"
#include "devices/device_string.h"
#include "devices/open_device.h"
#include "json.h"
#include "cli.h"
#include "stats.h"
#include "tio_format.h"

namespace biofs::bench {
namespace {

struct Options {
  std::vector<std::string> devices{"null"};
  unsigned depth = 128, bs = 4096, submit = 32, complete = 32, threads = 1;
  double runtime = 3;  // 0: until SIGINT
  unsigned queues = 1, qd = 256;
  NullBlkConfig::IrqMode irqmode = NullBlkConfig::IrqMode::none;
  uint64_t completion_nsec = 10'000;
  uint32_t chunk_sectors = 256;  // stripe chunk: 128 KiB
  Toggles toggles;
  bool random = true, write = false, polled = false;
  std::string ab;  // toggle to compare
  std::string ab_a, ab_b;
  unsigned repeats = 3;
  bool json = false, quiet = false;
};

// What t/io_uring's header says of the I/O, as true of these devices: the flags hold when every
// device has them (only nvme: devices register files and buffers, only emu: ones can go
// through the page cache).
struct HeaderFacts {
  bool fixedbufs = true, register_files = true, buffered = true;
};

DeviceSpec parse_spec(const std::string& spec) {
  DeviceSpec ds;
  stop_unless_ok(parse_device_spec(spec, &ds));
  return ds;
}

HeaderFacts header_facts(const Options& o) {
  HeaderFacts f;
  for (const std::string& spec : o.devices) {
    const DeviceSpec ds = parse_spec(spec);
    const bool nvme = ds.kind == DeviceSpec::Kind::nvme, emu = ds.kind == DeviceSpec::Kind::emu;
    f.fixedbufs = f.fixedbufs && nvme && ds.nvme.fixedbufs;
    f.register_files = f.register_files && nvme && ds.nvme.regfiles;
    f.buffered = f.buffered && emu && ds.emu.buffered;
  }
  return f;
}

// t/io_uring's flags that are not plain numbers: -1 when not given.
struct TioFlags {
  int B = -1, F = -1, O = -1, N = -1, X = -1, u = -1, R = -1, p = -1;
};

// Applies t/io_uring's flags to the options. What a device string can say (-B1/-F1 on nvme:,
// -O0 on emu:) is appended to it; what cannot apply is one line on stderr and the run goes on;
// -N1, and -u1 on a device that is not nvme:, stop the run (std::invalid_argument).
void apply_tio_flags(Options& o, const TioFlags& t) {
  auto note = [](const std::string& line) { std::fprintf(stderr, "biofs-bench: %s\n", line.c_str()); };
  if (t.N > 0)
    throw std::invalid_argument("-N1: biofs has no no-op request; the null device (null) is the block core with no "
                                "device work behind it");
  if (t.R >= 0) o.random = t.R != 0;
  if (t.p >= 0) o.polled = t.p != 0;
  if (t.X > 0) note("-X1: no io_uring lies between the bench and the block core, so there is no ring to register; ignored");
  // -B1 -> nvme:...,fixedbufs; -F1 -> nvme:...,regfiles; -O0 -> emu:...,buffered.
  struct DevFlag {
    int given;
    bool want;  // the flag's value that a device string can carry
    DeviceSpec::Kind kind;
    const char* option;
    const char* what;
  };
  const DevFlag flags[] = {
      {t.B, true, DeviceSpec::Kind::nvme, "fixedbufs", "-B1: fixed buffers"},
      {t.F, true, DeviceSpec::Kind::nvme, "regfiles", "-F1: registered files"},
      {t.O == -1 ? -1 : !t.O, true, DeviceSpec::Kind::emu, "buffered", "-O0: buffered I/O"},
  };
  for (const DevFlag& f : flags) {
    if (f.given < 0 || bool(f.given) != f.want) continue;  // asks for what biofs does anyway
    std::vector<std::string> left;
    for (std::string& spec : o.devices) {
      const DeviceSpec ds = parse_spec(spec);
      if (ds.kind == f.kind) {
        const bool has = f.kind == DeviceSpec::Kind::nvme
                             ? (std::string(f.option) == "fixedbufs" ? ds.nvme.fixedbufs : ds.nvme.regfiles)
                             : ds.emu.buffered;
        if (!has) spec += std::string(",") + f.option;
      } else {
        left.push_back(spec);
      }
    }
    if (!left.empty())
      note(std::string(f.what) + " applies only to " + (f.kind == DeviceSpec::Kind::nvme ? "nvme:" : "emu:") +
           " devices (their ," + f.option + " option), not to " + left[0] + "; ignored there");
  }
  // -B0, -F0, -O1: a device string that asks for the other wins.
  const HeaderFacts facts = header_facts(o);
  if (t.B == 0 && facts.fixedbufs) note("-B0: the nvme: device string asks for fixedbufs; it wins");
  if (t.F == 0 && facts.register_files) note("-F0: the nvme: device string asks for regfiles; it wins");
  if (t.O > 0 && facts.buffered) note("-O1: the emu: device string asks for buffered; it wins");
  if (t.u >= 0) {
    bool all_nvme = true;
    std::string other;
    for (const std::string& spec : o.devices)
      if (parse_spec(spec).kind != DeviceSpec::Kind::nvme) all_nvme = false, other = spec;
    if (t.u && !all_nvme)
      throw std::invalid_argument("-u1: NVMe passthrough is the nvme:/dev/ngXnY device, and " + other +
                                  " is not one");
    if (!t.u && all_nvme) note("-u0: an nvme: device always sends passthrough commands; ignored");
  }
}

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
    if (o.polled) d.poll_queues = o.threads;  // a poll queue per submitter
    for (const std::string& spec : o.devices) {
      std::unique_ptr<Device> dev;
      stop_unless_ok(open_device(spec, d, &dev));
      opened.push_back(std::move(dev));
      targets.push_back(opened.back()->bdev());
      if (o.polled && (!opened.back()->queue() || !opened.back()->queue()->nr_poll_queues()))
        throw std::invalid_argument("-p1: polled I/O needs poll queues, which only emu: and nvme: devices have, and " +
                                    spec + " has none");
    }
  }
  QueueCounters counters() const {
    QueueCounters c;
    for (const auto& d : opened)
      for (RequestQueue* q : d->queues()) c += q->counters();
    return c;
  }
};

// One submitter's state. The counters the sampler reads each second are atomics that only the
// submitter writes (relaxed stores, no read-modify-write).
struct alignas(64) Submitter {
  std::atomic<uint64_t> remote_done{0}, remote_errors{0};  // completions seen on other threads
  uint64_t local_done = 0, local_errors = 0;              // completions on this thread
  std::atomic<uint64_t> submitted{0}, calls{0}, reaped{0}, errors{0};  // for the sampler
  std::atomic<int> tid{0};
  uint64_t cpu_ns = 0;  // the thread's CPU time, set when it ends
  uint64_t rng = 0x9E3779B97F4A7C15ull;
};
thread_local Submitter* tls_submitter = nullptr;

void bench_end_io(Bio* bio) {
  auto* s = static_cast<Submitter*>(bio->bi_private);
  const bool failed = bio->bi_status != BLK_STS_OK;
  bio_put(bio);  // before counting: the drain at the end trusts the count
  if (s == tls_submitter) {
    s->local_errors += failed;
    s->local_done++;
  } else {
    if (failed) s->remote_errors.fetch_add(1, std::memory_order_relaxed);
    s->remote_done.fetch_add(1, std::memory_order_release);
  }
}

// The submitters' counters summed.
struct Totals {
  uint64_t submitted = 0, calls = 0, reaped = 0, errors = 0;
};

struct RunResult {
  double iops = 0;            // over the whole run: submitted less errors, per second
  uint64_t max_iops = 0;      // best one-second count (t/io_uring's Maximum IOPS)
  bool sampled = false;       // whether any one-second count was taken
  double seconds = 0;
  double ios_per_submit = 0, ios_per_reap = 0;  // per call, over the whole run
  QueueCounters queue;
  BioCacheCounters cache;
  // CPU time per I/O, from CLOCK_PROCESS_CPUTIME_ID (every thread of the process:
  // submitters, completion threads, the sampler) and the submitters' CLOCK_THREAD_CPUTIME_ID.
  double cpu_ns_per_io = 0, submit_cpu_ns_per_io = 0;
};

uint64_t cpu_clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted.store(true, std::memory_order_relaxed); }

// Prints t/io_uring's header: a line per submitter, then the settings and the engine.
void print_header(const Options& o, const std::vector<std::unique_ptr<Submitter>>& subs) {
  for (size_t t = 0; t < subs.size(); t++)
    std::printf("submitter=%zu, tid=%d, file=%s, nfiles=%zu, node=%d\n", t, subs[t]->tid.load(),
                o.devices.back().c_str(), o.devices.size(), -1);
  const HeaderFacts f = header_facts(o);
  std::printf("polled=%d, fixedbufs=%d, register_files=%d, buffered=%d, QD=%u\n", int(o.polled), int(f.fixedbufs),
              int(f.register_files), int(f.buffered), o.depth);
  // No ring lies between the bench and the block core: the queue each bio meets is the
  // hardware queue's tags (--qd), the size of an NVMe device's submission and completion queues.
  std::printf("Engine=blockcore, sq_ring=%u, cq_ring=%u\n", o.qd, o.qd);
  std::fflush(stdout);
}

// One run. `text`: t/io_uring's header and closing lines; `per_second`: its IOPS lines too.
RunResult run_once(const Options& o, bool text, bool per_second) {
  Devices devs(o);
  BioSet bs(256, 0, BIOSET_NEED_BVECS | bio_cache_flags(o.toggles.bio_cache));
  if (int e = bs.init(); e) throw std::runtime_error(bioset_init_error(e));
  const unsigned pages = (o.bs + PAGE_SIZE - 1) / PAGE_SIZE;
  std::vector<std::unique_ptr<Submitter>> subs;
  for (unsigned t = 0; t < o.threads; t++) subs.push_back(std::make_unique<Submitter>());
  std::atomic<bool> stop{false}, go{false};
  std::atomic<unsigned> ready{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < o.threads; t++) {
    threads.emplace_back([&, t] {
      Submitter* s = subs[t].get();
      s->tid.store(int(syscall(SYS_gettid)));
      pin_to_cpu(int(t));
      tls_submitter = s;
      s->rng ^= uint64_t(t + 1) * 0xBF58476D1CE4E5B9ull;
      void* buf = std::aligned_alloc(PAGE_SIZE, size_t(pages) * PAGE_SIZE);
      std::vector<BlkMqHwCtx*> poll_hctx;  // this thread's poll queue on each device
      if (o.polled)
        for (const auto& d : devs.opened) poll_hctx.push_back(d->queue()->map_queue(REQ_POLLED));
      ready.fetch_add(1, std::memory_order_release);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const uint64_t thread_cpu0 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);

      const blk_opf_t op = (o.write ? REQ_OP_WRITE : REQ_OP_READ) | (o.polled ? REQ_POLLED : 0);
      auto done_now = [s] { return s->local_done + s->remote_done.load(std::memory_order_acquire); };
      auto errors_now = [s] { return s->local_errors + s->remote_errors.load(std::memory_order_relaxed); };
      // Reaps this thread's poll queues; with `wait` and one device, sleeps (bounded) for a
      // completion first when there is none.
      auto poll = [&](bool wait) {
        int n = 0;
        for (BlkMqHwCtx* h : poll_hctx) n += blk_mq_poll(h, wait && poll_hctx.size() == 1);
        return n;
      };
      uint64_t seq = 0, inflight = 0, submitted = 0, calls = 0, reaped = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const unsigned to_submit = inflight < o.depth ? unsigned(std::min<uint64_t>(o.depth - inflight, o.submit)) : 0;
        if (to_submit) {
          BlkPlug plug;
          blk_start_plug_nr_ios(&plug, (unsigned short)to_submit);
          for (unsigned i = 0; i < to_submit; i++) {
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
          seq += to_submit;
          blk_finish_plug(&plug);
        }
        inflight += to_submit;
        submitted += to_submit;
        calls++;
        s->submitted.store(submitted, std::memory_order_relaxed);
        s->calls.store(calls, std::memory_order_relaxed);
        // t/io_uring's rule: no wait while another batch fits after this one; otherwise wait
        // for the complete batch (here never for more than is in flight).
        const uint64_t to_wait =
            to_submit && inflight + to_submit <= o.depth ? 0 : std::min<uint64_t>(inflight, o.complete);
        if (o.polled) poll(false);
        uint64_t avail = done_now() - reaped;
        while (avail < to_wait && !stop.load(std::memory_order_relaxed)) {
          if (!o.polled)
            std::this_thread::yield();  // the device completes on its own
          else if (!poll(false) && !poll(true) && poll_hctx.size() > 1)
            std::this_thread::yield();
          avail = done_now() - reaped;
        }
        reaped += avail;
        inflight -= avail;
        s->reaped.store(reaped, std::memory_order_relaxed);
        s->errors.store(errors_now(), std::memory_order_relaxed);
      }
      // Drain: wait for everything in flight before the devices go away.
      while (done_now() < submitted) {
        if (!o.polled || (!poll(false) && !poll(true) && poll_hctx.size() > 1)) std::this_thread::yield();
      }
      s->reaped.store(submitted, std::memory_order_relaxed);
      s->errors.store(errors_now(), std::memory_order_relaxed);
      std::free(buf);
      s->cpu_ns = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - thread_cpu0;
      bs.prune_this_thread_cache();
    });
  }
  while (ready.load(std::memory_order_acquire) < o.threads) std::this_thread::yield();
  if (text) print_header(o, subs);

  auto totals = [&] {
    Totals x;
    for (auto& s : subs) {
      x.submitted += s->submitted.load(std::memory_order_relaxed);
      x.calls += s->calls.load(std::memory_order_relaxed);
      x.reaped += s->reaped.load(std::memory_order_relaxed);
      x.errors += s->errors.load(std::memory_order_relaxed);
    }
    return x;
  };
  RunResult r;
  const uint64_t cpu0 = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  const uint64_t t0 = now_ns();
  go.store(true, std::memory_order_release);
  // t/io_uring's main loop: a sample each second; the second that reaches the runtime ends
  // the run without a line of its own, and so does SIGINT.
  const uint64_t end = o.runtime > 0 ? t0 + uint64_t(o.runtime * 1e9) : UINT64_MAX;
  const char* reason = "timeout";
  Totals last;
  for (uint64_t k = 1;; k++) {
    const uint64_t wake = std::min<uint64_t>(end, t0 + k * 1'000'000'000ull);
    for (uint64_t t = now_ns(); t < wake && !g_interrupted.load(std::memory_order_relaxed); t = now_ns())
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(wake - t, 50'000'000ull)));
    if (g_interrupted.load(std::memory_order_relaxed)) {
      reason = "signal";
      break;
    }
    if (wake >= end) break;
    const Totals cur = totals();
    const uint64_t sub = cur.submitted - last.submitted, errs = cur.errors - last.errors;
    const uint64_t iops = sub > errs ? sub - errs : 0;
    r.max_iops = std::max(r.max_iops, iops);
    r.sampled = true;
    if (per_second) {
      std::printf("%s\n", tio_interval_line(iops, o.bs, false, sub, cur.reaped - last.reaped, cur.calls - last.calls).c_str());
      std::fflush(stdout);
    }
    last = cur;
  }
  if (text) {
    std::printf("Exiting on %s\n%s\n", reason, tio_max_line(r.max_iops).c_str());
    std::fflush(stdout);
  }
  const uint64_t t1 = now_ns();
  stop = true;
  for (auto& th : threads) th.join();
  const uint64_t cpu = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  uint64_t submit_cpu = 0;
  for (auto& s : subs) {
    submit_cpu += s->cpu_ns;
    if (const uint64_t e = s->errors.load(); e && text) std::printf("%d: %lu IO errors\n", s->tid.load(), (unsigned long)e);
  }
  const Totals all = totals();  // every bio submitted has ended by now
  const uint64_t good = all.submitted - std::min(all.submitted, all.errors);
  r.seconds = double(t1 - t0) / 1e9;
  r.iops = double(good) * 1e9 / double(t1 - t0);
  r.cpu_ns_per_io = all.submitted ? double(cpu) / double(all.submitted) : 0;
  r.submit_cpu_ns_per_io = all.submitted ? double(submit_cpu) / double(all.submitted) : 0;
  r.ios_per_submit = all.calls ? double(all.submitted) / double(all.calls) : 0;
  r.ios_per_reap = all.calls ? double(all.reaped) / double(all.calls) : 0;
  r.queue = devs.counters();
  r.cache = bs.stats().total;
  return r;
}

// Applies `toggle=value` to the options (blockcore/toggles.h); throws with one line if either
// is unknown. The bench spells toggles with '-' or '_'.
void apply_toggle(Options& o, std::string toggle, const std::string& value) {
  std::replace(toggle.begin(), toggle.end(), '-', '_');
  stop_unless_ok(set_toggle(&o.toggles, toggle, value), "--" + toggle + "=" + value + ": ");
}

void print_json(const Options& o, const std::string& toggle, const std::string& value, unsigned rep,
                const RunResult& r) {
  print_line({{"kind", "run"}, {"toggle", toggle}, {"value", value}, {"repeat", rep}, {"iops", fixed(r.iops, 0)},
              {"max_iops", fixed(r.sampled ? double(r.max_iops) : r.iops, 0)}, {"bs", o.bs}, {"depth", o.depth}, {"threads", o.threads},
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
  std::printf(" bs=%u depth=%u submit=%u complete=%u threads=%u queues=%u qd=%u irqmode=%s polled=%d", o.bs, o.depth,
              o.submit, o.complete, o.threads, o.queues, o.qd,
              o.irqmode == NullBlkConfig::IrqMode::none ? "none" : "timer", int(o.polled));
  for (const ToggleInfo& t : toggle_table()) std::printf(" %s=%s", t.name, t.get(o.toggles));
  std::printf(" %s\n", o.write ? (o.random ? "randwrite" : "write") : (o.random ? "randread" : "read"));
}

}  // namespace

int io_main(int argc, char** argv) {
  Options o;
  CLI::App app("biofs-bench [io]: the block core alone, t/io_uring style: each submitter keeps --depth bios\n"
               "in flight, --submit of them per plug; prints t/io_uring's lines (IOPS each second, counting\n"
               "the bios submitted, then Maximum IOPS), then biofs's own.", "biofs-bench io");
  std::vector<std::string> devs, positional;
  app.add_option("--dev", devs,
                 "null | null:SIZE | stripe:N | stripe:DEV+DEV | ram:SIZE | emu:PATH[,...] (a plain PATH too) | nvme:/dev/ngXnY[,...]\n"
                 "(devices/README.md); repeat for several devices, used by each submitter in turn")
      ->default_str("null");
  app.add_option("devices", positional, "devices, as t/io_uring's file names: the same as --dev");
  app.add_option("-d,--depth", o.depth, "bios in flight per thread")->check(CLI::Range(1u, 65536u))->capture_default_str();
  app.add_option("-b,--bs", o.bs, "block size, a multiple of 512")->check(CLI::Range(512u, 1u << 20))->capture_default_str();
  app.add_option("-s,--submit", o.submit, "bios per plug/submit batch (0 is 1; at most --depth)")
      ->check(CLI::Range(0u, 65536u))->capture_default_str();
  app.add_option("-c,--complete", o.complete, "completions to wait for when the depth is full (0 is 1; at most --depth)")
      ->check(CLI::Range(0u, 65536u))->capture_default_str();
  app.add_option("-n,--threads", o.threads, "submitters")->check(CLI::Range(1u, 256u))->capture_default_str();
  app.add_option("-r,--runtime", o.runtime, "seconds per run; 0: until SIGINT (not with --ab)")
      ->check(CLI::Range(0.0, 1e6))->capture_default_str();
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
  TioFlags tf;
  const auto flag01 = CLI::Range(0, 1 << 30);
  app.add_option("-p,--polled", tf.p, "1: polled I/O (REQ_POLLED on a poll queue per submitter, reaped by it;\n"
                                      "emu: and nvme: devices only), default 0")->check(flag01);
  app.add_option("-R", tf.R, "1: random offsets, 0: sequential (overrides --rw's rand), default 1")->check(flag01);
  app.add_option("-B", tf.B, "1: fixed buffers: nvme: devices get ,fixedbufs; others: ignored, with a line")->check(flag01);
  app.add_option("-F", tf.F, "1: registered files: nvme: devices get ,regfiles; others: ignored, with a line")->check(flag01);
  app.add_option("-O", tf.O, "0: buffered I/O: emu: devices get ,buffered; others: ignored, with a line")->check(flag01);
  app.add_option("-X", tf.X, "1: registered ring: no ring here, ignored with a line")->check(flag01);
  app.add_option("-u", tf.u, "1: NVMe passthrough: the nvme: device is that; on another device the run stops")->check(flag01);
  app.add_option("-N", tf.N, "1: no-op requests: biofs has none, the run stops (the null device is the nearest)")->check(flag01);
  std::vector<std::string> toggle_values;
  add_toggle_options(app, &toggle_values);
  std::string pairs;
  for (const ToggleInfo& t : toggle_table()) pairs += std::string(pairs.empty() ? "" : "; ") + t.name + " " + t.ab_a + "," + t.ab_b;
  app.add_option("--ab", o.ab, "TOGGLE[=A,B]: run A and B interleaved --repeats times (default pairs: " + pairs + ")");
  app.add_option("--repeats", o.repeats, "A/B repeats")->check(CLI::Range(1u, 1000u))->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per run");
  app.add_flag("--quiet", o.quiet, "no per-second lines");
  app.footer("t/io_uring's options: -d -s -c -b -n -r as above; -p -R -B -F -O -X -u -N take 0 or 1. A flag that\n"
             "cannot apply here prints one line on stderr and the run goes on (-B1, -F1, -O0 on a device\n"
             "without that option; -X1; -u0 on nvme:), except -N1, -u1 off nvme: and -p1 on a device\n"
             "without poll queues, which stop it. Not taken: -t -T -a -S -P -V -e -H.");
  if (const int rc = parse_cli(app, argc, argv); rc >= 0) return rc;
  devs.insert(devs.end(), positional.begin(), positional.end());
  if (!devs.empty()) o.devices = devs;
  if (o.bs % 512) throw std::invalid_argument("--bs=" + std::to_string(o.bs) + ": not a multiple of 512");
  o.irqmode = irq == "timer" ? NullBlkConfig::IrqMode::timer : NullBlkConfig::IrqMode::none;
  o.chunk_sectors = chunk_kb * 2;
  o.random = rw.rfind("rand", 0) == 0;
  o.write = rw.find("write") != std::string::npos;
  for (size_t i = 0; i < toggle_table().size(); i++) apply_toggle(o, toggle_table()[i].name, toggle_values[i]);
  o.submit = tio_clamp_batch(o.submit, o.depth);
  o.complete = tio_clamp_batch(o.complete, o.depth);
  apply_tio_flags(o, tf);
  o.quiet = o.quiet || o.json;

  if (o.ab.empty()) {
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, nullptr);
    const RunResult r = run_once(o, !o.json, !o.quiet);
    if (o.json) {
      print_json(o, "", "", 0, r);
    } else {
      describe(o);
      std::printf("Whole run IOPS=%s, %.2f s, IOS/call=%.2f/%.2f, tags/call=%.2f, cache hits=%lu misses=%lu, "
                  "splits=%lu\n",
                  tio_iops(uint64_t(r.iops + 0.5)).c_str(), r.seconds, r.ios_per_submit, r.ios_per_reap,
                  r.queue.tags_per_call(), (unsigned long)r.cache.alloc_hits, (unsigned long)r.cache.alloc_misses,
                  (unsigned long)r.queue.splits);
      std::printf("CPU per I/O: %.0f ns (process), %.0f ns (submitters)\n", r.cpu_ns_per_io,
                  r.submit_cpu_ns_per_io);
    }
    return 0;
  }

  if (o.runtime <= 0) throw std::invalid_argument("--ab needs a --runtime above 0");
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
      const RunResult r = run_once(is_a ? oa : ob, false, false);
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
