// The parity cases that reach every mount of the machine: sync(2) on a fuseblk mount and the
// kernel's drop_caches before a file handle is opened. Their own binary, run serially
// (tests/fs/CMakeLists.txt): under ctest -j2 a FUSE test beside them met EBUSY at its unmount.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

// A loop device over a file, detached at scope exit; empty when losetup cannot make one.
struct LoopDevice {
  std::string path;
  explicit LoopDevice(const std::string& file) {
    std::string out;
    if (run("losetup -f --show " + file, &out) == 0 && out.rfind("/dev/loop", 0) == 0) path = out.substr(0, out.find('\n'));
  }
  ~LoopDevice() {
    if (!path.empty()) run("losetup -d " + path);
  }
};

}  // namespace

// sync(2) and syncfs(2) reach a FUSE daemon only on a fuseblk mount (fuse_sync_fs(),
// fs/fuse/inode.c); libfuse 3.18 answers its FUSE_SYNCFS with ENOSYS, so biofs answers it
// itself (daemon/syncfs.h). On a plain mount the same sync leaves the tree to the next commit.
TEST_CASE("fuse ext4 parity: on a fuseblk mount sync and syncfs make the tree durable, across a kill -9") {
  if (no_fuse()) return;
  if (geteuid() != 0) {
    MESSAGE("a fuseblk mount needs root");
    return;
  }
  FuseScratch s(64 << 20);
  LoopDevice loop(s.img);
  if (loop.path.empty()) {
    MESSAGE("skipped: losetup made no loop device (no loop module?)");
    return;
  }
  const auto crash_and_check = [&](pid_t pid) {  // kill -9, fsck, mount again
    kill_daemon(s.mnt, pid);
    std::string out;
    CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
    return mount_fg(s.img, s.mnt, "commit=0");
  };
  // A plain mount: sync(2) sends nothing, and a crash takes what was not committed.
  pid_t pid = mount_fg(s.img, s.mnt, "commit=0");
  write_file(s.mnt + "/plain", "not committed");
  sync();
  pid = crash_and_check(pid);
  CHECK_FALSE(std::filesystem::exists(s.mnt + "/plain"));
  unmount(s.mnt, pid);
  // fuseblk: sync(2), then syncfs(2) (the kernel goes on sending it after the first).
  pid = mount_fg(s.img, s.mnt, "commit=0,blkdev=" + loop.path);
  std::string mounts;
  run("grep ' " + s.mnt + " ' /proc/mounts", &mounts);
  CHECK_MESSAGE(mounts.find(loop.path + " " + s.mnt + " fuseblk.biofs ") == 0, mounts);
  REQUIRE(mkdir((s.mnt + "/dir").c_str(), 0755) == 0);
  write_file(s.mnt + "/dir/by-sync", "sync(2)");
  sync();
  write_file(s.mnt + "/dir/by-syncfs", "syncfs(2)");
  const int root = open(s.mnt.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(root >= 0);
  CHECK(syncfs(root) == 0);
  close(root);
  pid = crash_and_check(pid);
  CHECK(read_file(s.mnt + "/dir/by-sync") == "sync(2)");
  CHECK(read_file(s.mnt + "/dir/by-syncfs") == "syncfs(2)");
  unmount(s.mnt, pid);
  // A block device that is not this image's is refused in one line, before anything is mounted.
  FuseScratch other(16 << 20);
  LoopDevice other_loop(other.img);
  REQUIRE_FALSE(other_loop.path.empty());
  std::string out;
  CHECK(run(kBin + "/biofs " + s.img + " " + s.mnt + " -o blkdev=" + other_loop.path, &out) == 32);
  CHECK_MESSAGE(out == "biofs: blkdev=" + other_loop.path + ": a loop device of " + other.img + ", not of " + s.img + "\n", out);
  CHECK(run(kBin + "/biofs " + s.img + " " + s.mnt + " -o blkdev=" + other.img, &out) == 32);
  CHECK_MESSAGE(out == "biofs: blkdev=" + other.img + ": not a block device\n", out);
  CHECK_FALSE(is_mounted(s.mnt));
}

namespace {

struct Handle {
  file_handle h{};
  unsigned char room[MAX_HANDLE_SZ];
};

// name_to_handle_at(): the file's handle, or a failed REQUIRE.
Handle handle_of(const std::string& path) {
  Handle out;
  out.h.handle_bytes = MAX_HANDLE_SZ;
  int mount_id;
  REQUIRE_MESSAGE(name_to_handle_at(AT_FDCWD, path.c_str(), &out.h, &mount_id, 0) == 0, strerror(errno));
  return out;
}

// The kernel drops its dentries and inodes (FORGET to the daemon) so a handle is looked up anew.
void drop_kernel_caches() {
  sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "2\n";
}

}  // namespace

// open_by_handle_at() of a file the kernel no longer has in memory, and after a remount: FUSE
// looks the number up as "." and checks the generation (FUSE_CAP_EXPORT_SUPPORT); a deleted
// file's handle is stale. generic/426, 467, 477, 756 and 777 found every handle stale.
TEST_CASE("fuse ext4 parity: file handles open the file after the kernel forgot it and after a remount, a deleted one is stale") {
  if (no_fuse()) return;
  if (geteuid() != 0) {
    MESSAGE("open_by_handle_at needs CAP_DAC_READ_SEARCH: run as root");
    return;
  }
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  write_file(s.mnt + "/f", "by handle");
  REQUIRE(mkdir((s.mnt + "/d").c_str(), 0755) == 0);
  write_file(s.mnt + "/gone", "x");
  Handle f = handle_of(s.mnt + "/f"), d = handle_of(s.mnt + "/d"), gone = handle_of(s.mnt + "/gone");
  struct stat gone_st;
  REQUIRE(stat((s.mnt + "/gone").c_str(), &gone_st) == 0);
  REQUIRE(unlink((s.mnt + "/gone").c_str()) == 0);
  const auto open_handle = [&](Handle& h, int flags) {
    const int mnt_fd = open(s.mnt.c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(mnt_fd >= 0);
    const int fd = open_by_handle_at(mnt_fd, &h.h, flags);
    const int err = errno;
    close(mnt_fd);
    errno = err;
    return fd;
  };
  const auto read_handle = [&](Handle& h) {
    const int fd = open_handle(h, O_RDONLY);
    if (fd < 0) return std::string("errno ") + strerror(errno);
    char buf[64];
    const ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    return std::string(buf, size_t(std::max<ssize_t>(n, 0)));
  };
  for (int round = 0; round < 2; round++) {  // the kernel's caches dropped; then a remount
    drop_kernel_caches();
    CHECK(read_handle(f) == "by handle");
    const int dfd = open_handle(d, O_RDONLY | O_DIRECTORY);
    const std::string why = dfd < 0 ? strerror(errno) : "";
    CHECK_MESSAGE(dfd >= 0, why);
    if (dfd >= 0) close(dfd);
    CHECK(open_handle(gone, O_RDONLY) == -1);
    CHECK(errno == ESTALE);
    unmount(s.mnt, pid);
    pid = mount_fg(s.img, s.mnt, "");
  }
  // The number reused by a later file (the allocator takes the lowest free one): the old
  // handle stays stale, the generation having moved.
  write_file(s.mnt + "/new", "y");
  struct stat st;
  REQUIRE(stat((s.mnt + "/new").c_str(), &st) == 0);
  CHECK(st.st_ino == gone_st.st_ino);
  drop_kernel_caches();
  CHECK(open_handle(gone, O_RDONLY) == -1);
  CHECK(errno == ESTALE);
  unmount(s.mnt, pid);
}
