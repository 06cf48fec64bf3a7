// The kernel's caches over a biofs mount: with keep_cache=on (the default) a file's pages
// survive close and open, so a second read of it reads nothing from the device; keep_cache=off
// sends every buffered read to the block layer; a direct-I/O writer makes the next buffered
// open drop what the kernel kept, so nobody reads stale data; a direct write that raced a
// buffered reader drops the pages the reader brought in before the writer hears it is done.
#include <doctest/doctest.h>

#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include <string>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

// io.read_bytes from the mount's counters (fs/stats.h).
uint64_t device_read_bytes(const std::string& mnt) {
  char buf[65536];
  const ssize_t n = getxattr(mnt.c_str(), "user.biofs.stats", buf, sizeof(buf));
  REQUIRE(n > 0);
  const std::string j(buf, size_t(n));
  const size_t at = j.find("\"read_bytes\":");
  REQUIRE(at != std::string::npos);
  return std::stoull(j.substr(at + 13));
}

// fuse.page_drops from the mount's counters (daemon/cached_opens.h).
long long page_drops(const std::string& mnt) { return stat_in(stats_of(mnt), "fuse", "page_drops"); }

// Asynchronous direct writes, as libaio's io_submit and io_getevents make them (generic/451's
// aio-dio-cycle-write): the kernel sends the WRITE and returns, the completion comes later.
class Aio {
 public:
  Aio() { REQUIRE(syscall(SYS_io_setup, 1, &ctx_) == 0); }
  ~Aio() { syscall(SYS_io_destroy, ctx_); }
  ssize_t pwrite(int fd, const void* buf, size_t len, off_t off) {
    iocb cb{};
    cb.aio_fildes = uint32_t(fd);
    cb.aio_lio_opcode = IOCB_CMD_PWRITE;
    cb.aio_buf = uint64_t(uintptr_t(buf));
    cb.aio_nbytes = len;
    cb.aio_offset = off;
    iocb* cbs[1] = {&cb};
    REQUIRE(syscall(SYS_io_submit, ctx_, 1, cbs) == 1);
    io_event ev{};
    REQUIRE(syscall(SYS_io_getevents, ctx_, 1, 1, &ev, nullptr) == 1);
    return ssize_t(ev.res);
  }

 private:
  aio_context_t ctx_ = 0;
};

void drop_nothing_read_twice(const std::string& opts, bool expect_cached) {
  if (!have_fuse()) return;
  CAPTURE(opts);
  FuseScratch s(256 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, opts);
  const std::string data = pattern(8 << 20, 3);
  write_file(s.mnt + "/big", data, true);
  unmount(s.mnt, pid);  // nothing of the file in the kernel's cache
  pid = mount_fg(s.img, s.mnt, opts);
  const uint64_t r0 = device_read_bytes(s.mnt);
  CHECK(read_file(s.mnt + "/big") == data);
  const uint64_t r1 = device_read_bytes(s.mnt);
  CHECK(r1 - r0 >= data.size());  // the first read came from the device
  CHECK(read_file(s.mnt + "/big") == data);
  CHECK(read_file(s.mnt + "/big") == data);
  const uint64_t r2 = device_read_bytes(s.mnt);
  if (expect_cached) CHECK(r2 - r1 < 1 << 20);  // metadata at most
  else CHECK(r2 - r1 >= 2 * data.size());
  unmount(s.mnt, pid);
}

}  // namespace

TEST_CASE("fuse cache: keep_cache=on: a second and third read of a file read nothing from the device") {
  drop_nothing_read_twice("", true);
}

TEST_CASE("fuse cache: keep_cache=off: every read reaches the device") { drop_nothing_read_twice("keep_cache=off", false); }

TEST_CASE("fuse cache: a file written and then given its times, as tar -x does, reads back from the cache") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "");
  const std::string f = s.mnt + "/f", data = pattern(4 << 20, 5);
  write_file(f, data);
  const struct timespec past[2] = {{1000, 0}, {1000, 0}};
  REQUIRE(utimensat(AT_FDCWD, f.c_str(), past, 0) == 0);
  const uint64_t r0 = device_read_bytes(s.mnt);
  CHECK(read_file(f) == data);
  CHECK(device_read_bytes(s.mnt) - r0 < 64 << 10);
  unmount(s.mnt, pid);
}

TEST_CASE("fuse cache: after an O_DIRECT writer, a buffered open reads what it wrote, not the kept pages") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "");
  const std::string f = s.mnt + "/f";
  const std::string before = pattern(1 << 20, 1), after = pattern(1 << 20, 2);
  write_file(f, before);
  CHECK(read_file(f) == before);  // now in the kernel's cache
  void* buf = nullptr;
  REQUIRE(posix_memalign(&buf, 4096, after.size()) == 0);
  std::memcpy(buf, after.data(), after.size());
  const int fd = open(f.c_str(), O_WRONLY | O_DIRECT);
  REQUIRE(fd >= 0);
  REQUIRE(pwrite(fd, buf, after.size(), 0) == ssize_t(after.size()));
  close(fd);
  free(buf);
  CHECK(read_file(f) == after);
  // And the cache is kept again from here on: once the writer's release has reached the
  // daemon (the kernel sends FUSE_RELEASE asynchronously, so an open right after close() may
  // still see the writer and drop the pages once more).
  bool kept = false;
  for (int i = 0; i < 40 && !kept; i++) {
    const uint64_t r0 = device_read_bytes(s.mnt);
    CHECK(read_file(f) == after);
    kept = device_read_bytes(s.mnt) - r0 < 64 << 10;
    if (!kept) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(kept);
  // Names and attributes come from the kernel's cache, and still change when we change them.
  REQUIRE(rename(f.c_str(), (s.mnt + "/g").c_str()) == 0);
  CHECK(access(f.c_str(), F_OK) == -1);
  CHECK(read_file(s.mnt + "/g") == after);
  write_file(f, "new");  // over the negative entry the failed access left
  CHECK(read_file(f) == "new");
  unmount(s.mnt, pid);
}

// FUSE's asynchronous direct write drops the file's pages when it sends the WRITE, not when it
// ends (fuse_direct_IO, fs/fuse/file.c): a buffered reader in between keeps the old data, and a
// buffered open after the write reads it (xfstests generic/451). The daemon drops them before
// the reply when a page-cache handle was open meanwhile, and only then: a direct write that no
// such handle met (fio direct=1) drops nothing.
TEST_CASE("fuse cache: a direct write drops the pages a racing buffered reader brought in and drops none when no reader raced it") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  // vwc: writes answered from the device's cache are quick, so readers race them often.
  const pid_t pid = mount_fg("emu:" + s.img + ",vwc", s.mnt, "default_permissions");
  const std::string f = s.mnt + "/f";
  constexpr size_t kSize = 640 << 10;
  Aio aio;
  void* bufs[3];  // the two patterns, and a direct read's
  for (int i = 0; i < 3; i++) {
    REQUIRE(posix_memalign(&bufs[i], 4096, kSize) == 0);
    memset(bufs[i], i ? 0xaa : 0x55, kSize);
  }
  // Made and written through O_DIRECT handles only: nothing to drop.
  int fd = open(f.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0644);
  REQUIRE(fd >= 0);
  for (int i = 0; i < 20; i++) REQUIRE(pwrite(fd, bufs[i % 2], kSize, 0) == ssize_t(kSize));
  CHECK(aio.pwrite(fd, bufs[0], kSize, 0) == ssize_t(kSize));
  close(fd);
  CHECK(page_drops(s.mnt) == 0);
  // A buffered reader open across a direct write: its pages go before the write's reply.
  const int reader = open(f.c_str(), O_RDONLY);
  REQUIRE(reader >= 0);
  std::string got(kSize, '\0');
  REQUIRE(pread(reader, got.data(), kSize, 0) == ssize_t(kSize));
  CHECK((got == std::string(kSize, char(0x55))));
  fd = open(f.c_str(), O_WRONLY | O_DIRECT);
  REQUIRE(fd >= 0);
  CHECK(aio.pwrite(fd, bufs[1], kSize, 0) == ssize_t(kSize));
  close(fd);
  CHECK(page_drops(s.mnt) >= 1);
  REQUIRE(pread(reader, got.data(), kSize, 0) == ssize_t(kSize));
  CHECK((got == std::string(kSize, char(0xaa))));
  close(reader);
  // generic/451's race: two buffered readers reopen and read the file over and over while
  // asynchronous direct writes alternate two patterns; after each, a buffered open reads it.
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; r++)
    readers.emplace_back([&] {
      std::string b(kSize, '\0');
      while (!stop.load()) {
        const int rfd = open(f.c_str(), O_RDWR | O_CREAT, 0644);  // xfs_io -f
        if (rfd < 0) continue;
        for (size_t off = 0; off < kSize; off += 4096) (void)!pread(rfd, b.data(), 4096, off_t(off));  // xfs_io's 4 KiB
        close(rfd);
      }
    });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);  // without the drop, stale pages show in 0.2 to 16 s here
  int cycles = 0, stale = 0;
  for (; std::chrono::steady_clock::now() < end && stale == 0; cycles++) {
    const int i = cycles % 2;
    fd = open(f.c_str(), O_WRONLY | O_DIRECT);
    REQUIRE(fd >= 0);
    REQUIRE(aio.pwrite(fd, bufs[i], kSize, 0) == ssize_t(kSize));
    close(fd);
    const int cfd = open(f.c_str(), O_RDONLY);
    REQUIRE(cfd >= 0);
    REQUIRE(pread(cfd, got.data(), kSize, 0) == ssize_t(kSize));
    close(cfd);
    if (memcmp(got.data(), bufs[i], kSize) != 0) stale++;
    const int dfd = open(f.c_str(), O_RDONLY | O_DIRECT);  // and what the device holds
    REQUIRE(dfd >= 0);
    REQUIRE(pread(dfd, bufs[2], kSize, 0) == ssize_t(kSize));
    close(dfd);
    CHECK(memcmp(bufs[2], bufs[i], kSize) == 0);
  }
  stop = true;
  for (auto& t : readers) t.join();
  CAPTURE(cycles);
  CHECK(stale == 0);
  for (void* b : bufs) free(b);
  unmount(s.mnt, pid);
}
