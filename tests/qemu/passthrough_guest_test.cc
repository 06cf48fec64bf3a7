// Runs INSIDE the QEMU guest (tests/qemu/run-in-guest.sh): the NVMe driver over io_uring
// passthrough to the real kernel's /dev/ng0n1, backed by QEMU's NVMe controller. Writes
// patterns through submit_bio, reads them back, checks errors, under each transport option.
// BIOFS_GUEST_DEVICE overrides the device (default nvme:/dev/ng0n1).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/bio_set.h"
#include "devices/open_device.h"

using namespace biofs;

namespace {

std::string device(const std::string& options = "") {
  const char* env = std::getenv("BIOFS_GUEST_DEVICE");
  return std::string(env ? env : "nvme:/dev/ng0n1") + options;
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

void round_trip(const std::string& spec, bool poll) {
  DeviceOptions opts;
  opts.completion_thread = !poll;
  auto dev = open_device(spec, opts);
  MESSAGE(dev->nvme()->describe());
  const uint32_t lbs = dev->nvme()->lba_size();
  BioSet bs(16, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
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
      CHECK(do_io(*dev, bs, REQ_OP_WRITE, out, len, pos, poll) == 0);
      CHECK(do_io(*dev, bs, REQ_OP_FLUSH | REQ_PREFLUSH, nullptr, 0, 0, poll) == 0);
      std::memset(in, 0, len);
      CHECK(do_io(*dev, bs, REQ_OP_READ, in, len, pos, poll) == 0);
      CHECK(std::memcmp(in, pattern.data(), len) == 0);
    }
  }
  // Past the end of the namespace: the controller's LBA Out of Range becomes an error.
  std::vector<uint8_t> block(lbs);
  const uint64_t end = uint64_t(dev->bdev()->capacity) << SECTOR_SHIFT;
  CHECK(do_io(*dev, bs, REQ_OP_READ, block.data(), lbs, end, poll) == 1);
}

}  // namespace

TEST_CASE("passthrough: write, flush, read back through the real kernel's /dev/ng0n1") {
  round_trip(device(), false);
}

TEST_CASE("passthrough: the submitter polls its own completions") { round_trip(device(), true); }

TEST_CASE("passthrough: registered files") { round_trip(device(",regfiles"), false); }

TEST_CASE("passthrough: fixed buffers either work or are refused at open, in one line") {
  std::string refused;
  try {
    open_device(device(",fixedbufs"), DeviceOptions{});
  } catch (const std::runtime_error& e) {
    refused = e.what();
  }
  if (!refused.empty()) {
    MESSAGE(refused);
    CHECK(refused.find("fixed buffers") != std::string::npos);
    CHECK(refused.find('\n') == std::string::npos);
    return;
  }
  round_trip(device(",fixedbufs"), false);
}

TEST_CASE("passthrough: completion polling (IOPOLL) on the device's poll queues") {
  round_trip(device(",iopoll"), true);
}

TEST_CASE("passthrough: many threads, each its own region, all data intact") {
  DeviceOptions opts;
  opts.queues = 2;
  auto dev = open_device(device(), opts);
  BioSet bs(16, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
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
  auto dev = open_device(device(), DeviceOptions{});
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  std::vector<uint8_t> buf(1 << 20, 0xa5);
  CHECK(do_io(*dev, bs, REQ_OP_WRITE, buf.data(), uint32_t(buf.size()), 64u << 20, false) == 0);
  CHECK(do_io(*dev, bs, REQ_OP_FLUSH | REQ_PREFLUSH, nullptr, 0, 0, false) == 0);
}

TEST_CASE("passthrough: clear errors for a missing device") {
  CHECK_THROWS_WITH_AS(open_device("nvme:/dev/ng9n9", DeviceOptions{}),
                       doctest::Contains("/dev/ng9n9"), std::runtime_error);
}
