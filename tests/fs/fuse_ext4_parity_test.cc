// What xfstests' generic group found a biofs mount lacking beside ext4 (docs/xfstests.md), each
// through a real mount as a user meets it: O_TMPFILE (open, write, linkat into the tree, or
// freed at close; freed at the next mount after a crash), statx's birth time (set when the
// inode is made, kept on disk, untouched by writes, utimes and remounts), the shutdown ioctl
// xfstests' crash tests go down with (EXT4_IOC_SHUTDOWN), and rename's RENAME_WHITEOUT.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

// The daemon's libfuse lacks the tmpfile and statx operations before 3.18 (daemon/fuse_compat.h).
bool daemon_has_tmpfile_statx(const std::string& mnt) {
  if (libfuse_version(stats_of(mnt)) >= 318) return true;
  MESSAGE("skipped: this daemon's libfuse is older than 3.18 (no tmpfile/statx operations)");
  return false;
}

fsfilcnt_t free_inodes(const std::string& mnt) {
  struct statvfs v;
  REQUIRE(statvfs(mnt.c_str(), &v) == 0);
  return v.f_ffree;
}

// linkat(2) of an open file by its descriptor, as `ln` cannot: root may name any descriptor
// (AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH).
int link_fd(int fd, const std::string& path) { return linkat(fd, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH); }

// The clock inode times come from (current_time(): the coarse one, as on ext4).
struct timespec now_coarse() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME_COARSE, &t);
  return t;
}

bool not_after(const struct timespec& a, const statx_timestamp& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec <= long(b.tv_nsec));
}
bool not_after(const statx_timestamp& a, const struct timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && long(a.tv_nsec) <= b.tv_nsec);
}

}  // namespace

TEST_CASE("fuse ext4 parity: O_TMPFILE makes a nameless file that linkat names, and one never named is freed at close") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  if (!daemon_has_tmpfile_statx(s.mnt)) return unmount(s.mnt, pid);
  const std::string dir = s.mnt + "/d";
  REQUIRE(mkdir(dir.c_str(), 0755) == 0);
  const fsfilcnt_t before = free_inodes(s.mnt);

  // Named later: data written while nameless is there under the name, with one link.
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR, 0640);
  REQUIRE_MESSAGE(fd >= 0, "O_TMPFILE: " << strerror(errno));
  const std::string data(10000, 'q');
  REQUIRE(write(fd, data.data(), data.size()) == ssize_t(data.size()));
  struct stat st;
  REQUIRE(fstat(fd, &st) == 0);
  CHECK(st.st_nlink == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(free_inodes(s.mnt) == before - 1);
  CHECK(std::filesystem::is_empty(dir));  // no name in the directory
  REQUIRE_MESSAGE(link_fd(fd, dir + "/named") == 0, strerror(errno));
  REQUIRE(fstat(fd, &st) == 0);
  CHECK(st.st_nlink == 1);
  close(fd);
  CHECK(read_file(dir + "/named") == data);

  // Never named: freed when the last reference goes (close, then the kernel's forget).
  fd = open(dir.c_str(), O_TMPFILE | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, data.data(), data.size()) == ssize_t(data.size()));
  CHECK(free_inodes(s.mnt) == before - 2);
  close(fd);
  // O_EXCL: the VFS refuses to name it (I_LINKABLE is not set), as on ext4.
  fd = open(dir.c_str(), O_TMPFILE | O_EXCL | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  CHECK(link_fd(fd, dir + "/excl") == -1);
  close(fd);
  // A directory is no place for O_TMPFILE's target on a file: ENOTDIR.
  CHECK(open((dir + "/named").c_str(), O_TMPFILE | O_WRONLY, 0600) == -1);
  CHECK(errno == ENOTDIR);

  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  pid = mount_fg(s.img, s.mnt, "");
  CHECK(read_file(dir + "/named") == data);
  CHECK(free_inodes(s.mnt) == before - 1);  // the named file only: the two nameless ones are gone
  unmount(s.mnt, pid);
}

TEST_CASE("fuse ext4 parity: an O_TMPFILE open at a kill -9 of the daemon is freed at the next mount, fsck clean") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  if (!daemon_has_tmpfile_statx(s.mnt)) return unmount(s.mnt, pid);
  const fsfilcnt_t before = free_inodes(s.mnt);
  const int fd = open(s.mnt.c_str(), O_TMPFILE | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  const std::string data(1 << 20, 'z');
  REQUIRE(write(fd, data.data(), data.size()) == ssize_t(data.size()));
  REQUIRE(fsync(fd) == 0);  // the inode and its orphan-list entry are on disk
  REQUIRE(kill(pid, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  close(fd);
  run("fusermount3 -u -z " + s.mnt);
  pid = mount_fg(s.img, s.mnt, "");
  CHECK(free_inodes(s.mnt) == before);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse ext4 parity: statx gives the birth time, set at creation and kept through writes, utimes and a remount") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  if (!daemon_has_tmpfile_statx(s.mnt)) return unmount(s.mnt, pid);
  const std::string f = s.mnt + "/born", d = s.mnt + "/dir";
  const struct timespec t0 = now_coarse();
  write_file(f, "first");
  REQUIRE(mkdir(d.c_str(), 0755) == 0);
  const struct timespec t1 = now_coarse();
  struct statx x {};
  REQUIRE(statx(AT_FDCWD, f.c_str(), 0, STATX_BTIME, &x) == 0);
  REQUIRE((x.stx_mask & STATX_BTIME));
  const statx_timestamp born = x.stx_btime;
  CHECK(not_after(t0, born));
  CHECK(not_after(born, t1));
  REQUIRE(statx(AT_FDCWD, d.c_str(), 0, STATX_BTIME, &x) == 0);
  CHECK((x.stx_mask & STATX_BTIME));
  CHECK(not_after(t0, x.stx_btime));

  // Later changes move mtime and ctime, never the birth time.
  usleep(20000);
  write_file(f, "second, longer");
  const struct timespec past[2] = {{1000, 0}, {1000, 0}};
  REQUIRE(utimensat(AT_FDCWD, f.c_str(), past, 0) == 0);
  REQUIRE(statx(AT_FDCWD, f.c_str(), AT_STATX_FORCE_SYNC, STATX_BTIME | STATX_MTIME, &x) == 0);
  CHECK(x.stx_mtime.tv_sec == 1000);
  CHECK(x.stx_btime.tv_sec == born.tv_sec);
  CHECK(x.stx_btime.tv_nsec == born.tv_nsec);
  // The basic fields come with it and agree with stat(2).
  struct stat st;
  REQUIRE(stat(f.c_str(), &st) == 0);
  CHECK(x.stx_ino == st.st_ino);
  CHECK(x.stx_size == uint64_t(st.st_size));

  unmount(s.mnt, pid);
  pid = mount_fg(s.img, s.mnt, "");
  REQUIRE(statx(AT_FDCWD, f.c_str(), 0, STATX_BTIME, &x) == 0);
  CHECK((x.stx_mask & STATX_BTIME));
  CHECK(x.stx_btime.tv_sec == born.tv_sec);
  CHECK(x.stx_btime.tv_nsec == born.tv_nsec);
  std::string out;
  REQUIRE(run("stat -c %W " + f, &out) == 0);
  CHECK(std::stoll(out) == born.tv_sec);  // what `stat` prints as the birth
  unmount(s.mnt, pid);
}

TEST_CASE("fuse ext4 parity: the shutdown ioctl commits, then every change gets EIO, and the remount keeps what came before it") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);  // so that `nobody` reaches the mount
  pid_t pid = mount_fg(s.img + ",vwc", s.mnt, "allow_other");
  const unsigned long shutdown_cmd = _IOR('X', 125, uint32_t);  // EXT4_IOC_SHUTDOWN, XFS_IOC_GOINGDOWN
  write_file(s.mnt + "/synced", "synced", true);
  write_file(s.mnt + "/written", "written, not synced");  // its inode waits for a commit
  REQUIRE(mkdir((s.mnt + "/dir").c_str(), 0755) == 0);
  const int root = open(s.mnt.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(root >= 0);
  uint32_t flags = 1;  // EXT4_GOING_FLAGS_LOGFLUSH, what `godown -f` passes
  CHECK(errno_as_nobody([&] { return ioctl(root, shutdown_cmd, &flags); }) == EPERM);
  CHECK(read_file(s.mnt + "/written") == "written, not synced");  // still up
  REQUIRE_MESSAGE(ioctl(root, shutdown_cmd, &flags) == 0, strerror(errno));
  CHECK(ioctl(root, shutdown_cmd, &flags) == 0);  // a second one is a no-op
  close(root);
  // Every change is refused with EIO, as on ext4 after a shutdown.
  CHECK(open((s.mnt + "/new").c_str(), O_CREAT | O_WRONLY, 0644) == -1);
  CHECK(errno == EIO);
  CHECK(mkdir((s.mnt + "/dir2").c_str(), 0755) == -1);
  CHECK(errno == EIO);
  CHECK(unlink((s.mnt + "/synced").c_str()) == -1);
  CHECK(errno == EIO);
  const int fd = open((s.mnt + "/written").c_str(), O_WRONLY | O_APPEND);
  REQUIRE(fd >= 0);
  CHECK(write(fd, "x", 1) == -1);
  CHECK(errno == EIO);
  close(fd);
  run("fusermount3 -u " + s.mnt);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);  // the journal replays clean
  pid = mount_fg(s.img + ",vwc", s.mnt, "");
  CHECK(read_file(s.mnt + "/synced") == "synced");
  CHECK(read_file(s.mnt + "/written") == "written, not synced");  // committed by the shutdown
  CHECK(std::filesystem::is_directory(s.mnt + "/dir"));
  CHECK_FALSE(std::filesystem::exists(s.mnt + "/new"));
  write_file(s.mnt + "/after", "the remount writes again");
  CHECK(read_file(s.mnt + "/after") == "the remount writes again");
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse ext4 parity: RENAME_WHITEOUT leaves a 0:0 character device under the old name, kept across a remount") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  const std::string a = s.mnt + "/a", b = s.mnt + "/b", d = s.mnt + "/d", e = s.mnt + "/e";
  const auto rename2 = [](const std::string& from, const std::string& to, unsigned flags) {
    return int(syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags));
  };
  write_file(a, "moved");
  REQUIRE(mkdir(d.c_str(), 0755) == 0);
  REQUIRE_MESSAGE(rename2(a, b, RENAME_WHITEOUT) == 0, strerror(errno));
  REQUIRE_MESSAGE(rename2(d, e, RENAME_WHITEOUT) == 0, strerror(errno));  // a directory too
  const auto is_whiteout = [](const std::string& p) {
    struct stat st;
    return lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0) && st.st_nlink == 1;
  };
  CHECK(is_whiteout(a));
  CHECK(is_whiteout(d));
  CHECK(read_file(b) == "moved");
  CHECK(std::filesystem::is_directory(e));
  write_file(a + "x", "x");
  CHECK(rename2(a + "x", b, RENAME_WHITEOUT | RENAME_EXCHANGE) == -1);  // never together
  CHECK(errno == EINVAL);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  pid = mount_fg(s.img, s.mnt, "");
  CHECK(is_whiteout(a));
  CHECK(is_whiteout(d));
  CHECK(read_file(b) == "moved");
  CHECK(unlink(a.c_str()) == 0);  // a whiteout goes as any name does
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// The atime a read or a listing leaves (fs/atime.h), as stat sees it through the mount: the
// kernel drops its cached atime after each READ and READDIR and asks the daemon, which moves
// it by the mount's option. Future atimes (relatime keeps them) and old ones (relatime moves
// them) keep the cases clear of the clock's ticks. generic/003 found biofs never moving it.
TEST_CASE("fuse ext4 parity: reads and listings move atime as relatime, strictatime and noatime say") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  const std::string f = s.mnt + "/f", d = s.mnt + "/d";
  write_file(f, "data");
  REQUIRE(mkdir(d.c_str(), 0755) == 0);
  const time_t future = time(nullptr) + 100, old = time(nullptr) - 3 * 86400;
  const auto set_atime = [](const std::string& p, time_t atime, time_t mtime) {
    const struct timespec t[2] = {{atime, 0}, {mtime, 0}};
    REQUIRE(utimensat(AT_FDCWD, p.c_str(), t, 0) == 0);
  };
  const auto atime_of = [](const std::string& p) {
    struct stat st;
    REQUIRE(stat(p.c_str(), &st) == 0);
    return st.st_atim.tv_sec;
  };
  const auto access = [&] {
    CHECK(read_file(f) == "data");
    CHECK(std::distance(std::filesystem::directory_iterator(d), {}) == 0);
  };
  // relatime, the default: a newer atime stays, an old one moves, and a remount keeps it.
  set_atime(f, future, old);
  set_atime(d, future, old);
  access();
  CHECK(atime_of(f) == future);
  CHECK(atime_of(d) == future);
  set_atime(f, old, old - 10);
  set_atime(d, old, old - 10);
  access();
  const time_t moved = atime_of(f);
  CHECK(moved >= time(nullptr) - 2);
  CHECK(atime_of(d) >= time(nullptr) - 2);
  unmount(s.mnt, pid);
  pid = mount_fg(s.img, s.mnt, "strictatime,nodiratime");
  CHECK(atime_of(f) == moved);
  set_atime(f, future, old);
  set_atime(d, old, old - 10);
  access();
  CHECK(atime_of(f) <= time(nullptr));  // strictatime: even a newer atime moves
  CHECK(atime_of(d) == old);            // nodiratime
  // An open for reading and writing that reads nothing (xfs_io -c fsync, generic/392) moves
  // no atime, though the kernel kept the file's pages.
  set_atime(f, old, old - 10);
  const int rw = open(f.c_str(), O_RDWR);
  REQUIRE(rw >= 0);
  CHECK(fsync(rw) == 0);
  close(rw);
  CHECK(atime_of(f) == old);
  // Nor does an open for reading that reads nothing (xfs_io -r -c fsync, generic/622), while
  // the read after it, over the pages kept since access(), does.
  const int ro = open(f.c_str(), O_RDONLY);
  REQUIRE(ro >= 0);
  CHECK(fsync(ro) == 0);
  close(ro);
  CHECK(atime_of(f) == old);
  CHECK(read_file(f) == "data");
  CHECK(atime_of(f) >= time(nullptr) - 2);
  unmount(s.mnt, pid);
  pid = mount_fg(s.img, s.mnt, "noatime");
  set_atime(f, old, old - 10);
  access();
  CHECK(atime_of(f) == old);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// fstrim(8) through the mount (FITRIM, fs/trim.h): the free space of the image goes back to the
// host (the emulated namespace punches its holes), the reply counts it, and only root may ask.
TEST_CASE("fuse ext4 parity: FITRIM discards the free space, for root only, and the files stay whole") {
  if (no_fuse()) return;
  FuseScratch s(256 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);  // so that `nobody` reaches the mount
  pid_t pid = mount_fg(s.img, s.mnt, "allow_other");
  const auto allocated = [&] {
    struct stat st;
    REQUIRE(stat(s.img.c_str(), &st) == 0);
    return uint64_t(st.st_blocks) * 512;
  };
  std::string kept(1 << 20, 'k');
  write_file(s.mnt + "/kept", kept);
  REQUIRE(run("dd if=/dev/urandom of=" + s.mnt + "/big bs=1M count=64 status=none") == 0);
  REQUIRE(run("sync " + s.mnt + "/big") == 0);
  REQUIRE(unlink((s.mnt + "/big").c_str()) == 0);
  REQUIRE(run("sync " + s.mnt) == 0);  // the mount's durability point commits the free
  const uint64_t before = allocated();
  const int root = open(s.mnt.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(root >= 0);
  fstrim_range r{0, UINT64_MAX, 0};
  CHECK(errno_as_nobody([&] { return ioctl(root, FITRIM, &r); }) == EPERM);
  REQUIRE_MESSAGE(ioctl(root, FITRIM, &r) == 0, strerror(errno));
  CHECK(r.len >= (64u << 20));  // at least what big held
  CHECK(allocated() + (64u << 20) <= before);
  r = {uint64_t(1) << 40, UINT64_MAX, 0};  // past the end
  CHECK(ioctl(root, FITRIM, &r) == -1);
  CHECK(errno == EINVAL);
  close(root);
  CHECK(read_file(s.mnt + "/kept") == kept);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// chattr's +i and +a through the mount (fs/attr_flags.h), with the real chattr and lsattr: the
// kernel forwards the flags and checks CAP_LINUX_IMMUTABLE, biofs keeps them on disk and
// enforces them, as ext4's VFS does. generic/079 found biofs without them.
TEST_CASE("fuse ext4 parity: chattr moves the ctime that stat shows, before and after a remount") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  const std::string f = s.mnt + "/f";
  write_file(f, "x");
  struct stat before, after;
  REQUIRE(stat(f.c_str(), &before) == 0);  // the kernel now holds f's attributes
  usleep(50 * 1000);                        // past the coarse clock's tick
  std::string out;
  REQUIRE_MESSAGE(run("chattr +A " + f + " && chattr -A " + f, &out) == 0, out);
  REQUIRE(stat(f.c_str(), &after) == 0);
  CHECK((after.st_ctim.tv_sec != before.st_ctim.tv_sec || after.st_ctim.tv_nsec != before.st_ctim.tv_nsec));
  unmount(s.mnt, pid);
  pid = mount_fg(s.img, s.mnt, "");
  struct stat again;
  REQUIRE(stat(f.c_str(), &again) == 0);
  CHECK(again.st_ctim.tv_sec == after.st_ctim.tv_sec);
  CHECK(again.st_ctim.tv_nsec == after.st_ctim.tv_nsec);
  unmount(s.mnt, pid);
}

TEST_CASE("fuse ext4 parity: chattr +i and +a are kept across a remount and enforced, and only root sets them") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);  // so that `nobody` reaches the mount
  pid_t pid = mount_fg(s.img, s.mnt, "allow_other");
  const std::string i = s.mnt + "/immutable", a = s.mnt + "/append", mine = s.mnt + "/nobodys";
  write_file(i, "fixed");
  write_file(a, "log\n");
  write_file(mine, "n");
  REQUIRE(chown(mine.c_str(), kNobody, kNobody) == 0);
  std::string out;
  REQUIRE_MESSAGE(run("chattr +i " + i + " && chattr +a " + a, &out) == 0, out);
  REQUIRE(run("lsattr -d " + i + " " + a, &out) == 0);
  CHECK(out.find("----i") != std::string::npos);
  CHECK(out.find("-----a") != std::string::npos);
  CHECK(run("echo x > " + i) != 0);
  CHECK(run("echo x >> " + i) != 0);
  CHECK(unlink(i.c_str()) == -1);
  CHECK(errno == EPERM);
  CHECK(rename(i.c_str(), (i + "2").c_str()) == -1);
  CHECK(run("echo more >> " + a) == 0);
  CHECK(run("echo over > " + a) != 0);
  CHECK(truncate(a.c_str(), 0) == -1);
  CHECK(errno == EPERM);
  // The owner may set nodump; immutable needs CAP_LINUX_IMMUTABLE, which the kernel checks.
  const int fd = open(mine.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  int flags = FS_NODUMP_FL;
  CHECK(errno_as_nobody([&] { return ioctl(fd, FS_IOC_SETFLAGS, &flags); }) == 0);
  flags = FS_IMMUTABLE_FL;
  CHECK(errno_as_nobody([&] { return ioctl(fd, FS_IOC_SETFLAGS, &flags); }) == EPERM);
  close(fd);
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  pid = mount_fg(s.img, s.mnt, "");
  REQUIRE(run("lsattr -d " + i + " " + a + " " + mine, &out) == 0);
  CHECK(out.find("----i") != std::string::npos);
  CHECK(out.find("-----a") != std::string::npos);
  CHECK(out.find("d----") != std::string::npos);
  CHECK(read_file(i) == "fixed");
  CHECK(read_file(a) == "log\nmore\n");
  CHECK(run("echo x > " + i) != 0);
  REQUIRE(run("chattr -i " + i + " && chattr -a " + a) == 0);
  CHECK(unlink(i.c_str()) == 0);
  CHECK(run("echo over > " + a) == 0);
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// A root mount counts device nodes and set-id bits, as ext4 does (libfuse's default, nodev and
// nosuid, protects a user's mount); -o nodev,nosuid as asked. generic/184 (writing to a
// character device made on the mount) found it.
TEST_CASE("fuse ext4 parity: a root mount opens device nodes and runs set-id programs, unless nodev and nosuid") {
  if (no_fuse()) return;
  if (geteuid() != 0) {
    MESSAGE("skipped: needs root (mknod, a set-id root program)");
    return;
  }
  FuseScratch s(64 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);  // so that `nobody` reaches the mount
  for (const char* opts : {"allow_other", "allow_other,nodev,nosuid"}) {
    CAPTURE(opts);
    const bool plain = std::string(opts) == "allow_other";
    const pid_t pid = mount_fg(s.img, s.mnt, opts);
    const std::string null = s.mnt + "/null", id = s.mnt + "/id";
    if (plain) {
      REQUIRE(mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
      REQUIRE(run("cp /usr/bin/id " + id + " && chmod 4755 " + id) == 0);
    }
    const int fd = open(null.c_str(), O_WRONLY);
    CHECK((fd >= 0) == plain);
    if (fd >= 0) {
      CHECK(write(fd, "fred", 4) == 4);  // the host's /dev/null: it takes anything
      close(fd);
    }
    std::string out;
    REQUIRE(run("su nobody -s /bin/sh -c '" + id + " -u'", &out) == 0);
    CHECK(out == (plain ? "0\n" : "65534\n"));
    unmount(s.mnt, pid);
  }
}

// `mount -o remount,ro` as mount(8) runs it: the helper gets the options /proc/mounts shows,
// with remount (daemon/remount.h). The kernel then refuses every change; the daemon follows
// (read_only_watch.h): it commits and writes the superblock clean, so a kill -9 from here loses
// nothing, and it moves no atime. generic/294 found biofs refusing the remount.
TEST_CASE("fuse ext4 parity: remount,ro refuses changes, commits so a kill -9 loses nothing, moves no atime, and rw writes again") {
  if (no_fuse()) return;
  if (geteuid() != 0) {
    MESSAGE("a remount needs CAP_SYS_ADMIN: run as root");
    return;
  }
  FuseScratch s(64 << 20);
  // commit=0: nothing commits but fsync, sync, unmount and the remount itself.
  pid_t pid = mount_fg(s.img, s.mnt, "commit=0,strictatime");
  const std::string remount = kBin + "/biofs emu:" + s.img + " " + s.mnt + " -o ";
  const std::string kernel_opts = ",remount,user_id=0,group_id=0,default_permissions";
  write_file(s.mnt + "/synced", "synced", true);
  write_file(s.mnt + "/written", "written, not synced");  // in the running transaction only
  REQUIRE(mkdir((s.mnt + "/dir").c_str(), 0755) == 0);
  std::string out;
  {  // a file open for writing: the kernel refuses, and says why in one line
    const int fd = open((s.mnt + "/written").c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    CHECK(run(remount + "ro,relatime" + kernel_opts, &out) == 32);
    CHECK(out.find("(a file is open for writing)") != std::string::npos);
    close(fd);
  }
  CHECK(stat_flag(stats_of(s.mnt), "read_only") == false);
  REQUIRE_MESSAGE(run(remount + "ro,relatime" + kernel_opts, &out) == 0, out);
  CHECK(stat_flag(stats_of(s.mnt), "read_only"));
  CHECK(open((s.mnt + "/new").c_str(), O_CREAT | O_WRONLY, 0644) == -1);
  CHECK(errno == EROFS);
  CHECK(open((s.mnt + "/written").c_str(), O_WRONLY) == -1);
  CHECK(errno == EROFS);
  CHECK(mkdir((s.mnt + "/dir2").c_str(), 0755) == -1);
  CHECK(errno == EROFS);
  // strictatime moves atime at every read of a writable mount; read-only, none.
  struct stat before, after;
  REQUIRE(stat((s.mnt + "/synced").c_str(), &before) == 0);
  usleep(50 * 1000);  // past the coarse clock's tick
  CHECK(read_file(s.mnt + "/synced") == "synced");
  REQUIRE(stat((s.mnt + "/synced").c_str(), &after) == 0);
  CHECK(after.st_atim.tv_sec == before.st_atim.tv_sec);
  CHECK(after.st_atim.tv_nsec == before.st_atim.tv_nsec);
  // A crash now: the journal needs nothing, and the unsynced file is there.
  kill_daemon(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  CHECK_MESSAGE(out.find("not cleanly unmounted") == std::string::npos, out);  // the superblock says clean
  pid = mount_fg(s.img, s.mnt, "commit=0");
  CHECK(read_file(s.mnt + "/written") == "written, not synced");
  CHECK(std::filesystem::is_directory(s.mnt + "/dir"));
  // Read-only and back: the mount writes again.
  REQUIRE_MESSAGE(run(remount + "ro" + kernel_opts, &out) == 0, out);
  CHECK(open((s.mnt + "/after").c_str(), O_CREAT | O_WRONLY, 0644) == -1);
  REQUIRE_MESSAGE(run(remount + "rw" + kernel_opts, &out) == 0, out);
  CHECK(stat_flag(stats_of(s.mnt), "read_only") == false);
  write_file(s.mnt + "/after", "the remount writes again", true);
  // Writable again, the superblock is marked dirty (its counts are hints): a crash now is one.
  kill_daemon(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  CHECK_MESSAGE(out.find("not cleanly unmounted") != std::string::npos, out);
  pid = mount_fg(s.img, s.mnt, "");
  CHECK(read_file(s.mnt + "/after") == "the remount writes again");
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// setfacl by the owner when it is not in the file's group clears the set-group-ID bit, as
// chmod does (posix_acl_update_mode()); a member keeps it. The kernel leaves the rule to a FUSE
// server, and libfuse drops the flag that says so. generic/375 found biofs keeping the bit.
TEST_CASE("fuse ext4 parity: setfacl by an owner outside the file's group clears set-group-ID, a member keeps it") {
  if (no_fuse()) return;
  if (geteuid() != 0 || run("command -v setfacl && command -v setpriv") != 0) {
    MESSAGE("skipped: needs root, setfacl and setpriv");
    return;
  }
  FuseScratch s(64 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);
  pid_t pid = mount_fg(s.img, s.mnt, "allow_other");
  const std::string f = s.mnt + "/f", d = s.mnt + "/d";
  write_file(f, "x");
  REQUIRE(mkdir(d.c_str(), 0755) == 0);
  const auto mode_after_setfacl = [](const std::string& p, gid_t as_gid) {
    REQUIRE(chown(p.c_str(), 100, 100) == 0);
    REQUIRE(chmod(p.c_str(), 02755) == 0);
    std::string out;
    REQUIRE_MESSAGE(run("setpriv --reuid=100 --regid=" + std::to_string(as_gid) + " --clear-groups setfacl -m u::rwx,g::rwx,o::rwx " + p,
                        &out) == 0, out);
    struct stat st;
    REQUIRE(stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
  };
  for (const std::string& p : {f, d}) {
    CHECK(mode_after_setfacl(p, 100) == 02777);  // in the group: kept
    CHECK(mode_after_setfacl(p, 101) == 00777);  // outside it: cleared
  }
  unmount(s.mnt, pid);
  pid = mount_fg(s.img, s.mnt, "");
  struct stat st;
  REQUIRE(stat(f.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 00777);  // on disk
  unmount(s.mnt, pid);
}

// ro,norecovery (ext4's, also noload): the journal a crash left is not replayed, nothing is
// written, and FITRIM is refused; the next plain mount replays it. generic/537 found biofs
// refusing the option.
TEST_CASE("fuse ext4 parity: ro,norecovery mounts without replaying the journal and writes nothing") {
  if (no_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "commit=0");
  write_file(s.mnt + "/f", "committed by fsync", true);  // in the journal: replayed at the next mount
  kill_daemon(s.mnt, pid);
  const std::string before = read_file(s.img);
  pid = mount_fg(s.img, s.mnt, "ro,norecovery");
  std::string out;
  CHECK(run("fstrim " + s.mnt, &out) != 0);
  CHECK_MESSAGE(out.find("Read-only file system") != std::string::npos, out);
  unmount(s.mnt, pid);
  CHECK(read_file(s.img) == before);  // not a byte written, the journal still to replay
  CHECK(run(kBin + "/biofs " + s.img + " " + s.mnt + " -o noload", &out) == 1);
  CHECK(out == "biofs: norecovery needs ro: a journal left unreplayed must not be written over\n");
  pid = mount_fg(s.img, s.mnt, "");
  CHECK(read_file(s.mnt + "/f") == "committed by fsync");
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// A fallocate drops set-user-ID, and set-group-ID where the file is group-executable or the
// caller is outside its group, for a caller without CAP_FSETID (file_modified()); root keeps
// both. FUSE sends no kill flag with a fallocate. generic/683-685 found biofs keeping them.
TEST_CASE("fuse ext4 parity: fallocate by a user drops set-user-ID and set-group-ID as a write does, root keeps them") {
  if (no_fuse()) return;
  if (geteuid() != 0 || run("command -v setpriv && command -v fallocate") != 0) {
    MESSAGE("skipped: needs root, setpriv and fallocate");
    return;
  }
  FuseScratch s(64 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);
  pid_t pid = mount_fg(s.img, s.mnt, "allow_other");
  const std::string f = s.mnt + "/f";
  write_file(f, std::string(8192, 'x'));
  REQUIRE(chown(f.c_str(), 0, 100) == 0);  // group 100
  const auto mode_after = [&](mode_t mode, const std::string& as, const std::string& how) {
    REQUIRE(chmod(f.c_str(), mode) == 0);
    std::string out;
    REQUIRE_MESSAGE(run(as + "fallocate " + how + " " + f, &out) == 0, out);
    struct stat st;
    REQUIRE(stat(f.c_str(), &st) == 0);
    return st.st_mode & 07777;
  };
  const std::string outsider = "setpriv --reuid=1000 --regid=1000 --clear-groups ";
  const std::string member = "setpriv --reuid=1000 --regid=100 --clear-groups ";
  CHECK(mode_after(06666, outsider, "-o 0 -l 4k") == 00666);  // inside the file: no size changes
  CHECK(mode_after(06666, outsider, "-o 0 -l 64k") == 00666);
  CHECK(mode_after(06676, outsider, "-o 0 -l 64k") == 00676);
  CHECK(mode_after(06666, member, "-o 0 -l 64k") == 02666);  // sgid, not group-executable, in the group
  CHECK(mode_after(06676, member, "-p -o 0 -l 4k") == 00676);  // a punch too
  CHECK(mode_after(06777, "", "-z -o 0 -l 4k") == 06777);      // root: kept
  unmount(s.mnt, pid);
}
