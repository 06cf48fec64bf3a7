// Helpers for the nvme tests: temporary backing files, synchronous bio I/O against a device,
// and patterns.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "blockcore/bio_set.h"
#include "devices/open_device.h"
#include "tests/devices/test_device.h"

namespace biofs::test {

// A path under $TMPDIR (or /tmp) removed at scope exit.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& tag) {
    const char* dir = std::getenv("TMPDIR");
    path = std::string(dir && *dir ? dir : "/tmp") + "/biofs-nvme-" + tag + "-" + std::to_string(getpid()) + "-" +
           std::to_string(counter()++);
    unlink(path.c_str());
  }
  ~TempPath() { unlink(path.c_str()); }
  static std::atomic<int>& counter() {
    static std::atomic<int> n{0};
    return n;
  }
};

struct IoWait {
  std::atomic<int> done{0};
  std::atomic<int> status{BLK_STS_OK};
};

inline void io_wait_end(Bio* bio) {
  auto* w = static_cast<IoWait*>(bio->bi_private);
  const blk_status_t st = bio->bi_status;
  bio_put(bio);
  if (st != BLK_STS_OK) w->status.store(st, std::memory_order_relaxed);
  w->done.fetch_add(1, std::memory_order_release);
}

// Builds a bio for `op` over buf/len (data ops) or a length only (discard, write zeroes).
inline Bio* make_bio_on(BlockDevice* bdev, BioSet& bs, blk_opf_t op, sector_t sector, void* buf, uint32_t len,
                        IoWait* w) {
  const bool data = bio_op_of(op) == REQ_OP_READ || bio_op_of(op) == REQ_OP_WRITE;
  Bio* bio = bio_alloc_bioset(bdev, data ? 1 : 0, op, GFP_KERNEL, &bs);
  if (data)
    REQUIRE(bio_add_virt(bio, buf, len) == len);
  else
    bio->bi_iter.bi_size = len;
  bio->bi_iter.bi_sector = sector;
  bio->bi_end_io = io_wait_end;
  bio->bi_private = w;
  return bio;
}
inline Bio* make_bio(Device& dev, BioSet& bs, blk_opf_t op, sector_t sector, void* buf, uint32_t len, IoWait* w) {
  return make_bio_on(dev.bdev(), bs, op, sector, buf, len, w);
}

// Waits for `n` completions, polling the device when it has no completion thread.
inline void wait_for(Device& dev, IoWait& w, int n) {
  while (w.done.load(std::memory_order_acquire) < n) {
    if (dev.poll(true) == 0) std::this_thread::yield();
  }
}

// One bio, submitted and waited for; returns its status.
inline blk_status_t sync_io(Device& dev, BioSet& bs, blk_opf_t op, sector_t sector, void* buf, uint32_t len) {
  IoWait w;
  submit_bio(make_bio(dev, bs, op, sector, buf, len, &w));
  wait_for(dev, w, 1);
  return blk_status_t(w.status.load());
}

inline void fill_pattern(uint8_t* p, size_t len, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < len; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = uint8_t(x);
  }
}

}  // namespace biofs::test
