// `mount -o remount`'s pieces that need no mount: mountinfo's lines as the kernel writes them
// (show_mountinfo(), fs/proc_namespace.c) and the mount(2) flags a remount passes. The remount
// itself is tested through a mount (tests/fs/fuse_ext4_parity_test.cc).
#include <doctest/doctest.h>

#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "daemon/mountinfo.h"
#include "daemon/remount.h"

using namespace biofs;

TEST_CASE("mountinfo: a line's fields, optional fields skipped, escapes undone") {
  MountEntry e;
  REQUIRE(parse_mountinfo_line("46 27 0:41 / /tmp/a\\040b rw,nosuid,relatime shared:1 master:2 - fuse.biofs "
                               "biofs:emu:/x\\134y ro,user_id=0,group_id=0",
                               &e));
  CHECK(e.dev == "0:41");
  CHECK(e.mountpoint == "/tmp/a b");
  CHECK(e.mount_opts == "rw,nosuid,relatime");
  CHECK(e.fstype == "fuse.biofs");
  CHECK(e.source == "biofs:emu:/x\\y");
  CHECK(e.super_opts == "ro,user_id=0,group_id=0");
  REQUIRE(parse_mountinfo_line("22 1 8:1 / / rw - ext4 /dev/sda1 rw", &e));  // no optional field
  CHECK(e.fstype == "ext4");
  CHECK_FALSE(parse_mountinfo_line("22 1 8:1 / / rw ext4 /dev/sda1 rw", &e));  // no separator
  CHECK_FALSE(parse_mountinfo_line("", &e));
}

TEST_CASE("mountinfo: this process's own file has its root mount, and a named file is read line by line") {
  bool root = false;
  for (const MountEntry& e : read_mountinfo()) root = root || e.mountpoint == "/";
  CHECK(root);
  char path[] = "/tmp/biofs-mountinfo-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string text = "1 0 0:1 / / rw - a a rw\nnot a line\n2 1 0:2 / /m ro - b b ro\n";
  REQUIRE(write(fd, text.data(), text.size()) == ssize_t(text.size()));
  close(fd);
  const std::vector<MountEntry> all = read_mountinfo(path);
  unlink(path);
  REQUIRE(all.size() == 2);
  CHECK(all[1].mountpoint == "/m");
}

TEST_CASE("mountinfo: has_option matches whole items only") {
  CHECK(has_option("ro,nosuid", "ro"));
  CHECK(has_option("rw,ro", "ro"));
  CHECK_FALSE(has_option("rw,rootmode=40000", "ro"));
  CHECK_FALSE(has_option("nosuid", "suid"));
  CHECK_FALSE(has_option("", "ro"));
}

TEST_CASE("remount flags: ro or rw as asked, the last winning, and every flag not named stays as it is") {
  const std::vector<std::string> ro = {"ro"}, rw = {"rw"}, both = {"ro", "relatime", "rw"}, none = {"allow_other"};
  CHECK(remount_flags("rw,relatime", "rw,user_id=0", ro) == (MS_REMOUNT | MS_RDONLY));
  CHECK(remount_flags("ro,relatime", "ro,user_id=0", rw) == MS_REMOUNT);
  CHECK(remount_flags("ro", "ro", both) == MS_REMOUNT);
  CHECK(remount_flags("ro", "ro", none) == (MS_REMOUNT | MS_RDONLY));  // nothing asked: stays
  // The mount's own flags and the superblock's are kept: mount(2) would clear what is not passed.
  CHECK(remount_flags("rw,nosuid,nodev,noexec", "rw,sync,dirsync", ro) ==
        (MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SYNCHRONOUS | MS_DIRSYNC));
  // ... and changed where the list says.
  CHECK(remount_flags("rw,nosuid,nodev", "rw,sync", {"suid", "dev", "async", "noexec"}) == (MS_REMOUNT | MS_NOEXEC));
  // The atime flags are not passed: with none, the kernel keeps the mount's (path_mount()).
  CHECK((remount_flags("rw,noatime,nodiratime", "rw", ro) & (MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME)) == 0);
}
