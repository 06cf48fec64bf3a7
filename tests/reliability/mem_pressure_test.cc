// Memory pressure: the allocator under the bio sets fails a chosen fraction of allocations
// (blockcore's Allocator failure hook), and the whole stack — filesystem, bio sets, splits,
// the NVMe driver on the emulated namespace — must keep completing I/O from the mempool
// reserves: no deadlock, no lost request, with the bio cache on and off, one thread or several.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "rel_util.h"
#include "fs/io_batch.h"
#include "fs/io_buf.h"

using namespace biofs_test;

namespace {

// Fails allocations with probability `frac` (seeded, the same sequence each run).
struct FailCtx {
  std::atomic<uint64_t> n{0}, failed{0};
  uint64_t threshold = 0;  // of 2^32
  explicit FailCtx(double frac) : threshold(frac >= 1 ? (1ull << 32) : uint64_t(frac * 4294967296.0)) {}
  static bool hook(void* c) {
    auto* f = static_cast<FailCtx*>(c);
    const uint64_t i = f->n.fetch_add(1, std::memory_order_relaxed);
    uint64_t x = i * 0x9E3779B97F4A7C15ull + 12345;
    x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
    const bool fail = (x >> 32) < f->threshold;
    if (fail) f->failed.fetch_add(1, std::memory_order_relaxed);
    return fail;
  }
};

struct Hooked {  // hooks every bio set on the path: the fs's and the queue's split set
  std::vector<Allocator*> allocs;
  Hooked(BlockIo& io, RequestQueue* q, FailCtx* ctx) {
    allocs = {&io.bio_set().allocator(), &q->bio_split().allocator()};
    for (Allocator* a : allocs) a->set_fail_hook(&FailCtx::hook, ctx);
  }
  ~Hooked() {
    for (Allocator* a : allocs) a->set_fail_hook(nullptr, nullptr);
  }
};

}  // namespace

TEST_CASE("memory pressure: the filesystem completes every operation when allocations fail") {
  ScratchDir dir;
  const std::string img = dir.file("fs.img");
  for (double frac : {0.5, 1.0}) {
    for (BioCache cache : {BioCache::on, BioCache::home, BioCache::off}) {
      CAPTURE(frac);
      CAPTURE(bio_cache_name(cache));
      make_image(img, 24ull << 20);
      Workload w(uint64_t(frac * 10) + unsigned(cache));
      uint64_t reserve = 0;
      FailCtx ctx(frac);
      {
        Mounted m = open_fs("emu:" + img, true, cache);
        REQUIRE(m.fs);
        Hooked h(*m.io, m.dev->queue(), &ctx);
        FsBackend be(*m.fs);
        REQUIRE(w.setup(be) == 0);
        for (int i = 0; i < 150; i++) REQUIRE(w.step(be) == 0);
        // Large writes: bios of 1 MiB that the queue splits, clones from the split set's reserve.
        const std::string big = pattern_data(3 << 20, 7);
        REQUIRE(be.create("/big") == 0);
        REQUIRE(be.write("/big", 0, big) == 0);
        std::string back;
        REQUIRE(be.read("/big", &back) == 0);
        CHECK(back == big);
        REQUIRE(m.fs->unmount() == 0);
        reserve = m.io->bio_set().stats().reserve_allocs;
      }
      CHECK(ctx.failed > 0);
      CHECK(reserve > 0);
      Mounted m = open_fs("emu:" + img);
      REQUIRE(m.fs);
      FsBackend be(*m.fs);
      CHECK(w.check(be) == "");
      for (const auto& [path, data] : w.files()) {
        std::string got;
        REQUIRE(be.read(path, &got) == 0);
        CHECK_MESSAGE(got == data, path);
      }
      REQUIRE(m.fs->unmount() == 0);
    }
  }
}

// Several submitters, each with a plug full of bios, while every allocation fails: the
// reserve is smaller than what they hold together, so a submitter that waits for it must
// first send what its plug holds (as the kernel's schedule() flushes a plug).
TEST_CASE("memory pressure: concurrent submitters share a small reserve without deadlock") {
  ScratchDir dir;
  for (BioCache cache : {BioCache::on, BioCache::home, BioCache::off}) {
    CAPTURE(bio_cache_name(cache));
    auto dev = open_test_device("emu:" + dir.file("d.img") + ",size=64M", DeviceOptions{});
    BlockIo io(dev->bdev(), 4096, cache);
    REQUIRE(io.init() == 0);
    FailCtx ctx(1.0);
    Hooked h(io, dev->queue(), &ctx);
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
      threads.emplace_back([&, t] {
        IoBuf buf(4096 * 48);
        std::memset(buf.data(), 'a' + t, buf.size());
        for (int round = 0; round < 30; round++) {
          IoBatch b(&io);
          // 48 one-block bios that do not merge, and one 1 MiB bio that the queue splits.
          for (int i = 0; i < 48; i++) b.write(uint64_t(t * 4096 + round * 100 + i * 2), 1, buf.data() + i * 4096);
          b.write(uint64_t(t * 4096 + 3000), 48, buf.data());
          if (b.wait()) errors++;
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(errors == 0);
    CHECK(io.bio_set().stats().reserve_allocs > 0);
    std::string back(4096, '\0');
    REQUIRE(io.read(2 * 4096 + 3000, 1, back.data()) == 0);  // hook still on: reads too
    CHECK(back == std::string(4096, 'c'));
  }
}
