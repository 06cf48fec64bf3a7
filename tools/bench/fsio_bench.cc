// `biofs-bench fsio`: the FUSE daemon's file I/O path without FUSE, in one process and (by
// default) one thread, for a FIXED number of I/Os, so that an instruction count per I/O means
// the same thing run after run (tools/biofs-instructions runs it under callgrind).
//
// It makes a filesystem (fs/mkfs.h) on the device, mounts the Filesystem library as the daemon
// does (no background commit), creates a file and writes it whole (its extents are written, so
// reads reach the device and overwrites take the shared-lock fast path), then issues --warmup
// I/Os and --ios measured ones through Filesystem::read_async/write_async, keeping --qdepth of
// them outstanding, down through BlockIo, the block core and the driver. Completions are reaped
// by this same thread (the NVMe driver without its completion thread: Device::poll), and on emu
// each command is awaited at its doorbell (devices/settle.h), so the driver's reap right
// after the doorbell finds it, every time; null and RAM devices complete inline. Hence the
// queue depth changes nothing in the count: each I/O completes before the next is issued.
// An emu image is made and filled by a child process (prepare_in_child); this process mounts it
// and ends every completion on its own thread from then on.
//
// The measured region is bracketed by callgrind client requests (valgrind/callgrind.h):
// instrumentation starts before the warm-up (run valgrind with --instr-atstart=no so the setup
// runs uninstrumented), the counts are zeroed right before the measured I/Os and dumped right
// after them ("fsio measured"); without Valgrind the requests do nothing.
//
// What is held fixed, so that two runs execute the same instructions:
// - offsets come from a seeded xorshift generator (--seed);
// - the stage clock's sampling is off (BIOFS_STAGE_SAMPLE's job; --stage-sample to turn it on);
// - the idle-cache trimmer's interval is an hour (BIOFS_BIO_CACHE_TRIM_MS, unless set), so no
//   timer trims the bio cache mid-run;
// - the coarse real-time clock (CLOCK_REALTIME_COARSE, the filesystem's current_time()) is
//   frozen for the process: the first overwrite in each clock tick updates the file's mtime and
//   ctime (file_update_time: a brief exclusive hold, journaled), so with a ticking clock how many
//   measured writes do so would depend on how fast the run goes. Frozen, none does after the
//   first (the daemon does once per tick, about 4 ms); --mtime-every N advances the frozen
//   clock one tick before every Nth measured write to put that work back in, at a fixed rate.
//   Every other clock reads the real time.
#include "fsio_bench.h"

// Debian's valgrind package ships the client-request header; without it the requests are no-ops
// (the mode still runs; tools/biofs-instructions needs valgrind anyway).
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(name) ((void)(name))
#define RUNNING_ON_VALGRIND 0
#endif

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/stage_clock.h"
#include "blockcore/toggles.h"
#include "cli.h"
#include "devices/device_string.h"
#include "devices/null_remap.h"
#include "devices/block_trace.h"
#include "devices/open_device.h"
#include "devices/settle.h"
#include "fs/filesystem.h"
#include "fs/mkfs.h"
#include "json.h"
#include "lib/background_thread.h"
#include "lib/parse_number.h"
#include "stats.h"

// ---- the frozen coarse clock ----------------------------------------------------------------
namespace {
std::atomic<bool> g_coarse_frozen{false};
std::atomic<int64_t> g_coarse_ns{0};
}  // namespace

// Every clock_gettime() of this program (the filesystem's, libstdc++'s) comes here first: the
// executable's definition interposes libc's. Only CLOCK_REALTIME_COARSE, and only once fsio has
// frozen it, reads the fixed value; everything else is libc's clock_gettime.
extern "C" int clock_gettime(clockid_t clk, struct timespec* ts) noexcept {
  using Fn = int (*)(clockid_t, struct timespec*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "clock_gettime"));
  if (clk == CLOCK_REALTIME_COARSE && g_coarse_frozen.load(std::memory_order_relaxed)) {
    const int64_t ns = g_coarse_ns.load(std::memory_order_relaxed);
    ts->tv_sec = time_t(ns / 1'000'000'000);
    ts->tv_nsec = long(ns % 1'000'000'000);
    return 0;
  }
  return real(clk, ts);
}

extern "C" char __executable_start;  // the linker's: where the program was loaded

namespace biofs::bench {
namespace {

constexpr int64_t COARSE_TICK_NS = 4'000'000;  // CONFIG_HZ=250's jiffy

void freeze_coarse_clock() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  // A tick-aligned value, as the coarse clock's are.
  const int64_t ns = int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  g_coarse_ns.store(ns - ns % COARSE_TICK_NS, std::memory_order_relaxed);
  g_coarse_frozen.store(true, std::memory_order_relaxed);
}

struct Options {
  std::string dev = "null:64M";
  std::string rw = "randread";
  unsigned qdepth = 1, bs = 4096;
  uint64_t ios = 1000, warmup = 100;
  uint64_t file_size = 16u << 20, image_size = 64u << 20;
  uint64_t seed = 1;
  uint64_t mtime_every = 0;
  unsigned stage_sample = 0;
  bool completion_thread = false;
  bool settle = true;
  Toggles toggles;
  bool json = false;
  std::string trace_dir;  // --trace: blktrace on the device's queues while it runs
};

// Reaps completions on a thread of its own while the setup and the teardown do synchronous I/O.
// As a watchdog (settling emu), it reaps only what the measuring thread has left in flight with
// no doorbell rung for 50 ms: a doorbell of several commands, of which a settle awaits one, and
// a synchronous caller then waiting for the rest. Otherwise it touches nothing, so the thread
// that rang a doorbell is the one that ends its completion, every run alike.
struct SetupPoller {
  std::jthread thread;
  void start(Device* dev, bool watchdog = false) {
    thread = std::jthread([dev, watchdog](std::stop_token stop) {
      uint64_t seen = ~0ull;
      int quiet = 0;
      while (!stop.stop_requested()) {
        if (!watchdog) {
          if (dev->poll(false) == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
          continue;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        const uint64_t rung = settled_doorbells();
        quiet = (rung == seen && dev->inflight() > 0) ? quiet + 1 : 0;
        seen = rung;
        if (quiet >= 5) dev->poll(false);
      }
    });
  }
  void stop() { stop_background_thread(thread); }
};

// mkfs, mount, the file created and written whole (every block mapped and written), committed.
std::unique_ptr<Filesystem> make_and_fill(BlockIo& io, const Options& o, uint64_t* ino) {
  MkfsOptions mk;
  mk.force = true;
  stop_unless_ok(make_filesystem(io, mk), "mkfs: ");
  MountOptions mo;
  mo.commit_interval_s = 0;  // no commit thread: commits happen where this program asks
  std::unique_ptr<Filesystem> fs;
  stop_unless_ok(Filesystem::mount(io, mo, &fs), "mount: ");
  struct stat st;
  if (int e = fs->mknod(disk::ROOT_INO, "fsio", S_IFREG | 0644, 0, 0, 0, &st); e)
    throw std::runtime_error(std::string("create: ") + std::strerror(-e));
  *ino = st.st_ino;
  if (int e = fs->open(*ino); e) throw std::runtime_error(std::string("open: ") + std::strerror(-e));
  const size_t chunk = 1u << 20;
  std::vector<char> buf(chunk);
  for (size_t i = 0; i < chunk; i++) buf[i] = char(i * 131 + 7);
  for (uint64_t off = 0; off < o.file_size; off += chunk) {
    const size_t n = size_t(std::min<uint64_t>(chunk, o.file_size - off));
    if (ssize_t w = fs->write(*ino, off, n, buf.data()); w != ssize_t(n))
      throw std::runtime_error("preallocating the file: " + std::string(w < 0 ? std::strerror(int(-w)) : "short write"));
  }
  if (int e = fs->sync(); e) throw std::runtime_error(std::string("sync: ") + std::strerror(-e));
  return fs;
}

// An NVMe image is made and filled by a child process (a helper thread reaping): the setup's allocations and frees (thousands of bios, buffers, journal blocks, across two
// threads) then leave nothing behind in this process's allocators, whose state would otherwise
// differ from run to run with which thread happened to end which setup I/O (measured: the
// allocation path's count moved between 349 and 371 instructions per I/O with the cache off).
void prepare_in_child(const std::string& spec, const Options& o, unsigned qd) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    int rc = 0;
    try {
      DeviceOptions d;
      d.toggles = o.toggles;
      d.qd = qd;
      d.completion_thread = false;  // a helper reaps (the driver's own thread crawls under valgrind)
      std::unique_ptr<Device> dev;
      stop_unless_ok(open_device(spec, d, &dev));
      SetupPoller poller;
      poller.start(dev.get());  // reaps what an NVMe driver leaves; null and RAM end inline
      {
        BlockIo io(dev->bdev(), 4096, o.toggles.bio_cache);
        if (int e = io.init(); e) throw std::runtime_error(bioset_init_error(e));
        uint64_t ino;
        std::unique_ptr<Filesystem> fs = make_and_fill(io, o, &ino);
        fs->release(ino);
        if (int e = fs->unmount(); e) throw std::runtime_error(std::string("unmount: ") + std::strerror(-e));
      }
      poller.stop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "biofs-bench fsio: preparing %s: %s\n", spec.c_str(), e.what());
      rc = 1;
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("preparing the image failed");
}

struct Rig {
  SetupPoller poller;
  bool device_completes = false;        // the driver's completion thread runs
  std::unique_ptr<Device> device;  // what --dev names (null:'s file data)
  std::unique_ptr<Device> ram;     // null:'s metadata
  Device* nvme = nullptr;          // the device, when an NVMe driver is under it
  bool settled = false;            // emu: over the settling transport (the default)
  NullRemap remap;
  std::unique_ptr<BlockIo> io;
  std::unique_ptr<Filesystem> fs;
  uint64_t ino = 0;

  explicit Rig(const Options& o) {
    DeviceOptions d;
    d.toggles = o.toggles;
    d.qd = std::max(128u, o.qdepth);
    d.completion_thread = o.completion_thread;
    device_completes = o.completion_thread;
    // `ram` and `null` alone take --image-size; a new emulated image needs a size too.
    std::string spec = o.dev;
    if (spec == "ram" || spec == "null") spec += ":" + std::to_string(o.image_size);
    if (spec.find("emu:") == 0 && spec.find(",size=") == std::string::npos)
      spec += ",size=" + std::to_string(o.image_size);
    DeviceSpec ds;
    stop_unless_ok(parse_device_spec(spec, &ds), "--dev: ");
    BlockDevice* bdev;
    if (ds.kind == DeviceSpec::Kind::ram) {
      stop_unless_ok(open_device(ds, spec, d, &device));
      bdev = device->bdev();
    } else if (ds.kind == DeviceSpec::Kind::null) {
      stop_unless_ok(open_device(ds, spec, d, &device));
      stop_unless_ok(open_device("ram:" + std::to_string(ds.null_blk.size_bytes), d, &ram));
      remap.meta = ram->bdev();
      remap.data = device->bdev();
      remap.bdev.submit_bio_fn = NullRemap::submit;
      remap.bdev.private_data = &remap;
      remap.bdev.capacity = std::min(ram->bdev()->capacity, device->bdev()->capacity);
      remap.bdev.name = "null+ram";
      bdev = &remap.bdev;
    } else {
      prepare_in_child(spec, o, d.qd);
      d.settle = settled = ds.kind == DeviceSpec::Kind::emu && !ds.faults && o.settle && !o.completion_thread;
      stop_unless_ok(open_device(ds, spec, d, &device));
      nvme = device.get();
      bdev = device->bdev();
    }
    io = std::make_unique<BlockIo>(bdev, 4096, o.toggles.bio_cache);
    if (int e = io->init(); e) throw std::runtime_error(bioset_init_error(e));
    if (!nvme) {  // null: and ram: are made here (in memory; no thread ends any I/O)
      fs = make_and_fill(*io, o, &ino);
      remap.to_data = true;  // null: from here on, file data goes to the null device
      return;
    }
    // The image is ready: mount it and open the file. Settling, this thread ends every
    // completion itself (the watchdog only unsticks a doorbell of several commands);
    // otherwise, without the driver's completion thread, a helper thread reaps meanwhile.
    set_settling(settled);
    if (!o.completion_thread) poller.start(nvme, settled);
    io->set_block_size(4096);
    MountOptions mo;
    mo.commit_interval_s = 0;
    stop_unless_ok(Filesystem::mount(*io, mo, &fs), "mount: ");
    struct stat st;
    if (int e = fs->lookup(disk::ROOT_INO, "fsio", &st); e)
      throw std::runtime_error(std::string("lookup: ") + std::strerror(-e));
    ino = st.st_ino;
    if (int e = fs->open(ino); e) throw std::runtime_error(std::string("open: ") + std::strerror(-e));
    poller.stop();  // from here on, only the measuring thread reaps
  }
  ~Rig() {
    remap.to_data = false;
    set_settling(false);
    if (nvme && !device_completes) poller.start(nvme);
    if (fs) {
      fs->release(ino);
      fs->unmount();
    }
    fs.reset();
    io.reset();
    poller.stop();
    device.reset();
    ram.reset();
  }
};

// The I/O loop: --qdepth asynchronous calls outstanding, completions counted by their callbacks.
struct Loop {
  Filesystem* fs;
  Device* poller;  // reaps completions (an NVMe driver without its completion thread), or nullptr
  uint64_t ino;
  unsigned qdepth, bs;
  bool random, write;
  uint64_t blocks;  // of --bs in the file
  uint64_t rng;
  uint64_t seq = 0;
  uint64_t mtime_every = 0, writes = 0;
  uint64_t submitted = 0;
  std::atomic<uint64_t> done{0}, errors{0};
  char* buf;

  uint64_t next_offset() {
    uint64_t block;
    if (random) {
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      block = rng % blocks;
    } else {
      block = seq++ % blocks;
    }
    return block * bs;
  }
  void reap() {
    if (poller) {
      poller->poll(true);
    } else {
      std::this_thread::yield();  // a completion thread or a timer ends them
    }
  }
  void run(uint64_t n) {
    const uint64_t target = submitted + n;
    while (submitted < target) {
      while (submitted - done.load(std::memory_order_acquire) >= qdepth) reap();
      const uint64_t off = next_offset();
      submitted++;
      if (write) {
        if (mtime_every && ++writes % mtime_every == 0)
          g_coarse_ns.fetch_add(COARSE_TICK_NS, std::memory_order_relaxed);
        fs->write_async(ino, Kiocb{.ki_pos = off}, bs, buf, [this](ssize_t r) {
          if (r != ssize_t(bs)) errors.fetch_add(1, std::memory_order_relaxed);
          done.fetch_add(1, std::memory_order_release);
        });
      } else {
        fs->read_async(ino, Kiocb{.ki_pos = off}, bs, [this](ssize_t r, const uint8_t*) {
          if (r != ssize_t(bs)) errors.fetch_add(1, std::memory_order_relaxed);
          done.fetch_add(1, std::memory_order_release);
        });
      }
    }
    while (done.load(std::memory_order_acquire) < submitted) reap();
  }
};

// The measured I/Os, between the callgrind requests; out of line so that a profile shows it.
[[gnu::noinline]] void measured_region(Loop& loop, uint64_t n) {
  CALLGRIND_ZERO_STATS;
  loop.run(n);
  CALLGRIND_DUMP_STATS_AT("fsio measured");
}

}  // namespace

int fsio_main(int argc, char** argv) {
  Options o;
  CLI::App app(
      "biofs-bench fsio: the filesystem's file I/O in-process (mkfs, mount, one preallocated file), a fixed\n"
      "number of I/Os through Filesystem::read_async/write_async down to the device, completions reaped\n"
      "on the submitting thread; the measured I/Os sit between callgrind requests (tools/biofs-instructions).",
      "biofs-bench fsio");
  app.add_option("--dev", o.dev,
                 "emu:PATH[,...] (made afresh; ,size= or --image-size) | null:SIZE (metadata on a RAM disk,\n"
                 "file data to null_blk) | ram:SIZE (a RAM disk)")
      ->capture_default_str();
  app.add_option("--rw", o.rw, "pattern")->check(CLI::IsMember({"randread", "read", "randwrite", "write"}))->capture_default_str();
  app.add_option("--qdepth", o.qdepth, "asynchronous I/Os outstanding")->check(CLI::Range(1u, 1024u))->capture_default_str();
  app.add_option("--bs", o.bs, "I/O size, a multiple of 4096")->check(CLI::Range(4096u, 1u << 20))->capture_default_str();
  app.add_option("--ios", o.ios, "measured I/Os")->check(CLI::Range(uint64_t(1), uint64_t(1) << 40))->capture_default_str();
  app.add_option("--warmup", o.warmup, "I/Os before the measured ones")->capture_default_str();
  std::string file_size = "16M", image_size = "64M";
  app.add_option("--file-size", file_size, "the file's size")->capture_default_str();
  app.add_option("--image-size", image_size, "device size for null:, ram: and a new emu: image")->capture_default_str();
  app.add_option("--seed", o.seed, "offset generator seed")->capture_default_str();
  app.add_option("--mtime-every", o.mtime_every,
                 "advance the frozen coarse clock one tick before every Nth write (0: never; on null:, a\n"
                 "commit inside the measured I/Os would go to null_blk too)")->capture_default_str();
  app.add_option("--stage-sample", o.stage_sample, "stage clock sampling, 1 in N (0: off)")->capture_default_str();
  app.add_flag("--completion-thread", o.completion_thread,
               "NVMe devices: complete on the driver's completion thread instead of polling here");
  std::vector<std::string> toggle_values;
  add_toggle_options(app, &toggle_values);
  bool no_settle = false;
  app.add_flag("--no-settle", no_settle,
               "emu: do not wait (uncounted) for each command at its doorbell; the count then depends on\n"
               "the kernel's completion timing");
  app.add_flag("--json", o.json, "one JSON object");
  app.add_option("--trace", o.trace_dir, "blktrace on the data device's queues: biofs.blktrace.* files in this directory");
  if (const int rc = parse_cli(app, argc, argv); rc >= 0) return rc;
  o.settle = !no_settle;
  if (o.bs % 4096) throw std::invalid_argument("--bs=" + std::to_string(o.bs) + ": not a multiple of 4096");
  if (!parse_size(file_size, &o.file_size) || o.file_size % o.bs || o.file_size < o.bs)
    throw std::invalid_argument("--file-size=" + file_size + ": expected a size, a multiple of --bs");
  if (!parse_size(image_size, &o.image_size)) throw std::invalid_argument("--image-size=" + image_size + ": expected a size");
  for (size_t i = 0; i < toggle_table().size(); i++)
    stop_unless_ok(set_toggle(&o.toggles, toggle_table()[i].name, toggle_values[i]),
                   std::string("--") + toggle_table()[i].name + "=" + toggle_values[i] + ": ");

  // Held fixed for the whole process (see the top of this file).
  setenv("BIOFS_BIO_CACHE_TRIM_MS", "3600000", 0);
  stage_clock_set_sample(o.stage_sample);
  freeze_coarse_clock();

  Rig rig(o);
  if (!o.trace_dir.empty()) stop_unless_ok(start_block_trace(*rig.device, o.trace_dir), "--trace: ");
  std::vector<char> wbuf(o.bs);
  for (size_t i = 0; i < wbuf.size(); i++) wbuf[i] = char(i * 7 + 1);
  Loop loop{rig.fs.get(), o.completion_thread ? nullptr : rig.nvme, rig.ino, o.qdepth, o.bs,
            o.rw.rfind("rand", 0) == 0, o.rw.find("write") != std::string::npos, o.file_size / o.bs,
            0x9E3779B97F4A7C15ull ^ (o.seed * 0xBF58476D1CE4E5B9ull)};
  loop.mtime_every = o.mtime_every;
  loop.buf = wbuf.data();
  if (loop.rng == 0) loop.rng = 1;

  CALLGRIND_START_INSTRUMENTATION;
  loop.run(o.warmup);
  const uint64_t bios0 = rig.io->bios.load(), errors0 = loop.errors.load();
  const BioCacheCounters c0 = rig.io->bio_set().has_cache() ? rig.io->bio_set().stats().total : BioCacheCounters{};
  const uint64_t t0 = now_ns();
  measured_region(loop, o.ios);
  const uint64_t t1 = now_ns();
  CALLGRIND_STOP_INSTRUMENTATION;
  if (!o.trace_dir.empty()) std::fputs(stop_block_trace(*rig.device).c_str(), stderr);
  const uint64_t bios = rig.io->bios.load() - bios0, errors = loop.errors.load() - errors0;
  const BioCacheCounters c1 = rig.io->bio_set().has_cache() ? rig.io->bio_set().stats().total : BioCacheCounters{};

  std::string toggles;
  for (const ToggleInfo& t : toggle_table()) toggles += std::string(toggles.empty() ? "" : ",") + t.name + "=" + t.get(o.toggles);
  char base[32];
  std::snprintf(base, sizeof(base), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(&__executable_start));
  if (o.json) {
    Json j = {{"mode", "fsio"}, {"dev", o.dev}, {"rw", o.rw}, {"qdepth", o.qdepth}, {"bs", o.bs},
              {"ios", o.ios}, {"warmup", o.warmup}, {"bios", bios}, {"errors", errors},
              {"cache_hits", c1.alloc_hits - c0.alloc_hits}, {"cache_misses", c1.alloc_misses - c0.alloc_misses},
              {"toggles", toggles}, {"seed", o.seed}, {"mtime_every", o.mtime_every}, {"settle", o.settle && rig.settled},
              {"on_valgrind", unsigned(RUNNING_ON_VALGRIND)}, {"wall_ns_per_io", fixed(double(t1 - t0) / double(o.ios), 1)},
              {"load_base", base}};
    print_line(j);
  } else {
    std::printf("biofs-bench fsio: dev=%s %s bs=%u qdepth=%u %s\n", o.dev.c_str(), o.rw.c_str(), o.bs, o.qdepth,
                toggles.c_str());
    std::printf("measured I/Os=%" PRIu64 " (after %" PRIu64 " warm-up), bios=%" PRIu64 ", errors=%" PRIu64
                ", cache hits=%" PRIu64 " misses=%" PRIu64 ", wall %.0f ns/IO\n",
                o.ios, o.warmup, bios, errors, c1.alloc_hits - c0.alloc_hits, c1.alloc_misses - c0.alloc_misses,
                double(t1 - t0) / double(o.ios));
  }
  return errors ? 1 : 0;
}

}  // namespace biofs::bench
