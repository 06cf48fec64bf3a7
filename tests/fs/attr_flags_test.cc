// chattr's flags on the filesystem core (fs/attr_flags.h): each rule the VFS keeps for an
// immutable or append-only inode on ext4, which over FUSE falls to biofs, one check each; the
// flags kept across a remount; noatime; the conversions of the ioctl words.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <time.h>

#include <string>

#include "blockcore/brd.h"
#include "tests/blockcore/test_brd.h"
#include "fs/attr_flags.h"
#include "fs/file.h"
#include "fs/filesystem.h"
#include "fs/mkfs.h"

using namespace biofs;

namespace {

struct Rig {
  std::unique_ptr<BrdDevice> dev_owner = test::make_test_brd(32 << 20);
  BrdDevice& dev = *dev_owner;
  BlockIo io{dev.bdev(), 4096};
  std::unique_ptr<Filesystem> fs;
  Rig() {
    REQUIRE(io.init() == 0);
    REQUIRE(make_filesystem(io, MkfsOptions{}).message() == "");
    mount();
  }
  void mount() {
    MountOptions o;
    o.commit_interval_s = 0;
    fs.reset();
    const Status st = Filesystem::mount(io, o, &fs);
    REQUIRE_MESSAGE(st.ok(), st.message());
  }
  void remount() {
    REQUIRE(fs->unmount() == 0);
    mount();
  }
  uint64_t file(uint64_t dir, const std::string& name, const std::string& data = "0123456789") {
    struct stat st;
    REQUIRE(fs->mknod(dir, name, S_IFREG | 0644, 0, 0, 0, &st) == 0);
    REQUIRE(fs->write(st.st_ino, 0, data.size(), data.data()) == ssize_t(data.size()));
    return st.st_ino;
  }
  uint64_t dir(const std::string& name) {
    struct stat st;
    REQUIRE(fs->mkdir(1, name, 0755, 0, 0, &st) == 0);
    return st.st_ino;
  }
  uint32_t flags(uint64_t ino) {
    uint32_t f;
    REQUIRE(fs->get_attr_flags(ino, &f) == 0);
    return f;
  }
  int setattr(uint64_t ino, int to_set) {
    struct stat a {}, out;
    a.st_mode = S_IFREG | 0600;
    a.st_atim = a.st_mtim = {1000, 0};
    return fs->setattr(ino, to_set, a, &out);
  }
};

}  // namespace

TEST_CASE("attr flags: an immutable file is read and nothing else") {
  Rig r;
  const uint64_t f = r.file(1, "f");
  REQUIRE(r.fs->setxattr(f, "user.a", "1", 0) == 0);
  REQUIRE(r.fs->set_attr_flags(f, FS_IMMUTABLE_FL) == 0);
  CHECK(r.flags(f) == FS_IMMUTABLE_FL);
  char buf[16];
  CHECK(r.fs->read(f, 0, 10, buf) == 10);
  CHECK(r.fs->may_open(f, O_RDONLY) == 0);
  CHECK(r.fs->may_open(f, O_WRONLY) == -EPERM);
  CHECK(r.fs->may_open(f, O_RDWR | O_APPEND) == -EPERM);
  CHECK(r.fs->may_open(f, O_RDONLY | O_TRUNC) == -EPERM);
  CHECK(r.fs->write(f, 10, 1, "x") == -EPERM);
  CHECK(r.fs->write(f, 0, 1, "x") == -EPERM);
  for (int to_set : std::initializer_list<int>{SETATTR_MODE, SETATTR_UID, SETATTR_GID, SETATTR_SIZE, SETATTR_ATIME, SETATTR_MTIME,
                     SETATTR_ATIME | SETATTR_ATIME_NOW | SETATTR_MTIME | SETATTR_MTIME_NOW}) {
    CAPTURE(to_set);
    CHECK(r.setattr(f, to_set) == -EPERM);
  }
  CHECK(r.fs->fallocate(f, 0, 0, 8192) == -EPERM);
  CHECK(r.fs->fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 8192) == -EPERM);
  CHECK(r.fs->setxattr(f, "user.b", "2", 0) == -EPERM);
  CHECK(r.fs->removexattr(f, "user.a") == -EPERM);
  struct stat st;
  CHECK(r.fs->link(f, 1, "f2", &st) == -EPERM);
  CHECK(r.fs->unlink(1, "f") == -EPERM);
  CHECK(r.fs->rename(1, "f", 1, "g", 0) == -EPERM);
  r.file(1, "other");
  CHECK(r.fs->rename(1, "other", 1, "f", 0) == -EPERM);  // replacing it deletes it
  CHECK(r.fs->rename(1, "other", 1, "f", RENAME_EXCHANGE) == -EPERM);
  // Cleared, everything is allowed again.
  REQUIRE(r.fs->set_attr_flags(f, 0) == 0);
  CHECK(r.fs->write(f, 10, 1, "x") == 1);
  CHECK(r.fs->unlink(1, "f") == 0);
}

TEST_CASE("attr flags: an append-only file grows at its end only, and keeps its name, mode and owner") {
  Rig r;
  const uint64_t f = r.file(1, "f");
  REQUIRE(r.fs->set_attr_flags(f, FS_APPEND_FL) == 0);
  CHECK(r.fs->may_open(f, O_RDONLY) == 0);
  CHECK(r.fs->may_open(f, O_WRONLY | O_APPEND) == 0);
  CHECK(r.fs->may_open(f, O_WRONLY) == -EPERM);
  CHECK(r.fs->may_open(f, O_RDWR) == -EPERM);
  CHECK(r.fs->may_open(f, O_WRONLY | O_APPEND | O_TRUNC) == -EPERM);
  CHECK(r.fs->may_open(f, O_RDONLY | O_TRUNC) == -EPERM);
  CHECK(r.fs->write(f, 10, 3, "abc") == 3);  // at the end
  CHECK(r.fs->write(f, 0, 1, "x") == -EPERM);
  CHECK(r.fs->write(f, 20, 1, "x") == -EPERM);  // past it
  for (int to_set : std::initializer_list<int>{SETATTR_MODE, SETATTR_UID, SETATTR_GID, SETATTR_SIZE, SETATTR_ATIME, SETATTR_MTIME}) {
    CAPTURE(to_set);
    CHECK(r.setattr(f, to_set) == -EPERM);
  }
  // touch(1), utime(path, NULL): "now", which it may; FUSE sends the time bits with _NOW.
  CHECK(r.setattr(f, SETATTR_ATIME | SETATTR_ATIME_NOW | SETATTR_MTIME | SETATTR_MTIME_NOW) == 0);
  CHECK(r.setattr(f, SETATTR_ATIME | SETATTR_ATIME_NOW | SETATTR_MTIME) == -EPERM);
  CHECK(r.fs->fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 65536) == 0);
  CHECK(r.fs->fallocate(f, FALLOC_FL_ZERO_RANGE, 0, 4096) == -EPERM);
  CHECK(r.fs->fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == -EPERM);
  CHECK(r.fs->setxattr(f, "user.b", "2", 0) == -EPERM);
  struct stat st;
  CHECK(r.fs->link(f, 1, "f2", &st) == -EPERM);
  CHECK(r.fs->unlink(1, "f") == -EPERM);
  CHECK(r.fs->rename(1, "f", 1, "g", 0) == -EPERM);
  char buf[16];
  CHECK(r.fs->read(f, 0, 16, buf) == 13);
}

TEST_CASE("attr flags: an immutable directory takes no new name and loses none, an append-only one takes but never loses") {
  Rig r;
  const uint64_t d = r.dir("d"), a = r.dir("a");
  r.file(d, "in");
  r.file(a, "in");
  const uint64_t outside = r.file(1, "outside");
  REQUIRE(r.fs->set_attr_flags(d, FS_IMMUTABLE_FL) == 0);
  REQUIRE(r.fs->set_attr_flags(a, FS_APPEND_FL) == 0);
  struct stat st;
  CHECK(r.fs->mknod(d, "new", S_IFREG | 0644, 0, 0, 0, &st) == -EPERM);
  CHECK(r.fs->mkdir(d, "new", 0755, 0, 0, &st) == -EPERM);
  CHECK(r.fs->symlink(d, "new", "x", 0, 0, &st) == -EPERM);
  CHECK(r.fs->tmpfile(d, 0644, 0, 0, &st) == -EPERM);
  CHECK(r.fs->link(outside, d, "new", &st) == -EPERM);
  CHECK(r.fs->rename(1, "outside", d, "new", 0) == -EPERM);
  CHECK(r.fs->unlink(d, "in") == -EPERM);
  CHECK(r.fs->rename(d, "in", 1, "out", 0) == -EPERM);
  CHECK(r.fs->rmdir(1, "d") == -EPERM);
  // Append-only: names come, none goes.
  CHECK(r.fs->mknod(a, "new", S_IFREG | 0644, 0, 0, 0, &st) == 0);
  CHECK(r.fs->rename(1, "outside", a, "moved", 0) == 0);
  CHECK(r.fs->unlink(a, "in") == -EPERM);
  CHECK(r.fs->rename(a, "moved", 1, "back", 0) == -EPERM);
  CHECK(r.fs->rename(a, "new", a, "renamed", 0) == -EPERM);
}

TEST_CASE("attr flags: kept across a remount, a change moves ctime, an unknown flag is refused, noatime keeps atime") {
  Rig r;
  const uint64_t f = r.file(1, "f");
  struct stat before, after;
  REQUIRE(r.fs->getattr(f, &before) == 0);
  struct timespec pause = {0, 20'000'000};  // a tick of the coarse clock ctime comes from
  nanosleep(&pause, nullptr);
  REQUIRE(r.fs->set_attr_flags(f, FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL) == 0);
  REQUIRE(r.fs->getattr(f, &after) == 0);
  CHECK((after.st_ctim.tv_sec > before.st_ctim.tv_sec ||
         (after.st_ctim.tv_sec == before.st_ctim.tv_sec && after.st_ctim.tv_nsec > before.st_ctim.tv_nsec)));
  CHECK(r.fs->set_attr_flags(f, FS_COMPR_FL) == -EOPNOTSUPP);
  r.remount();
  CHECK(r.flags(f) == (FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL));
  CHECK(r.fs->write(f, 0, 1, "x") == -EPERM);
  // noatime: an atime relatime would move (older than mtime) stays.
  REQUIRE(r.fs->set_attr_flags(f, FS_NOATIME_FL) == 0);
  struct stat a {}, out;
  a.st_atim = {1000, 0};
  REQUIRE(r.fs->setattr(f, SETATTR_ATIME, a, &out) == 0);
  char buf[8];
  REQUIRE(r.fs->read(f, 0, 8, buf) == 8);
  REQUIRE(r.fs->getattr(f, &after) == 0);
  CHECK(after.st_atim.tv_sec == 1000);
  REQUIRE(r.fs->set_attr_flags(f, 0) == 0);
  REQUIRE(r.fs->read(f, 0, 8, buf) == 8);
  REQUIRE(r.fs->getattr(f, &after) == 0);
  CHECK(after.st_atim.tv_sec > 1000);
}

TEST_CASE("attr flags: the FS_XFLAG word maps to the same flags, and an xflag biofs lacks is refused") {
  CHECK(xflags_from_fs_flags(FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL) ==
        (FS_XFLAG_IMMUTABLE | FS_XFLAG_APPEND | FS_XFLAG_NODUMP | FS_XFLAG_NOATIME));
  CHECK(fs_flags_from_xflags(FS_XFLAG_IMMUTABLE) == FS_IMMUTABLE_FL);
  CHECK(fs_flags_from_xflags(FS_XFLAG_APPEND | FS_XFLAG_NOATIME) == (FS_APPEND_FL | FS_NOATIME_FL));
  CHECK(fs_flags_from_xflags(FS_XFLAG_NODUMP) == FS_NODUMP_FL);
  CHECK(fs_flags_from_xflags(FS_XFLAG_REALTIME) == -1);
  CHECK(fs_flags_from_xflags(0) == 0);
}
