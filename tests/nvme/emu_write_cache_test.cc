// The emulated namespace's volatile write cache (nvme/emu_write_cache.h), alone and through
// the namespace's commands: each rule of the header's list, held by a test that fails when
// that rule breaks.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nvme/emu_write_cache.h"
#include "nvme_test_util.h"

using namespace biofs;

namespace {

// A scratch file on disk (the cache is for files O_DIRECT reaches) of `size` zero bytes.
struct ScratchFile {
  std::string path;
  int fd = -1, direct = -1;
  explicit ScratchFile(off_t size) {
    char tmpl[] = "/var/tmp/biofs-wcache-XXXXXX";
    fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    path = tmpl;
    REQUIRE(ftruncate(fd, size) == 0);
    direct = open(path.c_str(), O_RDWR | O_DIRECT);  // -1 where the file system has none: buffered only
  }
  ~ScratchFile() {
    if (direct >= 0) close(direct);
    close(fd);
    unlink(path.c_str());
  }
  std::vector<uint8_t> read(off_t off, size_t len) const {
    std::vector<uint8_t> out(len);
    REQUIRE(pread(fd, out.data(), len, off) == ssize_t(len));
    return out;
  }
};

std::vector<uint8_t> filled(size_t len, uint8_t v) { return std::vector<uint8_t>(len, v); }

void insert(EmuWriteCache& c, uint64_t off, std::vector<uint8_t>& data) {
  iovec v{data.data(), data.size()};
  REQUIRE(c.insert(off, &v, 1, data.size()));
}

// What a read of [off, off + len) returns, in the namespace's order: the cached writes it
// overlaps, taken first, then the file, then those writes over it. (The other order could miss
// a write put on the file and retired between the file read and the lookup.)
std::vector<uint8_t> read_through(EmuWriteCache& c, const ScratchFile& f, uint64_t off, size_t len) {
  const EmuWriteCache::Overlay o = c.overlapping(off, len);
  std::vector<uint8_t> out = f.read(off_t(off), len);
  iovec v{out.data(), len};
  EmuWriteCache::apply(o, off, len, &v, 1);
  return out;
}

bool all_equal(const std::vector<uint8_t>& v, uint8_t x) {
  for (uint8_t b : v)
    if (b != x) return false;
  return true;
}

}  // namespace

TEST_CASE("write cache: a write is copied at insert, so the caller's memory is free at once") {
  ScratchFile f(1 << 20);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 1 << 20, &cache).ok());
  EmuWriteCache& c = *cache;
  c.hold_writeback(true);
  auto data = filled(4096, 0xAB);
  insert(c, 8192, data);
  std::memset(data.data(), 0, data.size());  // the caller reuses its buffer
  CHECK(all_equal(read_through(c, f, 8192, 4096), 0xAB));
  c.hold_writeback(false);
  c.wait_written_back();
  CHECK(all_equal(f.read(8192, 4096), 0xAB));
}

TEST_CASE("write cache: a read sees the newest of overlapping cached writes, over the media's bytes") {
  ScratchFile f(1 << 20);
  auto media = filled(16384, 0x11);
  REQUIRE(pwrite(f.fd, media.data(), media.size(), 0) == ssize_t(media.size()));
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 1 << 20, &cache).ok());
  EmuWriteCache& c = *cache;
  c.hold_writeback(true);
  auto a = filled(8192, 0xA0), b = filled(4096, 0xB0);
  insert(c, 0, a);     // [0, 8192)
  insert(c, 4096, b);  // [4096, 8192): newer
  const std::vector<uint8_t> got = read_through(c, f, 0, 16384);
  CHECK(all_equal({got.begin(), got.begin() + 4096}, 0xA0));
  CHECK(all_equal({got.begin() + 4096, got.begin() + 8192}, 0xB0));
  CHECK(all_equal({got.begin() + 8192, got.end()}, 0x11));  // not cached: the media's
  CHECK(EmuWriteCache::covers(c.overlapping(0, 8192), 0, 8192));
  CHECK_FALSE(EmuWriteCache::covers(c.overlapping(0, 16384), 0, 16384));
  CHECK(c.overlapping(8192, 8192).entries.empty());
  CHECK(all_equal(f.read(0, 4096), 0x11));  // nothing written back while held
  c.hold_writeback(false);
}

TEST_CASE("write cache: overlapping writes reach the media in the order they were accepted") {
  ScratchFile f(4 << 20);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 4 << 20, &cache).ok());
  EmuWriteCache& c = *cache;
  // Held: one batch holds all of them, and the later bytes must win inside it.
  c.hold_writeback(true);
  std::vector<std::vector<uint8_t>> w;
  for (int i = 0; i < 20; i++) w.push_back(filled(4096 * (1 + i % 3), uint8_t(i + 1)));
  for (int i = 0; i < 20; i++) insert(c, 4096 * (i % 4), w[size_t(i)]);
  c.hold_writeback(false);
  c.wait_written_back();
  // Block k was last written by the last i with i % 4 <= k < i % 4 + 1 + i % 3.
  for (int k = 0; k < 6; k++) {
    int last = -1;
    for (int i = 0; i < 20; i++)
      if (i % 4 <= k && k < i % 4 + 1 + i % 3) last = i;
    INFO("block " << k);
    CHECK(all_equal(f.read(4096 * k, 4096), uint8_t(last + 1)));
  }
  // Not held: many batches (WRITEBACK_BATCH writes each) over one block; the last one wins.
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 200; i++) {
      auto d = filled(4096, uint8_t(i));
      insert(c, 1 << 20, d);
    }
    c.wait_written_back();
    CHECK(all_equal(f.read(1 << 20, 4096), uint8_t(199)));
  }
  CHECK(c.stats().batches > 1);
}

TEST_CASE("write cache: a full cache makes the writer wait for room, never drops or grows past it") {
  ScratchFile f(1 << 20);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 16384, &cache).ok());
  EmuWriteCache& c = *cache;
  c.hold_writeback(true);
  auto d = filled(8192, 0x5A);
  insert(c, 0, d);
  insert(c, 8192, d);  // full now
  std::atomic<bool> done{false};
  std::thread t([&] {
    auto e = filled(4096, 0x77);
    insert(c, 65536, e);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(done.load());  // waiting for room
  CHECK(c.dirty_bytes() == 16384);
  c.hold_writeback(false);
  t.join();
  c.wait_written_back();
  CHECK(c.stats().full_waits == 1);
  CHECK(all_equal(f.read(65536, 4096), 0x77));
  CHECK(all_equal(f.read(0, 16384), 0x5A));
}

TEST_CASE("write cache: a span a read still copies from is not reused, even once its write is on the media") {
  ScratchFile f(1 << 20);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 16384, &cache).ok());
  EmuWriteCache& c = *cache;  // a ring of two 8 KiB spans
  auto a = filled(8192, 0xA1), b = filled(8192, 0xB2);
  insert(c, 0, a);
  std::optional<EmuWriteCache::Overlay> o(c.overlapping(0, 8192));  // a read pins A's span
  REQUIRE(o->entries.size() == 1);
  c.wait_written_back();  // A is on the media: only the pin holds its span
  insert(c, 65536, b);
  std::atomic<bool> done{false};
  std::thread t([&] {
    auto d = filled(8192, 0xC3);
    insert(c, 131072, d);  // the ring's next span is A's
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(done.load());
  std::vector<uint8_t> got(8192, 0);
  iovec v{got.data(), got.size()};
  EmuWriteCache::apply(*o, 0, 8192, &v, 1);
  CHECK(all_equal(got, 0xA1));  // still A's bytes
  o.reset();  // the read is done: A's span is free
  t.join();
  c.wait_written_back();
  CHECK(all_equal(f.read(131072, 8192), 0xC3));
  CHECK(c.ring_bytes() <= 16384);
}

TEST_CASE("write cache: a write larger than the whole cache is refused, and nothing of it is cached") {
  ScratchFile f(1 << 20);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 16384, &cache).ok());
  EmuWriteCache& c = *cache;
  auto big = filled(16384 + 4096, 0xEE);
  iovec v{big.data(), big.size()};
  CHECK_FALSE(c.insert(0, &v, 1, big.size()));
  CHECK(c.stats().too_large == 1);
  CHECK(c.stats().writes == 0);
  CHECK_FALSE(c.dirty());
  auto fits = filled(16384, 0xEF);  // the whole cache is still one write's
  insert(c, 0, fits);
  c.wait_written_back();
  CHECK(all_equal(f.read(0, 16384), 0xEF));
}

TEST_CASE("write cache: wait_written_back returns only once every accepted write is on the media") {
  ScratchFile f(8 << 20);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 8 << 20, &cache).ok());
  EmuWriteCache& c = *cache;
  std::vector<uint8_t> d = filled(65536, 0);
  for (int i = 0; i < 100; i++) {
    std::memset(d.data(), i + 1, d.size());
    insert(c, uint64_t(i) * 65536, d);
  }
  c.wait_written_back();
  CHECK_FALSE(c.dirty());
  for (int i = 0; i < 100; i++) CHECK(all_equal(f.read(off_t(i) * 65536, 65536), uint8_t(i + 1)));
}

TEST_CASE("write cache: a flush with no batch being written writes the cache back on its own thread") {
  // As fsync writes a file's dirty pages from its caller's context: no hand-off to the writer
  // thread and back. With that thread held, only the waiter can write anything.
  ScratchFile f(1 << 20);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 1 << 20, &cache).ok());
  EmuWriteCache& c = *cache;
  c.hold_writer_thread(true);
  auto a = filled(8192, 0xC1), b = filled(4096, 0xC2);
  insert(c, 0, a);
  insert(c, 65536, b);
  auto flushed = std::async(std::launch::async, [&] { c.wait_written_back(); });
  const bool done = flushed.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  c.hold_writer_thread(false);  // so a waiter that only sleeps still ends
  flushed.wait();
  CHECK(done);
  CHECK(c.stats().waiter_batches == c.stats().batches);
  CHECK(c.stats().batches >= 1);
  CHECK_FALSE(c.dirty());
  CHECK(all_equal(f.read(0, 8192), 0xC1));
  CHECK(all_equal(f.read(65536, 4096), 0xC2));
}

TEST_CASE("write cache: a write the media refuses is reported once, by the next take_error") {
  ScratchFile f(1 << 20);
  const int ro = open(f.path.c_str(), O_RDONLY);
  REQUIRE(ro >= 0);
  {
    std::unique_ptr<EmuWriteCache> cache;
    REQUIRE(EmuWriteCache::create("test", -1, ro, 512, 1 << 20, &cache).ok());
    EmuWriteCache& c = *cache;
    auto d = filled(4096, 1);
    insert(c, 0, d);
    c.wait_written_back();
    CHECK(c.take_error() == -EBADF);
    CHECK(c.take_error() == 0);
  }
  close(ro);
}

TEST_CASE("write cache: 8 threads writing and reading back their own blocks, while the writer drains, see their newest data") {
  // Each thread owns 16 blocks and writes them over and over with a new generation each time,
  // sometimes two blocks at once, reading a block back (file, then the cache over it) after each
  // write. A small cache keeps the writer busy and the inserters waiting for room.
  constexpr int kThreads = 8, kBlocks = 16, kRounds = 400;
  ScratchFile f(off_t(kThreads) * kBlocks * 4096);
  std::unique_ptr<EmuWriteCache> cache;
  REQUIRE(EmuWriteCache::create("test", f.direct, f.fd, 512, 256 << 10, &cache).ok());
  EmuWriteCache& c = *cache;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::vector<uint8_t> gen(kBlocks, 0);
      uint32_t x = uint32_t(t) * 2654435761u + 1;
      for (int r = 0; r < kRounds; r++) {
        x = x * 1103515245u + 12345u;
        const int b = int(x >> 8) % kBlocks, n = (b + 1 < kBlocks && (x & 1)) ? 2 : 1;
        std::vector<uint8_t> d(size_t(n) * 4096);
        for (int k = 0; k < n; k++) {
          gen[size_t(b + k)]++;
          std::memset(d.data() + size_t(k) * 4096, gen[size_t(b + k)], 4096);
        }
        const uint64_t off = (uint64_t(t) * kBlocks + uint64_t(b)) * 4096;
        insert(c, off, d);
        const std::vector<uint8_t> got = read_through(c, f, off, 4096);
        if (!all_equal(got, gen[size_t(b)])) bad++;
      }
      c.wait_written_back();
      for (int b = 0; b < kBlocks; b++)
        if (!all_equal(f.read(off_t((t * kBlocks + b) * 4096), 4096), gen[size_t(b)])) bad++;
    });
  }
  for (auto& th : ts) th.join();
  CHECK(bad.load() == 0);
  CHECK_FALSE(c.dirty());
  CHECK(c.stats().writes == uint64_t(kThreads) * kRounds);
}
