// A thread that keeps a block plug across several submissions (a FUSE ring thread over a batch
// of requests) must dispatch it before it blocks, as the kernel's sched_submit_work() does:
// what it would wait for, or what the thread it waits for waits for, may sit in that plug.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "blockcore/brd.h"
#include "fs/block_io.h"
#include "fs/fs_lock.h"
#include "fs/io_batch.h"

using namespace biofs;

namespace {

// Waits up to 10 s for `flag`; false if it never came.
bool eventually(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return flag.load();
}

// In a thread of its own: a plug holding a write of block 3, then `block` (which must block,
// for the lock is held), then the plug's end.
void write_plugged_then(BlockIo* io, std::atomic<bool>* written, const std::function<void()>& block) {
  alignas(4096) static uint8_t data[4096];
  std::memset(data, 0x5A, sizeof(data));
  BlkPlug plug;
  blk_start_plug(&plug);
  std::atomic<bool> ended{false};
  IoBatch b(io);
  b.on_complete([written, &ended](int err) {
    *written = err == 0;
    ended = true;
  });
  b.write(3, 1, data);
  b.submit();  // into the outer plug: nothing is dispatched yet
  block();
  blk_finish_plug(&plug);
  while (!ended.load()) std::this_thread::yield();  // brd ends it at dispatch; the batch must outlive it
}

}  // namespace

TEST_CASE("fs lock: a thread that must wait for the lock, exclusive or shared, dispatches its plug first") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  for (const bool shared : {false, true}) {
    CAPTURE(shared);
    FsLock lock;
    lock.lock();  // the holder, which waits for the plugged write (as a truncate drains direct I/O)
    std::atomic<bool> written{false};
    std::thread t(write_plugged_then, &io, &written, [&] {
      if (shared) {
        lock.lock_shared();
        lock.unlock_shared();
      } else {
        lock.lock();
        lock.unlock();
      }
    });
    const bool saw = eventually(written);
    lock.unlock();
    t.join();
    CHECK(saw);
    CHECK(written);
  }
}

TEST_CASE("fs lock: an uncontended lock leaves the plug alone") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  FsLock lock;
  std::atomic<bool> written{false}, checked{false};
  std::thread t(write_plugged_then, &io, &written, [&] {
    lock.lock_shared();  // free: no reason to dispatch
    lock.unlock_shared();
    lock.lock();
    lock.unlock();
    checked = !written.load();
  });
  t.join();
  CHECK(checked);
  CHECK(written);  // the plug's end dispatched it
}

TEST_CASE("fs lock: a synchronous batch under an outer plug dispatches its bios before it waits") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  std::atomic<bool> done{false};
  std::thread t([&] {
    alignas(4096) static uint8_t data[4096];
    BlkPlug plug;
    blk_start_plug(&plug);
    IoBatch b(&io);
    b.read(5, 1, data);
    done = b.wait() == 0;  // the batch's own plug is nested, so ignored: the outer one holds them
    blk_finish_plug(&plug);
  });
  const bool saw = eventually(done);
  if (!saw) FAIL("the read waited in its own thread's plug");  // t is stuck: abort here
  t.join();
  CHECK(done);
}
