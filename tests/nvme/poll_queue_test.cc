// Poll queues and polling groups (blockcore/blk_poll.h) on the emulated namespace: polled bios
// end in the thread that submitted them, never on a completion thread, and a synchronous fs
// batch is reaped by its waiter; what cannot be polled (no poll queues, a write behind a
// pre-flush) completes the usual way and the group still ends; a poll queue
// short of tags does not deadlock its submitter; many threads sharing fewer poll queues keep
// their data. Written for ThreadSanitizer too (the `concurrent` label).
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "blockcore/blk_poll.h"
#include "fs/block_io.h"
#include "fs/filesystem.h"
#include "fs/io_batch.h"
#include "fs/io_buf.h"
#include "fs/mkfs.h"
#include "../fs/fs_mount.h"
#include "nvme_test_util.h"

using namespace biofs;
using namespace biofs::test;

namespace {

// One bio's end: where it ran, its status, the group's count.
struct Ended {
  std::atomic<int> done{0};
  std::atomic<int> status{BLK_STS_OK};
  std::atomic<int> off_thread{0};  // ends that ran on a thread other than the submitter's
  std::atomic<int> polled{0};      // ends of bios that still carried REQ_POLLED
  std::thread::id submitter = std::this_thread::get_id();
  BlkPollGroup* group = nullptr;
};

void ended(Bio* bio) {
  auto* e = static_cast<Ended*>(bio->bi_private);
  if (bio->bi_status != BLK_STS_OK) e->status.store(bio->bi_status, std::memory_order_relaxed);
  if (std::this_thread::get_id() != e->submitter) e->off_thread.fetch_add(1, std::memory_order_relaxed);
  if (bio->bi_opf & REQ_POLLED) e->polled.fetch_add(1, std::memory_order_relaxed);
  BlkPollGroup* g = e->group;
  bio_put(bio);
  e->done.fetch_add(1, std::memory_order_release);
  if (g) g->pending.fetch_sub(1, std::memory_order_release);
}

Bio* polled_bio(Device& dev, BioSet& bs, blk_opf_t op, sector_t sector, void* buf, uint32_t len, Ended* e) {
  Bio* bio = bio_alloc_bioset(dev.bdev(), 1, op | REQ_POLLED, GFP_KERNEL, &bs);
  REQUIRE(bio_add_virt(bio, buf, len) == len);
  bio->bi_iter.bi_sector = sector;
  bio->bi_end_io = ended;
  bio->bi_private = e;
  if (e->group) e->group->pending.fetch_add(1, std::memory_order_relaxed);
  return bio;
}

// `n` bios of `len` bytes from sector `base`, in one plug, then the group's wait.
void polled_batch(Device& dev, BioSet& bs, blk_opf_t op, sector_t base, uint8_t* buf, unsigned n, uint32_t len,
                  Ended* e) {
  BlkPollGroup g;
  const bool open = blk_poll_group_start(&g, dev.queue());
  e->group = open ? &g : nullptr;
  BlkPlug plug;
  blk_start_plug_nr_ios(&plug, uint16_t(n));
  for (unsigned i = 0; i < n; i++) submit_bio(polled_bio(dev, bs, op, base + sector_t(i) * (len / 512), buf + size_t(i) * len, len, e));
  blk_finish_plug(&plug);
  if (open) blk_poll_group_wait(&g);
  e->group = nullptr;
}

void wait_done(Ended& e, int n) {
  while (e.done.load(std::memory_order_acquire) < n) std::this_thread::yield();
}

// Makes the calling thread a poller, as a FUSE ring thread becomes one at its first polled
// read: one polled batch in a group, which takes the thread's poll queue.
void take_poll_queue(BlockIo& io, void* buf) {
  BlkPollGroup g;
  REQUIRE(blk_poll_group_start(&g, io.bdev()->queue));
  IoBatch b(&io, &g);
  b.on_complete([](int) {});
  b.read(0, 1, buf);
  b.submit();
  blk_poll_group_wait(&g);
  REQUIRE(blk_poll_thread_polls());
}

DeviceOptions poll_opts(unsigned poll_queues, unsigned qd = 64) {
  DeviceOptions o;
  o.qd = qd;
  o.poll_queues = poll_queues;
  return o;
}

}  // namespace

TEST_CASE("poll queues: polled bios end in the submitting thread, and the data is right") {
  TempPath tmp("poll");
  auto dev = open_test_device("emu:" + tmp.path + ",size=8M", poll_opts(2));
  REQUIRE(dev->queue()->nr_poll_queues() == 2);
  CHECK(dev->queue()->nr_hw_queues() == 3);
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  const unsigned n = 8;
  const uint32_t len = 16384;
  std::vector<uint8_t> w(n * len + 4096), r(n * len + 4096);
  uint8_t* wd = w.data() + (4096 - reinterpret_cast<uintptr_t>(w.data()) % 4096);
  uint8_t* rd = r.data() + (4096 - reinterpret_cast<uintptr_t>(r.data()) % 4096);
  fill_pattern(wd, n * len, 7);

  Ended we;
  polled_batch(*dev, bs, REQ_OP_WRITE, 64, wd, n, len, &we);
  CHECK(we.done.load() == int(n));  // the wait returned only once every bio had ended
  CHECK(we.status.load() == BLK_STS_OK);
  CHECK(we.off_thread.load() == 0);
  CHECK(we.polled.load() == int(n));

  Ended re;
  polled_batch(*dev, bs, REQ_OP_READ, 64, rd, n, len, &re);
  CHECK(re.done.load() == int(n));
  CHECK(re.off_thread.load() == 0);
  CHECK(std::memcmp(wd, rd, n * len) == 0);
  CHECK(dev->nvme()->inflight() == 0);
  bs.prune_this_thread_cache();
}

TEST_CASE("poll queues: without them a REQ_POLLED bio ends with BLK_STS_NOTSUPP (v6.18 blk_mq_submit_bio, t/io_uring's ret=-95)") {
  TempPath tmp("nopoll");
  auto dev = open_test_device("emu:" + tmp.path + ",size=8M", poll_opts(0));
  BlkPollGroup g;
  CHECK_FALSE(blk_poll_group_start(&g, dev->queue()));  // nothing to poll
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t buf[4096];
  Ended e;
  submit_bio(polled_bio(*dev, bs, REQ_OP_READ, 0, buf, 4096, &e));
  wait_done(e, 1);
  CHECK(e.status.load() == BLK_STS_NOTSUPP);  // not cleared quietly: the kernel refuses it
  CHECK(blk_status_to_errno(BLK_STS_NOTSUPP) == -EOPNOTSUPP);
  CHECK(dev->nvme()->inflight() == 0);  // nothing reached the device
  bs.prune_this_thread_cache();
}

TEST_CASE("poll queues: a FUA write is polled, a write a flush goes before is not, and the group's wait still returns") {
  TempPath tmp("fua");
  auto dev = open_test_device("emu:" + tmp.path + ",size=8M,vwc", poll_opts(1));
  BioSet bs(16, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t buf[3 * 4096];
  fill_pattern(buf, sizeof(buf), 3);
  // REQ_FUA alone is no flush sequence (blk_insert_flush queues it for normal execution).
  Ended fua;
  polled_batch(*dev, bs, REQ_OP_WRITE | REQ_FUA, 8, buf, 3, 4096, &fua);
  CHECK(fua.done.load() == 3);
  CHECK(fua.status.load() == BLK_STS_OK);
  CHECK(fua.polled.load() == 3);
  CHECK(fua.off_thread.load() == 0);
  // REQ_PREFLUSH: the write waits for its pre-flush, and goes on from that completion.
  Ended pre;
  polled_batch(*dev, bs, REQ_OP_WRITE | REQ_PREFLUSH | REQ_FUA, 8, buf, 3, 4096, &pre);
  CHECK(pre.done.load() == 3);
  CHECK(pre.status.load() == BLK_STS_OK);
  CHECK(pre.polled.load() == 0);
  // The completion thread lowers the driver's count just after it has ended the bios.
  for (int i = 0; i < 1000 && dev->nvme()->inflight(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(dev->nvme()->inflight() == 0);
  bs.prune_this_thread_cache();
}

TEST_CASE("poll queues: a poll queue with fewer tags than the batch does not deadlock its submitter") {
  TempPath tmp("tags");
  auto dev = open_test_device("emu:" + tmp.path + ",size=8M", poll_opts(1, 2));
  // nomerges=2: the batch's adjacent bios would merge into one request and never run out of tags.
  Toggles t = dev->queue()->toggles();
  t.nomerges = NoMerges::none;
  dev->queue()->set_toggles(t);
  BioSet bs(64, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  const unsigned n = 24;
  std::vector<uint8_t> w(n * 4096 + 4096), r(n * 4096 + 4096);
  uint8_t* wd = w.data() + (4096 - reinterpret_cast<uintptr_t>(w.data()) % 4096);
  uint8_t* rd = r.data() + (4096 - reinterpret_cast<uintptr_t>(r.data()) % 4096);
  fill_pattern(wd, n * 4096, 11);
  Ended we, re;
  polled_batch(*dev, bs, REQ_OP_WRITE, 0, wd, n, 4096, &we);
  polled_batch(*dev, bs, REQ_OP_READ, 0, rd, n, 4096, &re);
  CHECK(we.done.load() == int(n));
  CHECK(re.done.load() == int(n));
  CHECK(we.off_thread.load() + re.off_thread.load() == 0);
  CHECK(std::memcmp(wd, rd, n * 4096) == 0);
  CHECK(dev->queue()->counters().tag_waits > 0);  // it did run out of tags
  bs.prune_this_thread_cache();
}

TEST_CASE("poll queues: 8 threads sharing 3 poll queues, written and read back") {
  TempPath tmp("share");
  const unsigned threads = 8, rounds = 40, n = 4;
  const uint32_t len = 8192;
  auto dev = open_test_device("emu:" + tmp.path + ",size=16M", poll_opts(3, 16));
  BioSet bs(64, 0, BIOSET_NEED_BVECS | BIOSET_PERCPU_CACHE);
  REQUIRE(bs.init() == 0);
  std::atomic<int> failures{0}, off_thread{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      std::vector<uint8_t> w(n * len + 4096), r(n * len + 4096);
      uint8_t* wd = w.data() + (4096 - reinterpret_cast<uintptr_t>(w.data()) % 4096);
      uint8_t* rd = r.data() + (4096 - reinterpret_cast<uintptr_t>(r.data()) % 4096);
      const sector_t base = sector_t(t) * n * (len / 512);
      for (unsigned round = 0; round < rounds; round++) {
        fill_pattern(wd, n * len, t * 1000 + round);
        Ended we, re;
        polled_batch(*dev, bs, REQ_OP_WRITE, base, wd, n, len, &we);
        polled_batch(*dev, bs, REQ_OP_READ, base, rd, n, len, &re);
        // A thread that shares a poll queue may end another's bios: allowed, but the wait
        // returns only when its own have ended.
        if (we.done.load() != int(n) || re.done.load() != int(n) || we.status.load() || re.status.load() ||
            std::memcmp(wd, rd, n * len) != 0)
          failures.fetch_add(1);
        off_thread.fetch_add(we.off_thread.load() + re.off_thread.load());
      }
      bs.prune_this_thread_cache();
    });
  for (auto& th : ts) th.join();
  CHECK(failures.load() == 0);
  CHECK(dev->nvme()->inflight() == 0);
  MESSAGE("bios ended by another poller of the same queue: " << off_thread.load());
}

TEST_CASE("poll queues: an fs batch with a callback, counted in the group it names, is polled") {
  TempPath tmp("iobatch");
  auto dev = open_test_device("emu:" + tmp.path + ",size=8M", poll_opts(1));
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  IoBuf w(4 * 4096), r(4 * 4096);
  fill_pattern(w.data(), w.size(), 5);
  BlkPollGroup g;
  REQUIRE(blk_poll_group_start(&g, dev->queue()));
  // A waited batch inside the group is reaped by its waiter; the group does not count it.
  CHECK(io.write(0, 4, w.data()) == 0);
  CHECK(g.pending.load() == 0);
  const std::thread::id self = std::this_thread::get_id();
  std::thread::id where;
  int result = 1;
  IoBatch batch(&io, &g);
  batch.on_complete([&](int err) {
    result = err;
    where = std::this_thread::get_id();
  });
  batch.read(0, 4, r.data());
  batch.submit();
  CHECK(g.pending.load() <= 1);
  blk_poll_group_wait(&g);
  CHECK(g.pending.load() == 0);
  CHECK(result == 0);
  CHECK(where == self);  // the callback ran in the submitter, from its poll queue
  CHECK(std::memcmp(w.data(), r.data(), w.size()) == 0);
  // The context is explicit: a batch that names no group is not counted in the one open on
  // its thread, and ends the usual way (the completion thread), unpolled.
  REQUIRE(blk_poll_group_start(&g, dev->queue()));
  std::atomic<bool> ended{false};
  IoBatch unnamed(&io);
  unnamed.on_complete([&](int err) {
    result = err;
    ended = true;
  });
  unnamed.read(0, 4, r.data());
  unnamed.submit();
  CHECK(g.pending.load() == 0);
  while (!ended.load()) std::this_thread::yield();
  blk_poll_group_wait(&g);
  CHECK(result == 0);
  io.bio_set().prune_this_thread_cache();
}

TEST_CASE("poll queues: a waited fs batch is reaped by its waiter, no completion thread needed") {
  TempPath tmp("iobatch-sync");
  DeviceOptions o = poll_opts(1);
  o.completion_thread = false;  // only pollers reap: a wait that did not poll would never end
  auto dev = open_test_device("emu:" + tmp.path + ",size=8M,vwc", o);
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  IoBuf w(4 * 4096), r(4 * 4096);
  fill_pattern(w.data(), w.size(), 9);
  // Runs fn on a thread of its own that polls; one that has not returned in 10 s fails the test
  // and is reaped for, so that a regression fails rather than hangs.
  const auto reaped_by_waiter = [&](auto fn) {
    auto f = std::async(std::launch::async, [&] {
      IoBuf scratch(4096);
      take_poll_queue(io, scratch.data());
      const int err = fn();
      io.bio_set().prune_this_thread_cache();
      return err;
    });
    if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      FAIL_CHECK("a synchronous wait did not reap its own I/O");
      while (f.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) dev->poll(false);
    }
    return f.get();
  };
  CHECK(reaped_by_waiter([&] { return io.write(0, 4, w.data()); }) == 0);
  CHECK(reaped_by_waiter([&] { return io.write(8, 1, w.data(), REQ_FUA); }) == 0);
  CHECK(reaped_by_waiter([&] { return io.read(0, 4, r.data()); }) == 0);
  CHECK(std::memcmp(w.data(), r.data(), w.size()) == 0);
  // A flush runs on its submitter (emu inline flush), so a waited flush needs no reaper either.
  CHECK(reaped_by_waiter([&] { return io.flush(); }) == 0);
  // Inside the thread's group too, which then has nothing of it to wait for.
  CHECK(reaped_by_waiter([&] {
    BlkPollGroup g;
    if (!blk_poll_group_start(&g, dev->queue())) return -1;
    const int err = io.read(0, 1, r.data());
    const unsigned counted = g.pending.load();
    blk_poll_group_wait(&g);
    return counted ? -2 : err;
  }) == 0);
  CHECK(dev->nvme()->inflight() == 0);
}

TEST_CASE("poll queues: a synchronous fs read or write whose kiocb names a poll group is reaped by its waiter") {
  // The group marks the fs's I/O REQ_POLLED and no completion thread reaps a poll queue: a
  // waiter that slept would never be woken (fails on a Waiter that only sleeps).
  TempPath tmp("fs-group");
  auto dev = open_test_device("emu:" + tmp.path + ",size=64M", poll_opts(1));
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  REQUIRE(make_filesystem(io, MkfsOptions{}).message() == "");
  auto fs = test::mount_for_test(io);
  struct stat st;
  REQUIRE(fs->mknod(disk::ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st) == 0);
  REQUIRE(fs->open(st.st_ino) == 0);
  IoBuf w(3 * 4096), r(3 * 4096);
  fill_pattern(w.data(), w.size(), 21);
  ssize_t wrote = 0, read_back = 0, overwrote = 0;
  unsigned left_in_group = 1;
  auto f = std::async(std::launch::async, [&] {
    BlkPollGroup g;
    if (!blk_poll_group_start(&g, dev->queue())) return false;
    const char* src = reinterpret_cast<const char*>(w.data());
    wrote = fs->write(st.st_ino, Kiocb{.ki_pos = 0, .ki_poll = &g}, w.size(), src);  // allocating
    overwrote = fs->write(st.st_ino, Kiocb{.ki_pos = 4096, .ki_poll = &g}, 4096, src + 4096);  // in place
    read_back = fs->read(st.st_ino, Kiocb{.ki_pos = 0, .ki_poll = &g}, r.size(), reinterpret_cast<char*>(r.data()));
    left_in_group = g.pending.load();
    blk_poll_group_wait(&g);
    io.bio_set().prune_this_thread_cache();
    return true;
  });
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    FAIL_CHECK("a waiter inside its poll group slept on polled I/O");
    while (f.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) dev->poll(false);
  }
  REQUIRE(f.get());
  CHECK(wrote == ssize_t(w.size()));
  CHECK(overwrote == 4096);
  CHECK(read_back == ssize_t(r.size()));
  CHECK(left_in_group == 0);  // the waits reaped their own I/O
  CHECK(std::memcmp(w.data(), r.data(), w.size()) == 0);
  CHECK(fs->unmount() == 0);
}

TEST_CASE("poll queues: a thread that never polled waits the usual way and takes no poll queue") {
  TempPath tmp("iobatch-nopoll");
  auto dev = open_test_device("emu:" + tmp.path + ",size=8M", poll_opts(1));
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  IoBuf w(4096), r(4096);
  fill_pattern(w.data(), w.size(), 4);
  std::thread([&] {
    CHECK(io.write(0, 1, w.data()) == 0);
    CHECK(io.read(0, 1, r.data()) == 0);
    CHECK_FALSE(blk_poll_thread_polls());
    io.bio_set().prune_this_thread_cache();
  }).join();
  CHECK(std::memcmp(w.data(), r.data(), w.size()) == 0);
}

TEST_CASE("poll queues: 8 threads waiting on their own fs batches over 3 shared poll queues, data kept") {
  // Waiters that share a poll queue reap each other's I/O: each wait must still return once,
  // when its own batch has ended, with its own data.
  TempPath tmp("sync-share");
  const unsigned threads = 8, rounds = 60;
  auto dev = open_test_device("emu:" + tmp.path + ",size=16M,vwc", poll_opts(3, 16));
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      IoBuf w(2 * 4096), r(2 * 4096);
      take_poll_queue(io, r.data());
      for (unsigned round = 0; round < rounds; round++) {
        fill_pattern(w.data(), w.size(), t * 1000 + round);
        const uint64_t blk = uint64_t(t) * 2;
        if (io.write(blk, 2, w.data()) || io.read(blk, 2, r.data()) || std::memcmp(w.data(), r.data(), w.size()))
          failures.fetch_add(1);
        if (round % 16 == 0 && io.flush()) failures.fetch_add(1);
      }
      io.bio_set().prune_this_thread_cache();
    });
  for (auto& th : ts) th.join();
  CHECK(failures.load() == 0);
  CHECK(dev->nvme()->inflight() == 0);
}

// A poll-queue device whose completions only a poller reaps, and a polled read's pieces.
struct PollerOnly {
  TempPath tmp;
  std::unique_ptr<Device> dev;
  BioSet bs{4, 0, BIOSET_NEED_BVECS};
  IoBuf buf{4096};
  Ended e;
  BlkPollGroup g;
  explicit PollerOnly(const char* name) : tmp(name) {
    REQUIRE(bs.init() == 0);
    DeviceOptions o = poll_opts(1);
    o.completion_thread = false;  // only the poller reaps
    dev = open_test_device("emu:" + tmp.path + ",size=8M", o);
    REQUIRE(blk_poll_group_start(&g, dev->queue()));
    e.group = &g;
  }
  Bio* read_bio() { return polled_bio(*dev, bs, REQ_OP_READ, 0, buf.data(), 4096, &e); }
};

TEST_CASE("poll queues: a poller dispatches its own plug first (bio_poll), so a polled bio still in it is reaped") {
  PollerOnly r("plugged-poll");
  auto f = std::async(std::launch::async, [&] {
    BlkPlug plug;  // a ring batch's plug: kept across the wait
    blk_start_plug(&plug);
    submit_bio(r.read_bio());
    blk_poll_group_wait(&r.g);  // must send the plugged bio before it polls for it
    blk_finish_plug(&plug);
  });
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    FAIL_CHECK("the poller polled for a bio it still held in its plug");
    _exit(1);  // the waiter cannot be woken from here
  }
  CHECK(r.e.done.load() == 1);
  CHECK(r.e.status.load() == BLK_STS_OK);
}

TEST_CASE("v6.18 bio_poll: a poll that does not sleep dispatches the caller's plug first (blk_flush_plug before the driver's poll)") {
  // Only bio_poll()'s own flush can send the bio here: the poller never sleeps, so schedule()
  // never dispatches the plug for it.
  PollerOnly r("plugged-spin");
  Ended& e = r.e;
  BlkMqHwCtx* hctx = r.dev->queue()->map_queue(REQ_POLLED);
  BlkPlug plug;
  blk_start_plug(&plug);
  submit_bio(r.read_bio());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!e.done.load() && std::chrono::steady_clock::now() < deadline) blk_mq_poll(hctx, false);
  const bool reaped = e.done.load() == 1;
  blk_finish_plug(&plug);  // sends it if the poll did not, so the bio ends either way
  while (!e.done.load()) blk_mq_poll(hctx, false);
  CHECK(reaped);
  CHECK(e.status.load() == BLK_STS_OK);
}
