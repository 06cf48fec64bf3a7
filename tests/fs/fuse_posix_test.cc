// POSIX behaviour through a real mount, asserted call by call, once per mount option set (the
// defaults and each block-core toggle off), so every combination is known to work: rename over
// an existing file and its flags, unlink of an open file, link counts, sparse files and
// SEEK_DATA/SEEK_HOLE, truncate up and down, a 10,000-entry readdir, offsets beyond 4 GiB,
// permissions, extended attributes, fallocate and statfs, truncation on open; and the
// permission model as a second and a third user with allow_other alone.
#include <doctest/doctest.h>

#include <dirent.h>
#include <grp.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

int renameat2_(const std::string& a, const std::string& b, unsigned flags) {
  return int(syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), flags));
}

ino_t inode_of(const std::string& p) {
  struct stat st;
  REQUIRE(stat(p.c_str(), &st) == 0);
  return st.st_ino;
}

constexpr uid_t kOther = 4321;  // a second unprivileged user beside nobody (no passwd entry)

using biofs::test::errno_as_nobody;
int errno_as_nobody(const std::string& path, int flags) {
  return errno_as_nobody([&] { return open(path.c_str(), flags); });
}

mode_t mode_of(const std::string& p) {
  struct stat st;
  REQUIRE(stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// open(O_TRUNC) on an existing file, in every form: the kernel sends it inside OPEN
// (FUSE_CAP_ATOMIC_O_TRUNC), so the daemon must truncate there.
void truncate_on_open(const std::string& m) {
  const std::string f = m + "/trunc";
  const std::string old = "hello world, long line\n";
  for (int flags : {O_WRONLY | O_TRUNC, O_RDWR | O_TRUNC, O_RDONLY | O_TRUNC, O_CREAT | O_WRONLY | O_TRUNC,
                    O_WRONLY | O_TRUNC | O_DIRECT}) {
    CAPTURE(flags);
    write_file(f, old);
    const struct timespec past[2] = {{1000, 0}, {1000, 0}};
    REQUIRE(utimensat(AT_FDCWD, f.c_str(), past, 0) == 0);
    const int fd = open(f.c_str(), flags, 0644);
    REQUIRE(fd >= 0);
    struct stat st;
    REQUIRE(fstat(fd, &st) == 0);
    CHECK(st.st_size == 0);
    CHECK(st.st_mtim.tv_sec > 1000);
    CHECK(st.st_ctim.tv_sec > 1000);
    close(fd);
    REQUIRE(stat(f.c_str(), &st) == 0);
    CHECK(st.st_size == 0);
    CHECK(read_file(f).empty());
  }
  // What a shell does for `echo hi > f`.
  write_file(f, old);
  REQUIRE(run("echo hi > " + f) == 0);
  CHECK(read_file(f) == "hi\n");
}

void posix_suite(const std::string& m) {
  truncate_on_open(m);

  // rename over an existing file: the target's old inode is gone, the name has the source's.
  write_file(m + "/src", "source");
  write_file(m + "/dst", "target");
  const ino_t src_ino = inode_of(m + "/src");
  REQUIRE(rename((m + "/src").c_str(), (m + "/dst").c_str()) == 0);
  CHECK(read_file(m + "/dst") == "source");
  CHECK(inode_of(m + "/dst") == src_ino);
  CHECK(access((m + "/src").c_str(), F_OK) == -1);
  // RENAME_NOREPLACE refuses an existing target; RENAME_EXCHANGE swaps the two names.
  write_file(m + "/other", "other");
  CHECK(renameat2_(m + "/other", m + "/dst", RENAME_NOREPLACE) == -1);
  CHECK(errno == EEXIST);
  REQUIRE(renameat2_(m + "/other", m + "/dst", RENAME_EXCHANGE) == 0);
  CHECK(read_file(m + "/dst") == "other");
  CHECK(read_file(m + "/other") == "source");
  // A directory over a non-empty directory fails; over an empty one it replaces it.
  mkdir((m + "/d1").c_str(), 0755);
  mkdir((m + "/d2").c_str(), 0755);
  write_file(m + "/d2/x", "x");
  CHECK(rename((m + "/d1").c_str(), (m + "/d2").c_str()) == -1);
  CHECK(errno == ENOTEMPTY);
  REQUIRE(unlink((m + "/d2/x").c_str()) == 0);
  CHECK(rename((m + "/d1").c_str(), (m + "/d2").c_str()) == 0);

  // Unlink of an open file: still readable and writable through the descriptor; its blocks
  // come back only after the last close.
  struct statvfs before, during, after;
  REQUIRE(statvfs(m.c_str(), &before) == 0);
  {
    const std::string data = pattern(4 << 20, 7);
    const int fd = open((m + "/open-unlinked").c_str(), O_CREAT | O_RDWR, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, data.data(), data.size()) == ssize_t(data.size()));
    REQUIRE(unlink((m + "/open-unlinked").c_str()) == 0);
    CHECK(access((m + "/open-unlinked").c_str(), F_OK) == -1);
    std::string back(data.size(), '\0');
    CHECK(pread(fd, back.data(), back.size(), 0) == ssize_t(back.size()));
    CHECK(back == data);
    struct stat st;
    REQUIRE(fstat(fd, &st) == 0);
    CHECK(st.st_nlink == 0);
    REQUIRE(statvfs(m.c_str(), &during) == 0);
    CHECK(during.f_bfree + 1000 <= before.f_bfree);  // 4 MiB (1024 blocks) still held
    REQUIRE(close(fd) == 0);
  }
  // The kernel sends RELEASE after close() returns, so the blocks come back a moment later.
  for (int i = 0; i < 200; i++) {
    REQUIRE(statvfs(m.c_str(), &after) == 0);
    if (after.f_bfree + 16 >= before.f_bfree) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(after.f_bfree + 16 >= before.f_bfree);

  // Link counts: files count their names, directories 2 + their subdirectories.
  write_file(m + "/l", "l");
  REQUIRE(link((m + "/l").c_str(), (m + "/l2").c_str()) == 0);
  REQUIRE(link((m + "/l").c_str(), (m + "/l3").c_str()) == 0);
  struct stat st;
  REQUIRE(stat((m + "/l").c_str(), &st) == 0);
  CHECK(st.st_nlink == 3);
  REQUIRE(unlink((m + "/l2").c_str()) == 0);
  REQUIRE(stat((m + "/l3").c_str(), &st) == 0);
  CHECK(st.st_nlink == 2);
  mkdir((m + "/p").c_str(), 0755);
  mkdir((m + "/p/a").c_str(), 0755);
  mkdir((m + "/p/b").c_str(), 0755);
  REQUIRE(stat((m + "/p").c_str(), &st) == 0);
  CHECK(st.st_nlink == 4);
  REQUIRE(rmdir((m + "/p/a").c_str()) == 0);
  REQUIRE(stat((m + "/p").c_str(), &st) == 0);
  CHECK(st.st_nlink == 3);
  CHECK(rmdir((m + "/p").c_str()) == -1);
  CHECK(errno == ENOTEMPTY);

  // Sparse files, holes, SEEK_DATA/SEEK_HOLE, truncate down and up, beyond 4 GiB.
  {
    const int fd = open((m + "/sparse").c_str(), O_CREAT | O_RDWR, 0644);
    REQUIRE(fd >= 0);
    const off_t far = (6ll << 30) + 12345;
    REQUIRE(pwrite(fd, "head", 4, 0) == 4);
    REQUIRE(pwrite(fd, "tail", 4, far) == 4);
    REQUIRE(fstat(fd, &st) == 0);
    CHECK(st.st_size == far + 4);
    CHECK(st.st_blocks == 16);  // two 4 KiB blocks
    CHECK(lseek(fd, 0, SEEK_HOLE) == 4096);
    CHECK(lseek(fd, 4096, SEEK_DATA) == (far & ~4095ll));
    char buf[8] = {};
    CHECK(pread(fd, buf, 4, 1ll << 32) == 4);
    CHECK(std::string(buf, 4) == std::string(4, '\0'));
    CHECK(pread(fd, buf, 4, far) == 4);
    CHECK(std::string(buf, 4) == "tail");
    REQUIRE(ftruncate(fd, 2) == 0);  // down into the first block
    REQUIRE(ftruncate(fd, 8192) == 0);  // and up again: the cut bytes read as zeros
    CHECK(pread(fd, buf, 4, 0) == 4);
    CHECK(std::string(buf, 4) == std::string("he\0\0", 4));
    REQUIRE(fstat(fd, &st) == 0);
    CHECK(st.st_size == 8192);
    CHECK(st.st_blocks == 8);
    // Punch a hole, then preallocate: both read as zeros, the size moves only without KEEP_SIZE.
    const std::string data = pattern(64 << 10, 3);
    REQUIRE(pwrite(fd, data.data(), data.size(), 0) == ssize_t(data.size()));
    REQUIRE(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 8192) == 0);
    std::string back(data.size(), '\0');
    REQUIRE(pread(fd, back.data(), back.size(), 0) == ssize_t(back.size()));
    CHECK(back.substr(0, 4096) == data.substr(0, 4096));
    CHECK(back.substr(4096, 8192) == std::string(8192, '\0'));
    CHECK(back.substr(12288) == data.substr(12288));
    REQUIRE(fallocate(fd, 0, 1 << 20, 1 << 20) == 0);
    REQUIRE(fstat(fd, &st) == 0);
    CHECK(st.st_size == 2 << 20);
    CHECK(pread(fd, buf, 4, (1 << 20) + 10) == 4);
    CHECK(std::string(buf, 4) == std::string(4, '\0'));
    close(fd);
  }

  // A 10,000-entry directory lists every name exactly once.
  mkdir((m + "/big").c_str(), 0755);
  for (int i = 0; i < 10000; i++) {
    const int fd = open((m + "/big/entry-" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY, 0644);
    REQUIRE(fd >= 0);
    close(fd);
  }
  std::set<std::string> names;
  int dups = 0;
  DIR* d = opendir((m + "/big").c_str());
  REQUIRE(d);
  while (dirent* e = readdir(d)) {
    if (!names.insert(e->d_name).second) dups++;
  }
  closedir(d);
  CHECK(dups == 0);
  CHECK(names.size() == 10002);  // with . and ..
  CHECK(names.count("entry-9999") == 1);

  // default_permissions: the kernel checks mode bits, so `nobody` cannot read a 0600 file of
  // root's nor write a 0644 one, but can read the latter.
  write_file(m + "/secret", "s");
  REQUIRE(chmod((m + "/secret").c_str(), 0600) == 0);
  write_file(m + "/public", "p");
  REQUIRE(chmod((m + "/public").c_str(), 0644) == 0);
  REQUIRE(chmod(m.c_str(), 0755) == 0);
  CHECK(errno_as_nobody(m + "/secret", O_RDONLY) == EACCES);
  CHECK(errno_as_nobody(m + "/public", O_WRONLY) == EACCES);
  CHECK(errno_as_nobody(m + "/public", O_RDONLY) == 0);
  REQUIRE(chown((m + "/secret").c_str(), 65534, 65534) == 0);
  CHECK(errno_as_nobody(m + "/secret", O_RDWR) == 0);

  // copy_file_range: the daemon copies; a range past the source's end copies what is there.
  {
    const std::string data = pattern((3 << 20) + 777, 11);
    write_file(m + "/copy-src", data);
    const int in = open((m + "/copy-src").c_str(), O_RDONLY);
    const int out = open((m + "/copy-dst").c_str(), O_CREAT | O_WRONLY, 0644);
    REQUIRE(in >= 0);
    REQUIRE(out >= 0);
    loff_t a = 100, b = 5000;
    size_t copied = 0;
    for (ssize_t n; (n = copy_file_range(in, &a, out, &b, 8 << 20, 0)) > 0;) copied += size_t(n);
    CHECK(copied == data.size() - 100);
    close(in);
    close(out);
    const std::string got = read_file(m + "/copy-dst");
    REQUIRE(got.size() == 5000 + data.size() - 100);
    CHECK(got.substr(0, 5000) == std::string(5000, '\0'));
    CHECK(got.substr(5000) == data.substr(100));
  }

  // lsattr/chattr (fs/attr_flags.h): the flags biofs keeps are set and read back, cleared
  // again; one it does not keep is refused.
  {
    const int fd = open((m + "/dst").c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    int flags = -1;
    CHECK(ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0);
    CHECK(flags == 0);
    flags = FS_IMMUTABLE_FL | FS_NODUMP_FL;
    CHECK(ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
    flags = 0;
    CHECK(ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0);
    CHECK(flags == (FS_IMMUTABLE_FL | FS_NODUMP_FL));
    flags = 0;
    CHECK(ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
    flags = FS_COMPR_FL;
    CHECK(ioctl(fd, FS_IOC_SETFLAGS, &flags) == -1);
    CHECK(errno == EOPNOTSUPP);
    close(fd);
  }

  // Extended attributes: set, get, list, replace, remove, and their errors.
  const std::string x = m + "/dst";
  REQUIRE(setxattr(x.c_str(), "user.color", "blue", 4, 0) == 0);
  CHECK(setxattr(x.c_str(), "user.color", "red", 3, XATTR_CREATE) == -1);
  CHECK(errno == EEXIST);
  CHECK(setxattr(x.c_str(), "user.size", "1", 1, XATTR_REPLACE) == -1);
  CHECK(errno == ENODATA);
  REQUIRE(setxattr(x.c_str(), "user.color", "green", 5, XATTR_REPLACE) == 0);
  REQUIRE(setxattr(x.c_str(), "user.size", "1", 1, 0) == 0);
  char v[16] = {};
  CHECK(getxattr(x.c_str(), "user.color", v, sizeof(v)) == 5);
  CHECK(std::string(v, 5) == "green");
  CHECK(getxattr(x.c_str(), "user.color", v, 2) == -1);
  CHECK(errno == ERANGE);
  char list[64] = {};
  const ssize_t n = listxattr(x.c_str(), list, sizeof(list));
  CHECK(n == ssize_t(sizeof("user.color") + sizeof("user.size")));
  REQUIRE(removexattr(x.c_str(), "user.color") == 0);
  CHECK(getxattr(x.c_str(), "user.color", v, sizeof(v)) == -1);
  CHECK(errno == ENODATA);
}

// What the suite left, checked again after a remount.
void check_after_remount(const std::string& m) {
  CHECK(read_file(m + "/dst") == "other");
  CHECK(read_file(m + "/other") == "source");
  CHECK(read_file(m + "/trunc") == "hi\n");
  struct stat st;
  REQUIRE(stat((m + "/sparse").c_str(), &st) == 0);
  CHECK(st.st_size == 2 << 20);
  REQUIRE(stat((m + "/l").c_str(), &st) == 0);
  CHECK(st.st_nlink == 2);
  REQUIRE(stat((m + "/big/entry-5000").c_str(), &st) == 0);
  char v[4] = {};
  CHECK(getxattr((m + "/dst").c_str(), "user.size", v, sizeof(v)) == 1);
  REQUIRE(stat((m + "/secret").c_str(), &st) == 0);
  CHECK(st.st_uid == 65534);
  CHECK((st.st_mode & 07777) == 0600);
}

void run_suite_with(const std::string& opts) {
  if (!have_fuse()) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible");
    return;
  }
  CAPTURE(opts);
  FuseScratch s(256 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);  // so that `nobody` reaches the mount
  const std::string all = "default_permissions,allow_other" + (opts.empty() ? "" : "," + opts);
  pid_t pid = mount_fg(s.img, s.mnt, all);
  posix_suite(s.mnt);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  pid = mount_fg(s.img, s.mnt, all);
  check_after_remount(s.mnt);
  unmount(s.mnt, pid);
}

}  // namespace

// The permission model (fs/README.md, "Permissions"): the kernel checks every access as for
// ext4, with allow_other alone too. Real operations by two unprivileged users against root's
// files and each other's.
TEST_CASE("fuse posix: with allow_other alone, a second user gets what ext4 would give it") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  REQUIRE(chmod(s.dir.c_str(), 0755) == 0);
  const pid_t pid = mount_fg(s.img, s.mnt, "allow_other");
  const std::string m = s.mnt;
  REQUIRE(chmod(m.c_str(), 0755) == 0);
  const std::string secret = m + "/secret", pub = m + "/public", rootdir = m + "/rootdir", tmp = m + "/tmp";
  write_file(secret, "s");
  REQUIRE(chmod(secret.c_str(), 0600) == 0);
  write_file(pub, "p");
  REQUIRE(chmod(pub.c_str(), 0644) == 0);
  REQUIRE(mkdir(rootdir.c_str(), 0755) == 0);
  write_file(rootdir + "/f", "f");
  REQUIRE(mkdir(tmp.c_str(), 01777) == 0);
  REQUIRE(chmod(tmp.c_str(), 01777) == 0);

  // Mode bits against the caller.
  CHECK(errno_as_nobody(secret, O_RDONLY) == EACCES);
  CHECK(errno_as_nobody(pub, O_RDONLY) == 0);
  CHECK(errno_as_nobody(pub, O_WRONLY | O_APPEND) == EACCES);
  CHECK(errno_as_nobody([&] { return open((rootdir + "/new").c_str(), O_CREAT | O_WRONLY, 0644); }) == EACCES);
  CHECK(errno_as_nobody([&] { return mkdir((rootdir + "/sub").c_str(), 0755); }) == EACCES);
  CHECK(errno_as_nobody([&] { return unlink((rootdir + "/f").c_str()); }) == EACCES);
  CHECK(errno_as_nobody([&] { return rename((rootdir + "/f").c_str(), (tmp + "/f").c_str()); }) == EACCES);
  CHECK(errno_as_nobody([&] { return truncate(pub.c_str(), 0); }) == EACCES);
  CHECK(errno_as_nobody([&] { return access(secret.c_str(), R_OK); }) == EACCES);
  CHECK(errno_as_nobody([&] { return access(pub.c_str(), R_OK); }) == 0);
  // Only the owner changes mode, times (to a given value) and attributes; nobody gives a file away.
  CHECK(errno_as_nobody([&] { return chmod(pub.c_str(), 0666); }) == EPERM);
  CHECK(errno_as_nobody([&] { return chown(pub.c_str(), kNobody, kNobody); }) == EPERM);
  const struct timespec past[2] = {{1000, 0}, {1000, 0}};
  CHECK(errno_as_nobody([&] { return utimensat(AT_FDCWD, pub.c_str(), past, 0); }) == EPERM);
  CHECK(errno_as_nobody([&] { return setxattr(pub.c_str(), "user.x", "1", 1, 0); }) == EACCES);
  CHECK(errno_as_nobody([&] { return removexattr(pub.c_str(), "user.x"); }) == EACCES);
  CHECK(errno_as_nobody([&] { return setxattr(pub.c_str(), "trusted.x", "1", 1, 0); }) == EPERM);
  CHECK(read_file(pub) == "p");
  CHECK(mode_of(pub) == 0644);

  // A sticky directory: each user removes only its own names.
  const std::string theirs = tmp + "/theirs", mine = tmp + "/mine";
  REQUIRE(errno_as(kOther, [&] { return open(theirs.c_str(), O_CREAT | O_WRONLY, 0666); }) == 0);
  REQUIRE(errno_as_nobody([&] { return open(mine.c_str(), O_CREAT | O_WRONLY, 0644); }) == 0);
  CHECK(errno_as_nobody([&] { return unlink(theirs.c_str()); }) == EPERM);
  CHECK(errno_as_nobody([&] { return rename(theirs.c_str(), (tmp + "/moved").c_str()); }) == EPERM);
  CHECK(errno_as_nobody([&] { return open(theirs.c_str(), O_RDONLY); }) == 0);  // 0644 after the umask
  CHECK(errno_as_nobody([&] { return open(theirs.c_str(), O_WRONLY); }) == EACCES);
  CHECK(access(theirs.c_str(), F_OK) == 0);
  // One's own file cannot go to root or to another user; its group only to one the owner is in.
  CHECK(errno_as_nobody([&] { return chown(mine.c_str(), 0, kNobody); }) == EPERM);
  CHECK(errno_as_nobody([&] { return chown(mine.c_str(), kOther, kNobody); }) == EPERM);
  CHECK(errno_as_nobody([&] { return chown(mine.c_str(), kNobody, 0); }) == EPERM);
  CHECK(errno_as_nobody([&] { return chmod(mine.c_str(), 0600); }) == 0);
  CHECK(errno_as_nobody([&] { return unlink(mine.c_str()); }) == 0);

  // Set-id bits: chmod g+s by an owner outside the group loses the bit; a write by another
  // user drops setuid, and setgid with group exec.
  write_file(m + "/owned", "o");
  REQUIRE(chown((m + "/owned").c_str(), kNobody, 0) == 0);
  CHECK(errno_as_nobody([&] { return chmod((m + "/owned").c_str(), 02755); }) == 0);
  CHECK(mode_of(m + "/owned") == 0755);
  const std::string suid = m + "/suid";
  write_file(suid, "x");
  REQUIRE(chmod(suid.c_str(), 06777) == 0);
  CHECK(errno_as_nobody([&] {
    const int fd = open(suid.c_str(), O_WRONLY | O_APPEND);
    return fd < 0 ? -1 : int(write(fd, "y", 1));
  }) == 0);
  CHECK(mode_of(suid) == 0777);
  CHECK(read_file(suid) == "xy");
  // A direct write (no page cache: the kernel leaves the bits to the filesystem) drops them
  // too, and the kernel's copy of the mode knows at once: stat(1) asks statx for the mode
  // alone, which the kernel answers from that copy, and exec goes by it.
  const std::string dsuid = m + "/dsuid";
  write_file(dsuid, std::string(4096, 'x'));
  REQUIRE(chmod(dsuid.c_str(), 06777) == 0);
  CHECK(errno_as_nobody([&] {
    const int fd = open(dsuid.c_str(), O_WRONLY | O_DIRECT);
    DirectBlock blk;
    std::memset(blk.p, 'y', 4096);
    const bool ok = fd >= 0 && pwrite(fd, blk.p, 4096, 0) == 4096;
    if (fd >= 0) close(fd);
    return ok ? 0 : -1;
  }) == 0);
  struct statx sx {};
  REQUIRE(statx(AT_FDCWD, dsuid.c_str(), 0, STATX_MODE, &sx) == 0);
  CHECK((sx.stx_mode & 07777) == 0777);
  CHECK(read_file(dsuid) == std::string(4096, 'y'));
  REQUIRE(chmod(suid.c_str(), 04755) == 0);
  REQUIRE(chown(suid.c_str(), kNobody, kNobody) == 0);
  CHECK(mode_of(suid) == 0755);  // chown drops setuid, as on ext4
  // open(O_TRUNC) truncates inside OPEN (atomic_o_trunc: no SETATTR reaches the daemon), and the
  // truncation drops the bits for a caller without CAP_FSETID, as ext4's do_truncate does;
  // root's keeps them.
  const std::string tsuid = m + "/tsuid";
  write_file(tsuid, "x");
  REQUIRE(chmod(tsuid.c_str(), 06777) == 0);
  CHECK(errno_as_nobody([&] {
    const int fd = open(tsuid.c_str(), O_WRONLY | O_TRUNC);
    return fd < 0 ? -1 : close(fd);
  }) == 0);
  CHECK(mode_of(tsuid) == 0777);
  CHECK(read_file(tsuid).empty());
  write_file(tsuid, "x");
  REQUIRE(chmod(tsuid.c_str(), 06777) == 0);
  write_file(tsuid, "");  // root: O_TRUNC keeps them
  CHECK(mode_of(tsuid) == 06777);

  // The stats are for root and the mounting user (root here).
  char v[16];
  CHECK(errno_as_nobody([&] { return int(getxattr(m.c_str(), "user.biofs.stats", v, sizeof(v))); }) == EACCES);
  CHECK(getxattr(m.c_str(), "user.biofs.stats", nullptr, 0) > 0);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse posix: the defaults") { run_suite_with(""); }
TEST_CASE("fuse posix: bio_cache=off") { run_suite_with("bio_cache=off"); }
TEST_CASE("fuse posix: tag_batch=off") { run_suite_with("tag_batch=off"); }
TEST_CASE("fuse posix: split_check=fast") { run_suite_with("split_check=fast"); }
