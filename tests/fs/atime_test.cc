// When a read or a listing moves atime (fs/atime.h: the kernel's atime_needs_update() and
// relatime_need_update(), Linux 6.18): each rule of the decision on its own, then through the
// filesystem core, where a file read and a readdir move the time and a read-only or noatime
// mount keeps it.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <time.h>

#include <string>

#include "blockcore/brd.h"
#include "tests/blockcore/test_brd.h"
#include "fs/atime.h"
#include "fs/file.h"
#include "fs/filesystem.h"
#include "fs/mkfs.h"

using namespace biofs;

namespace {

constexpr int64_t kDay = 24 * 60 * 60;

// An inode whose times are given in seconds (nanoseconds 0).
disk::Inode inode(mode_t mode, int64_t atime, int64_t mtime, int64_t ctime) {
  disk::Inode d{};
  d.mode = mode;
  d.atime_sec = atime, d.mtime_sec = mtime, d.ctime_sec = ctime;
  return d;
}

struct timespec at(int64_t sec, long nsec = 0) { return {sec, nsec}; }

const AtimePolicy kRelatime{AtimeMode::relatime, false};
const AtimePolicy kStrict{AtimeMode::strictatime, false};
const AtimePolicy kNoatime{AtimeMode::noatime, false};

}  // namespace

TEST_CASE("atime rules: relatime moves an atime not newer than mtime or ctime, or a day old") {
  const int64_t t = 1'000'000;
  // atime newer than both, less than a day old: kept.
  CHECK_FALSE(atime_needs_update(inode(S_IFREG, t, t - 10, t - 10), kRelatime, at(t + 100)));
  // mtime >= atime: moves (equal counts: a file read in the second it was written).
  CHECK(atime_needs_update(inode(S_IFREG, t, t + 5, t - 10), kRelatime, at(t + 100)));
  CHECK(atime_needs_update(inode(S_IFREG, t, t, t - 10), kRelatime, at(t + 100)));
  // ctime >= atime, mtime older: moves.
  CHECK(atime_needs_update(inode(S_IFREG, t, t - 10, t + 5), kRelatime, at(t + 100)));
  CHECK(atime_needs_update(inode(S_IFREG, t, t - 10, t), kRelatime, at(t + 100)));
  // A day old exactly moves; a second less does not.
  CHECK(atime_needs_update(inode(S_IFREG, t, t - 10, t - 10), kRelatime, at(t + kDay)));
  CHECK_FALSE(atime_needs_update(inode(S_IFREG, t, t - 10, t - 10), kRelatime, at(t + kDay - 1)));
  // The nanoseconds decide a tie of seconds.
  disk::Inode d = inode(S_IFREG, t, t, t - 10);
  d.atime_nsec = 500, d.mtime_nsec = 499;
  CHECK_FALSE(atime_needs_update(d, kRelatime, at(t + 100)));
  d.mtime_nsec = 500;
  CHECK(atime_needs_update(d, kRelatime, at(t + 100)));
}

TEST_CASE("atime rules: strictatime moves every time, noatime never, and an atime equal to now stays") {
  const int64_t t = 1'000'000;
  const disk::Inode fresh = inode(S_IFREG, t, t - 10, t - 10);  // relatime would keep it
  CHECK(atime_needs_update(fresh, kStrict, at(t + 1)));
  CHECK(atime_needs_update(fresh, kStrict, at(t, 1)));
  CHECK_FALSE(atime_needs_update(fresh, kStrict, at(t)));
  const disk::Inode stale = inode(S_IFREG, t, t + 5, t + 5);  // relatime would move it
  CHECK_FALSE(atime_needs_update(stale, kNoatime, at(t + kDay * 2)));
  CHECK_FALSE(atime_needs_update(inode(S_IFREG, t, t, t), kRelatime, at(t)));  // already now
}

TEST_CASE("atime rules: nodiratime keeps a directory's atime and not a file's") {
  const int64_t t = 1'000'000;
  const AtimePolicy nodir{AtimeMode::strictatime, true};
  CHECK_FALSE(atime_needs_update(inode(S_IFDIR | 0755, t, t + 5, t + 5), nodir, at(t + 100)));
  CHECK(atime_needs_update(inode(S_IFREG | 0644, t, t + 5, t + 5), nodir, at(t + 100)));
  CHECK(atime_needs_update(inode(S_IFDIR | 0755, t, t + 5, t + 5), kRelatime, at(t + 100)));
}

namespace {

struct Rig {
  std::unique_ptr<BrdDevice> dev_owner = test::make_test_brd(32 << 20);
  BrdDevice& dev = *dev_owner;
  BlockIo io{dev.bdev(), 4096};
  std::unique_ptr<Filesystem> fs;
  uint64_t file = 0, dir = 0;

  Rig() {
    REQUIRE(io.init() == 0);
    REQUIRE(make_filesystem(io, MkfsOptions{}).message() == "");
    mount(MountOptions{});
    struct stat st;
    REQUIRE(fs->mknod(1, "f", S_IFREG | 0644, 0, 0, 0, &st) == 0);
    file = st.st_ino;
    REQUIRE(fs->write(file, 0, 5, "hello") == 5);
    REQUIRE(fs->mkdir(1, "d", 0755, 0, 0, &st) == 0);
    dir = st.st_ino;
  }
  void mount(MountOptions o) {
    if (fs) REQUIRE(fs->unmount() == 0);
    fs.reset();
    o.commit_interval_s = 0;
    const Status s = Filesystem::mount(io, o, &fs);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  // Sets atime (and mtime/ctime, to `changed`) so that relatime decides as the test wants.
  void set_times(uint64_t ino, int64_t atime, int64_t changed) {
    struct stat a {}, out;
    a.st_atim = {atime, 0};
    a.st_mtim = {changed, 0};
    REQUIRE(fs->setattr(ino, SETATTR_ATIME | SETATTR_MTIME, a, &out) == 0);
  }
  int64_t atime(uint64_t ino) {
    struct stat st;
    REQUIRE(fs->getattr(ino, &st) == 0);
    return st.st_atim.tv_sec;
  }
  void read_file() {
    char buf[8];
    REQUIRE(fs->read(file, 0, sizeof buf, buf) == 5);
  }
  void list_dir() {
    int n = 0;
    REQUIRE(fs->readdir(dir, 0, [&n](const std::string&, uint64_t, unsigned, uint64_t) { return ++n, true; }) == 0);
    REQUIRE(n == 2);
  }
};

int64_t now_sec() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME_COARSE, &t);
  return t.tv_sec;
}

}  // namespace

// Future atimes (relatime keeps them: newer than mtime and ctime, not a day old) and old ones
// (relatime moves them) make each case independent of when the clock ticks.
TEST_CASE("atime through the filesystem: a read and a listing move an old atime and keep a newer one (relatime)") {
  Rig r;
  const int64_t future = now_sec() + 100, old = now_sec() - 3 * kDay;
  r.set_times(r.file, future, old);
  r.set_times(r.dir, future, old);
  r.read_file();
  r.list_dir();
  CHECK(r.atime(r.file) == future);
  CHECK(r.atime(r.dir) == future);
  r.set_times(r.file, old, old - 10);
  r.set_times(r.dir, old, old - 10);
  r.read_file();
  r.list_dir();
  const int64_t file_atime = r.atime(r.file), dir_atime = r.atime(r.dir);
  CHECK(file_atime >= now_sec() - 1);
  CHECK(file_atime <= now_sec());
  CHECK(dir_atime >= now_sec() - 1);
  r.mount(MountOptions{});  // saved: the remount reads the same times
  CHECK(r.atime(r.file) == file_atime);
  CHECK(r.atime(r.dir) == dir_atime);
}

TEST_CASE("atime through the filesystem: strictatime moves even a newer atime, nodiratime spares directories") {
  Rig r;
  MountOptions o;
  o.atime = {AtimeMode::strictatime, true};
  r.mount(o);
  const int64_t future = now_sec() + 100;
  r.set_times(r.file, future, future - 200);
  r.set_times(r.dir, future, future - 200);
  r.read_file();
  r.list_dir();
  CHECK(r.atime(r.file) <= now_sec());
  CHECK(r.atime(r.dir) == future);
}

TEST_CASE("atime through the filesystem: noatime and a read-only mount keep every atime") {
  Rig r;
  const int64_t old = now_sec() - 3 * kDay;
  r.set_times(r.file, old, old);
  r.set_times(r.dir, old, old);
  MountOptions noatime;
  noatime.atime.mode = AtimeMode::noatime;
  MountOptions read_only;
  read_only.read_only = true;
  for (const MountOptions& o : {noatime, read_only}) {
    r.mount(o);
    r.read_file();
    r.list_dir();
    CHECK(r.atime(r.file) == old);
    CHECK(r.atime(r.dir) == old);
  }
}
