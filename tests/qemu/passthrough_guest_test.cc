// Runs INSIDE the QEMU guest (tests/qemu/run-in-guest.sh): the NVMe driver over io_uring
// passthrough to the real kernel's /dev/ng0n1, backed by QEMU's NVMe controller. Writes
// patterns through submit_bio, reads them back, checks errors, under each transport option,
// and proves each option did what it says from the kernel's side (interrupts, threads).
// BIOFS_GUEST_DEVICE overrides the device (default nvme:/dev/ng0n1).
//
// Which kernel must support what: fixed buffers for passthrough (IORING_URING_CMD_FIXED) and
// IOPOLL on passthrough are required from Linux 6.12 on, the oldest kernel this suite boots as
// a current one (bookworm-backports); Debian 12's own 6.1 refuses the first and oopses on the
// second, so there the fixed-buffer case accepts a one-line refusal, naming the kernel, and the
// IOPOLL case is not run.
#include <doctest/doctest.h>
#include <dirent.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/bio_set.h"
#include "devices/io_contract.h"
#include "devices/open_device.h"
#include "tests/devices/test_device.h"

using namespace biofs;
using biofs::test::open_test_device;

namespace {

std::string device(const std::string& options = "") {
  const char* env = std::getenv("BIOFS_GUEST_DEVICE");
  return std::string(env ? env : "nvme:/dev/ng0n1") + options;
}

std::string kernel_release() {
  utsname u{};
  uname(&u);
  return u.release;
}
// The running kernel's major.minor as one number (6.12 -> 612).
int kernel_version() {
  int major = 0, minor = 0;
  std::sscanf(kernel_release().c_str(), "%d.%d", &major, &minor);
  return major * 100 + minor;
}
constexpr int kFirstRequiredKernel = 612;

// Interrupts taken by the controller's I/O queues so far (/proc/interrupts, "nvme0q1"…; q0 is
// the admin queue). A poll queue has no interrupt vector.
uint64_t nvme_io_interrupts() {
  std::ifstream in("/proc/interrupts");
  std::string line;
  uint64_t total = 0;
  while (std::getline(in, line)) {
    const size_t at = line.find("nvme0q");
    if (at == std::string::npos || line.compare(at, 7, "nvme0q0") == 0) continue;
    std::istringstream fields(line.substr(line.find(':') + 1));
    uint64_t n;
    while (fields >> n) total += n;
  }
  return total;
}

// Threads of this process whose name starts with `prefix` (io_uring's SQPOLL thread is
// "iou-sqp-PID").
int threads_named(const std::string& prefix) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  REQUIRE(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) == 0) n++;
  }
  closedir(d);
  return n;
}

struct Waiter {
  std::atomic<int> done{0};
  std::atomic<int> errors{0};
};
void end_io(Bio* bio) {
  auto* w = static_cast<Waiter*>(bio->bi_private);
  if (bio->bi_status != BLK_STS_OK) w->errors++;
  bio_put(bio);
  w->done++;
}

// Submits one bio over [buf, buf + len) at byte offset `pos` and waits for it.
int do_io(Device& dev, BioSet& bs, blk_opf_t op, uint8_t* buf, uint32_t len, uint64_t pos, bool poll) {
  Waiter w;
  const uint16_t vecs = uint16_t(len / PAGE_SIZE + 2);
  Bio* bio = bio_alloc_bioset(dev.bdev(), vecs, op, GFP_KERNEL, &bs);
  if (len) REQUIRE(bio_add_virt(bio, buf, len) == len);
  bio->bi_iter.bi_sector = pos >> SECTOR_SHIFT;
  bio->bi_end_io = end_io;
  bio->bi_private = &w;
  submit_bio(bio);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!w.done.load()) {
    if (poll) dev.poll(true);
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
  return w.errors.load();
}

void fill(std::vector<uint8_t>& v, uint32_t seed) {
  for (size_t i = 0; i < v.size(); i++) v[i] = uint8_t((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

// Writes, flushes and reads back patterns of several sizes and alignments; returns the data
// commands the device was sent.
struct RoundTrip {
  uint64_t fixed_buffer_cmds = 0;
  int sqpoll_threads = 0;
};
// `polled_bios`: REQ_POLLED on a poll queue of the device's own (blk_poll.h), as io_uring's
// IOPOLL sends them; with `iopoll` in the spec that queue is an IOPOLL ring.
RoundTrip round_trip(const std::string& spec, bool poll, bool polled_bios = false) {
  DeviceOptions opts;
  opts.completion_thread = !poll;
  if (polled_bios) opts.poll_queues = 1;
  const blk_opf_t hipri = polled_bios ? REQ_POLLED : 0;
  auto dev = open_test_device(spec, opts);
  MESSAGE(dev->nvme()->describe());
  RoundTrip seen;
  seen.sqpoll_threads = threads_named("iou-sqp-");
  const uint32_t lbs = dev->nvme()->lba_size();
  BioSet bs(16, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  // Aligned, unaligned (starts 100 bytes into a page) and larger than MDTS (split).
  for (uint32_t len : {lbs, 8u * 4096u, 1u << 20}) {
    for (size_t misalign : {size_t(0), size_t(100)}) {
      std::vector<uint8_t> raw(len + 2 * PAGE_SIZE), back(len + 2 * PAGE_SIZE);
      uint8_t* out = raw.data() + misalign;
      uint8_t* in = back.data() + misalign;
      std::vector<uint8_t> pattern(len);
      fill(pattern, len + uint32_t(misalign));
      std::memcpy(out, pattern.data(), len);
      const uint64_t pos = uint64_t(len) * 3 + misalign * lbs;
      CHECK(do_io(*dev, bs, REQ_OP_WRITE | hipri, out, len, pos, poll) == 0);
      CHECK(do_io(*dev, bs, REQ_OP_FLUSH | REQ_PREFLUSH, nullptr, 0, 0, poll) == 0);
      std::memset(in, 0, len);
      CHECK(do_io(*dev, bs, REQ_OP_READ | hipri, in, len, pos, poll) == 0);
      CHECK(std::memcmp(in, pattern.data(), len) == 0);
    }
  }
  // Past the end of the namespace: the controller's LBA Out of Range becomes an error.
  std::vector<uint8_t> block(lbs);
  const uint64_t end = uint64_t(dev->bdev()->capacity) << SECTOR_SHIFT;
  CHECK(do_io(*dev, bs, REQ_OP_READ | hipri, block.data(), lbs, end, poll) == 1);
  seen.fixed_buffer_cmds = dev->nvme()->fixed_buffer_cmds();
  return seen;
}

}  // namespace

TEST_CASE("passthrough: write, flush, read back through the real kernel's /dev/ng0n1") {
  const uint64_t irqs = nvme_io_interrupts();
  const RoundTrip seen = round_trip(device(), false);
  CHECK(nvme_io_interrupts() > irqs);  // interrupt-driven queues: the controller interrupted
  CHECK(seen.fixed_buffer_cmds == 0);
  CHECK(seen.sqpoll_threads == 0);
}

TEST_CASE("passthrough: the submitter polls its own completions") { round_trip(device(), true); }

TEST_CASE("passthrough: registered files") { round_trip(device(",regfiles"), false); }

TEST_CASE("passthrough: fixed buffers carry every data command on a current kernel") {
  if (kernel_version() < kFirstRequiredKernel) {
    std::unique_ptr<Device> dev;
    const std::string refused = open_device(device(",fixedbufs"), DeviceOptions{}, &dev).message();
    if (!refused.empty()) {
      MESSAGE("Linux " << kernel_release() << " refuses fixed buffers for passthrough: " << refused);
      CHECK(refused.find("fixed buffers") != std::string::npos);
      CHECK(refused.find('\n') == std::string::npos);
      return;
    }
  }
  // 6 writes and 6 reads of up to 1 MiB (split at MDTS) and the read past the end: each
  // command through its registered slot.
  CHECK(round_trip(device(",fixedbufs"), false).fixed_buffer_cmds >= 13);
}

TEST_CASE("passthrough: completion polling (IOPOLL) on the device's poll queues, without an interrupt") {
  if (kernel_version() < kFirstRequiredKernel) {
    MESSAGE("Linux " << kernel_release() << ": IOPOLL on passthrough not run (Debian 12's 6.1 oopses on it)");
    return;
  }
  round_trip(device(",iopoll"), true, true);
  // Reads and writes that need no split stay polled (a split one is not: bio_clear_polled) and
  // complete without an interrupt; flushes, never polled, go to the default queue.
  DeviceOptions opts;
  opts.completion_thread = false;
  opts.poll_queues = 1;
  auto dev = open_test_device(device(",iopoll"), opts);
  BioSet bs(16, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  std::vector<uint8_t> out(16 * 4096), in(out.size());
  fill(out, 99);
  const uint64_t irqs = nvme_io_interrupts();
  for (unsigned i = 0; i < 16; i++)
    CHECK(do_io(*dev, bs, REQ_OP_WRITE | REQ_POLLED, out.data() + i * 4096, 4096, (128u << 20) + i * 4096, true) == 0);
  for (unsigned i = 0; i < 16; i++)
    CHECK(do_io(*dev, bs, REQ_OP_READ | REQ_POLLED, in.data() + i * 4096, 4096, (128u << 20) + i * 4096, true) == 0);
  CHECK(nvme_io_interrupts() == irqs);
  CHECK(in == out);
  // A default queue stays interrupt-driven under iopoll (nvme-pci's HCTX_TYPE_DEFAULT): an
  // IOPOLL ring there has its completion thread spin holding the ring's lock.
  CHECK(do_io(*dev, bs, REQ_OP_WRITE, out.data(), 4096, 128u << 20, true) == 0);
  CHECK(nvme_io_interrupts() > irqs);
}

TEST_CASE("passthrough: iopoll without poll queues is named in the I/O contract") {
  const DeviceOptions none;  // poll_queues = 0
  auto dev = open_test_device(device(",iopoll"), none);
  const IoContract c = io_contract(*dev, none);
  REQUIRE(c.unavailable.size() == 1);
  CHECK(c.unavailable[0].find("iopoll: no poll queues") == 0);
  DeviceOptions one;
  one.poll_queues = 1;
  auto polled = open_test_device(device(",iopoll"), one);
  CHECK(io_contract(*polled, one).unavailable.empty());
}

TEST_CASE("passthrough: a kernel submission thread (SQPOLL) per ring") {
  CHECK(round_trip(device(",sqpoll"), false).sqpoll_threads >= 1);
  for (int i = 0; i < 200 && threads_named("iou-sqp-"); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(threads_named("iou-sqp-") == 0);  // gone with the rings
}

TEST_CASE("passthrough: many threads, each its own region, all data intact") {
  DeviceOptions opts;
  opts.queues = 2;
  auto dev = open_test_device(device(), opts);
  BioSet bs(16, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out(64 * 1024), in(64 * 1024);
      for (int round = 0; round < 8; round++) {
        fill(out, uint32_t(t * 100 + round));
        const uint64_t pos = (uint64_t(t) * 8 + uint64_t(round)) * out.size();
        if (do_io(*dev, bs, REQ_OP_WRITE, out.data(), uint32_t(out.size()), pos, false)) bad++;
        if (do_io(*dev, bs, REQ_OP_READ, in.data(), uint32_t(in.size()), pos, false)) bad++;
        if (in != out) bad++;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
}

// Leaves 1 MiB of 0xa5 at 64 MiB for fio's io_uring_cmd engine to verify (guest-checks.sh):
// an independent witness of what went to the device.
TEST_CASE("passthrough: leave a pattern for fio") {
  auto dev = open_test_device(device(), DeviceOptions{});
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  std::vector<uint8_t> buf(1 << 20, 0xa5);
  CHECK(do_io(*dev, bs, REQ_OP_WRITE, buf.data(), uint32_t(buf.size()), 64u << 20, false) == 0);
  CHECK(do_io(*dev, bs, REQ_OP_FLUSH | REQ_PREFLUSH, nullptr, 0, 0, false) == 0);
}

TEST_CASE("passthrough: clear errors for a missing device") {
  std::unique_ptr<Device> dev;
  const Status s = open_device("nvme:/dev/ng9n9", DeviceOptions{}, &dev);
  CHECK(s.code() == Status::Code::not_found);
  CHECK(s.message().find("/dev/ng9n9") != std::string::npos);
}
