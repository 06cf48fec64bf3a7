// The kernel's caches over a biofs mount: with keep_cache=on (the default) a file's pages
// survive close and open, so a second read of it reads nothing from the device; keep_cache=off
// sends every buffered read to the block layer; a direct-I/O writer makes the next buffered
// open drop what the kernel kept, so nobody reads stale data.
#include <doctest/doctest.h>

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
