// End to end through the kernel: mkfs.biofs on an image file, mount with the biofs daemon,
// use the mount with ordinary system calls, unmount, remount with the block-core toggles
// flipped, and read everything back.
#include <doctest/doctest.h>

#include "fuse_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace biofs::test;

TEST_CASE("fuse: mkfs, mount, write, unmount, remount with toggles flipped, read back") {
  if (access("/dev/fuse", R_OK | W_OK) != 0) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible, so nothing can be mounted here");
    return;
  }
  char tmpl[] = "/tmp/biofs-fuse-XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  const std::string dir = tmpl, img = dir + "/img", mnt = dir + "/mnt";
  stdfs::create_directory(mnt);
  REQUIRE(truncate((img).c_str(), 0) != 0);  // does not exist yet
  { std::ofstream(img).close(); }
  REQUIRE(truncate(img.c_str(), 128 << 20) == 0);
  std::string out;
  REQUIRE_MESSAGE(run(kBin + "/mkfs.biofs -q -L e2e " + img, &out) == 0, out);
  CHECK(run(kBin + "/mkfs.biofs -q " + img, &out) == 1);
  CHECK(out.find("already holds a biofs") != std::string::npos);
  // A bad option stops the mount with a line naming it.
  CHECK(run(kBin + "/biofs " + img + " " + mnt + " -o tag_batch=bogus", &out) == 1);
  CHECK(out.find("tag_batch") != std::string::npos);
  CHECK_FALSE(is_mounted(mnt));

  pid_t pid = mount_fg(img, mnt, "");
  // The image is in use: mkfs and a second mount are refused, not let loose on it.
  CHECK(run(kBin + "/mkfs.biofs -f -q " + img, &out) == 1);
  CHECK(out.find("in use") != std::string::npos);
  CHECK(run(kBin + "/fsck.biofs -n " + img, &out) == 8);
  const std::string big = pattern(3 << 20, 1);
  write_file(mnt + "/big", big, true);
  stdfs::create_directory(mnt + "/many");
  for (int i = 0; i < 1000; i++) write_file(mnt + "/many/f" + std::to_string(i), "file " + std::to_string(i));
  // Sparse, beyond 4 GiB.
  {
    const int fd = open((mnt + "/sparse").c_str(), O_CREAT | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(pwrite(fd, "far", 3, (5ll << 30)) == 3);
    close(fd);
  }
  write_file(mnt + "/old", "old name");
  REQUIRE(rename((mnt + "/old").c_str(), (mnt + "/new").c_str()) == 0);
  REQUIRE(symlink("new", (mnt + "/link").c_str()) == 0);
  REQUIRE(link((mnt + "/new").c_str(), (mnt + "/hard").c_str()) == 0);
  write_file(mnt + "/gone", "bye");
  REQUIRE(unlink((mnt + "/gone").c_str()) == 0);
  REQUIRE(truncate((mnt + "/big").c_str(), 1 << 20) == 0);
  struct statvfs sv;
  REQUIRE(statvfs(mnt.c_str(), &sv) == 0);
  CHECK(sv.f_bsize == 4096);
  unmount(mnt, pid);

  pid = mount_fg(img, mnt, "bio_cache=off,tag_batch=off,split_check=fast");
  CHECK(read_file(mnt + "/big") == big.substr(0, 1 << 20));
  int found = 0;
  for (const auto& e : stdfs::directory_iterator(mnt + "/many")) {
    const std::string name = e.path().filename();
    REQUIRE(read_file(e.path()) == "file " + name.substr(1));
    found++;
  }
  CHECK(found == 1000);
  struct stat st;
  REQUIRE(stat((mnt + "/sparse").c_str(), &st) == 0);
  CHECK(st.st_size == (5ll << 30) + 3);
  CHECK(st.st_blocks == 8);
  {
    const int fd = open((mnt + "/sparse").c_str(), O_RDONLY);
    char buf[8] = {};
    CHECK(pread(fd, buf, 3, 5ll << 30) == 3);
    CHECK(std::string(buf) == "far");
    CHECK(pread(fd, buf, 3, 1ll << 30) == 3);
    CHECK(buf[0] == 0);
    close(fd);
  }
  CHECK(read_file(mnt + "/new") == "old name");
  CHECK(stdfs::read_symlink(mnt + "/link") == "new");
  CHECK(read_file(mnt + "/link") == "old name");
  REQUIRE(stat((mnt + "/hard").c_str(), &st) == 0);
  CHECK(st.st_nlink == 2);
  CHECK_FALSE(stdfs::exists(mnt + "/gone"));
  CHECK_FALSE(stdfs::exists(mnt + "/old"));
  unmount(mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + img, &out) == 0, out);
  CHECK(out.find("clean") != std::string::npos);
  stdfs::remove_all(dir);
}
