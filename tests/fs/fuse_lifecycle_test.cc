// Sequences a user's scripts run against a mount, end to end through the kernel: a write at
// once after rm on a full filesystem, `sync MNT` then kill -9 of the daemon, unmount followed at
// once by fsck/mkfs/mount, fallocate's zero range, and the tools' usage and error lines.
#include <doctest/doctest.h>

#include <linux/falloc.h>
#include <signal.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

// Starts the daemon as a script would (it detaches once the mount is up).
void mount_bg(const std::string& img, const std::string& mnt, const std::string& opts = "") {
  std::string out;
  const std::string all = with_test_opts(opts);
  REQUIRE_MESSAGE(run(kBin + "/biofs " + img + " " + mnt + (all.empty() ? "" : " -o " + all), &out) == 0, out);
  REQUIRE(is_mounted(mnt));
}

}  // namespace

TEST_CASE("fuse lifecycle: rm then write at once on a full filesystem succeeds") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  // No periodic commit: only the allocation's own retry can make the freed blocks usable.
  const pid_t pid = mount_fg(s.img, s.mnt, "commit=0");
  const std::string big = s.mnt + "/big";
  std::string out;
  CHECK(run("dd if=/dev/zero of=" + big + " bs=1M count=100", &out) != 0);  // fills it
  CHECK(out.find("No space left") != std::string::npos);
  REQUIRE(run("rm " + big) == 0);
  CHECK_MESSAGE(run("dd if=/dev/zero of=" + s.mnt + "/again bs=1M count=32 conv=fsync", &out) == 0, out);
  struct stat st;
  REQUIRE(stat((s.mnt + "/again").c_str(), &st) == 0);
  CHECK(st.st_size == 32 << 20);
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse lifecycle: `sync MNT` is a durability point: a kill -9 after it keeps the tree") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "commit=0");
  write_file(s.mnt + "/f", "data\n");
  REQUIRE(mkdir((s.mnt + "/d").c_str(), 0755) == 0);
  write_file(s.mnt + "/d/g", "more\n");
  REQUIRE(run("sync " + s.mnt) == 0);  // coreutils: fsync of the root directory, a commit
  write_file(s.mnt + "/after", "x");   // not covered: may be lost
  REQUIRE(kill(pid, SIGKILL) == 0);
  int st;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  run("fusermount3 -u -z " + s.mnt);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -p " + s.img, &out) <= 1, out);  // replays the journal
  const pid_t again = mount_fg(s.img, s.mnt, "");
  CHECK(read_file(s.mnt + "/f") == "data\n");
  CHECK(read_file(s.mnt + "/d/g") == "more\n");
  unmount(s.mnt, again);
}

TEST_CASE("fuse lifecycle: a clean unmount commits everything, and fsck, mkfs and mount right after it wait for the daemon") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  std::string out;
  for (int round = 0; round < 8; round++) {
    CAPTURE(round);
    mount_bg(s.img, s.mnt, "commit=0");
    // Enough dirty metadata that the daemon's last commit takes a while after the unmount.
    REQUIRE(run("mkdir -p " + s.mnt + "/r" + std::to_string(round) + " && cd " + s.mnt + "/r" +
                std::to_string(round) + " && for i in $(seq 300); do echo $i > f$i; done") == 0);
    REQUIRE(run("fusermount3 -u " + s.mnt) == 0);
    CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
    CHECK(out.find("is in use") == std::string::npos);
  }
  mount_bg(s.img, s.mnt);
  for (int round = 0; round < 8; round++)
    CHECK(read_file(s.mnt + "/r" + std::to_string(round) + "/f300") == "300\n");
  // A mounted image is refused (after the 2 s of grace an unmount that has just returned may
  // need: devices/device_lock.h), without a wait line.
  CHECK(run(kBin + "/fsck.biofs -n " + s.img, &out) == 8);
  CHECK(out.find("is in use (mounted)") != std::string::npos);
  CHECK(out.find("waiting") == std::string::npos);
  // mount again right after an unmount, then mkfs right after that.
  REQUIRE(run("fusermount3 -u " + s.mnt) == 0);
  mount_bg(s.img, s.mnt);
  REQUIRE(run("fusermount3 -u " + s.mnt) == 0);
  CHECK_MESSAGE(run(kBin + "/mkfs.biofs -q -f " + s.img, &out) == 0, out);
}

namespace {
// The source /proc/mounts shows for `mnt` ("" when it is not mounted).
std::string mount_source(const std::string& mnt) {
  std::ifstream f("/proc/mounts");
  for (std::string src, dir, rest; f >> src >> dir && std::getline(f, rest);)
    if (dir == mnt) return src;
  return "";
}
}  // namespace

TEST_CASE("fuse lifecycle: the mount's source is biofs:DEVICE, or what -o fsname=NAME says (mount.fuse's helpers use it)") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  pid_t pid = mount_fg(s.img + ",vwc", s.mnt, "");
  CHECK(mount_source(s.mnt) == "biofs:" + s.img + ",vwc");
  unmount(s.mnt, pid);
  pid = mount_fg(s.img + ",vwc", s.mnt, "fsname=biofs:emu:" + s.img);
  CHECK(mount_source(s.mnt) == "biofs:emu:" + s.img);
  unmount(s.mnt, pid);
}

TEST_CASE("fuse lifecycle: fallocate zero range through the mount") {
  if (!have_fuse()) return;
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "");
  const std::string data = pattern(64 << 10, 9);
  write_file(s.mnt + "/z", data);
  const int fd = open((s.mnt + "/z").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 100, 20000) == 0);
  CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 60000, 100000) == 0);
  close(fd);
  std::string want = data;
  std::fill(want.begin() + 100, want.begin() + 20100, '\0');
  std::fill(want.begin() + 60000, want.end(), '\0');
  CHECK(read_file(s.mnt + "/z") == want);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse lifecycle: --help prints the usage only, an unusable image is one line") {
  std::string out;
  for (const char* tool : {"mkfs.biofs", "fsck.biofs", "biofs"}) {
    CAPTURE(tool);
    CHECK(run(kBin + "/" + tool + " --help", &out) == 0);
    CHECK(out.find("usage:") == 0);
    CHECK(out.find("invalid option") == std::string::npos);
  }
  char tmpl[] = "/tmp/biofs-junk-XXXXXX";
  const int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 8 << 20) == 0);
  close(fd);
  CHECK(run(kBin + "/fsck.biofs -n " + std::string(tmpl), &out) == 8);
  unlink(tmpl);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK(out.find("cannot check this filesystem: ") != std::string::npos);
}

// The "hung FUSE mount" recipe: echo 1 > /sys/fs/fuse/connections/N/abort. The session loop
// ends at once while the device still holds reads and writes (each command delayed 20 ms);
// their completions answer into the aborted connection, and the daemon must let them finish
// before it tears the session down (a sanitizer build caught a reply racing
// fuse_session_destroy at unmount). `writers` of a scratch file and `readers` of a synced one
// run until the mount fails.
static void abort_with_io_in_flight(int writers, int readers) {
  const std::string conns = "/sys/fs/fuse/connections";
  if (access((conns + "/.").c_str(), F_OK) != 0 || stdfs::is_empty(conns))
    run("mount -t fusectl none " + conns);
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "", "delay=1,delay_us=20000,seed=3");
  const std::string data = pattern(1 << 20, 21);
  write_file(s.mnt + "/keep", data, true);
  write_file(s.mnt + "/scratch", pattern(1 << 20, 22), true);
  struct stat st{};
  REQUIRE(stat(s.mnt.c_str(), &st) == 0);
  const std::string abort_file = conns + "/" + std::to_string(minor(st.st_dev)) + "/abort";
  if (access(abort_file.c_str(), W_OK) != 0) {
    MESSAGE("no fusectl abort file here (" << abort_file << "): skipped");
    unmount(s.mnt, pid);
    return;
  }
  std::vector<pid_t> users;
  for (int i = 0; i < writers + readers; i++) {
    const pid_t c = fork();
    REQUIRE(c >= 0);
    if (c == 0) {
      const bool writer = i < writers;
      const int fd = open((s.mnt + (writer ? "/scratch" : "/keep")).c_str(), (writer ? O_WRONLY : O_RDONLY) | O_DIRECT);
      if (fd < 0) _exit(1);
      void* buf;
      if (posix_memalign(&buf, 4096, 4096)) _exit(1);
      memset(buf, i, 4096);
      for (unsigned n = 0;; n++) {
        const off_t off = off_t((n * 7919u + unsigned(i) * 131u) % 256u) * 4096;
        if ((writer ? pwrite(fd, buf, 4096, off) : pread(fd, buf, 4096, off)) < 0) _exit(0);
      }
    }
    users.push_back(c);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  { std::ofstream(abort_file) << "1\n"; }
  int st_daemon = 0;
  pid_t got = 0;
  for (int i = 0; i < 600 && got == 0; i++) {  // 30 s
    got = waitpid(pid, &st_daemon, WNOHANG);
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (got != pid) {
    // Say where each of its threads waits (name, kernel wait channel, system call), then end
    // it: a daemon left running would keep the test's output pipe, and ctest, waiting.
    std::string where;
    for (const auto& t : stdfs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      std::string comm, wchan, sys;
      std::getline(std::ifstream(t.path() / "comm"), comm);
      std::getline(std::ifstream(t.path() / "wchan"), wchan);
      std::getline(std::ifstream(t.path() / "syscall"), sys);
      where += "\n  " + t.path().filename().string() + " " + comm + ": " + wchan + " [" + sys.substr(0, sys.find(' ')) + "]";
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st_daemon, 0);
    for (pid_t c : users) kill(c, SIGKILL);
    FAIL("the daemon did not exit after the abort; its threads:" << where);
  }
  // A sanitizer's report ends the daemon with its own status (TSan 66) or a signal.
  CHECK_MESSAGE(WIFEXITED(st_daemon), "the daemon died of signal " << (WIFSIGNALED(st_daemon) ? WTERMSIG(st_daemon) : 0));
  CHECK(WEXITSTATUS(st_daemon) == 0);
  for (pid_t c : users) {
    int cs = 0;
    REQUIRE(waitpid(c, &cs, 0) == c);
    CHECK(WIFEXITED(cs));
  }
  if (is_mounted(s.mnt)) run("fusermount3 -u -z " + s.mnt);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  const pid_t again = mount_fg(s.img, s.mnt, "");
  CHECK(read_file(s.mnt + "/keep") == data);
  unmount(s.mnt, again);
}

TEST_CASE("fuse lifecycle: aborting the connection with I/O in flight ends the daemon cleanly and keeps synced data") {
  abort_with_io_in_flight(2, 4);
}

// One reader alone: the thread that received its read polls for it (run to completion), so the
// abort finds that thread inside a handler, waiting on its poll queue. libfuse's teardown
// cancels the ring threads; one cancelled there left the read on a poll queue nobody polled
// again, and the daemon waited for it forever (tools/libfuse-patches/0007).
TEST_CASE("fuse lifecycle: aborting the connection while a lone reader's I/O is polled ends the daemon") {
  abort_with_io_in_flight(0, 1);
}
