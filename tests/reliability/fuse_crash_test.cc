// Crash test through the kernel: the biofs daemon (build's bin/biofs) serves a real FUSE mount
// while the mixed workload runs on it with system calls; at a seeded moment the daemon gets
// SIGKILL. Then: lazy unmount, mount again (the journal replays), every file whose fsync
// returned before the kill (and was not touched after) has exactly its fsync'd contents, the
// whole tree reads back, a clean unmount, and fsck.biofs -n finds nothing. The same for a kill
// in the middle of tar -x on a device with a volatile write cache, then tar again to the end.
// Rounds: BIOFS_CRASH_ROUNDS (default 3); first seed: BIOFS_CRASH_SEED (default 1). Skips
// itself without /dev/fuse, root or fusermount3.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../fs/fuse_util.h"
#include "rel_util.h"

using namespace biofs_test;
using biofs::test::is_mounted;
using biofs::test::kBin;
using biofs::test::mount_fg;
using biofs::test::run;

namespace {

bool can_mount() {
  return access("/dev/fuse", R_OK | W_OK) == 0 && geteuid() == 0 && run("command -v fusermount3") == 0;
}

// The workload's calls as system calls under the mountpoint.
class PosixBackend : public Backend {
 public:
  explicit PosixBackend(std::string root) : root_(std::move(root)) {}
  static int err(int rc) { return rc < 0 ? -errno : 0; }
  int create(const std::string& p) override {
    const int fd = open((root_ + p).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) return -errno;
    return err(close(fd));
  }
  int write(const std::string& p, uint64_t off, const std::string& data) override {
    const int fd = open((root_ + p).c_str(), O_WRONLY);
    if (fd < 0) return -errno;
    const ssize_t n = pwrite(fd, data.data(), data.size(), off_t(off));
    const int e = n < 0 ? -errno : n == ssize_t(data.size()) ? 0 : -EIO;
    close(fd);
    return e;
  }
  int truncate(const std::string& p, uint64_t size) override { return err(::truncate((root_ + p).c_str(), off_t(size))); }
  int rename(const std::string& a, const std::string& b) override {
    return err(::rename((root_ + a).c_str(), (root_ + b).c_str()));
  }
  int unlink(const std::string& p) override { return err(::unlink((root_ + p).c_str())); }
  int mkdir(const std::string& p) override { return err(::mkdir((root_ + p).c_str(), 0755)); }
  int rmdir(const std::string& p) override { return err(::rmdir((root_ + p).c_str())); }
  int fsync(const std::string& p) override {
    const int fd = open((root_ + p).c_str(), O_RDONLY);
    if (fd < 0) return -errno;
    const int e = err(::fsync(fd));
    close(fd);
    return e;
  }
  int read(const std::string& p, std::string* out) override {
    const int fd = open((root_ + p).c_str(), O_RDONLY);
    if (fd < 0) return -errno;
    out->clear();
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) out->append(buf, size_t(n));
    const int e = n < 0 ? -errno : 0;
    close(fd);
    return e;
  }

 private:
  std::string root_;
};

// Reads every file under `dir` (recursively); returns "" or the first that fails.
std::string read_all(const std::string& dir, size_t* files) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::ifstream f(it->path(), std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) return it->path().string() + ": read failed";
    (*files)++;
  }
  return ec ? dir + ": " + ec.message() : "";
}

}  // namespace

TEST_CASE("crash: SIGKILL of the FUSE daemon at a random moment keeps fsync'd files, remounts and checks clean") {
  if (!can_mount()) {
    MESSAGE("skipped: needs /dev/fuse, root and fusermount3");
    return;
  }
  ScratchDir dir;
  const std::string img = dir.file("disk.img"), mnt = dir.file("mnt");
  REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
  const uint64_t rounds = env_u64("BIOFS_CRASH_ROUNDS", 3), seed0 = env_u64("BIOFS_CRASH_SEED", 1);
  uint64_t promised = 0, ops_total = 0;
  for (uint64_t r = 0; r < rounds; r++) {
    const uint64_t seed = seed0 + r;
    CAPTURE(seed);
    make_image(img, 32ull << 20);
    Rng rng(seed ^ 0xDEAD);
    const uint64_t kill_at = 10 + rng.below(200);           // after this many operations
    const auto kill_delay = std::chrono::microseconds(rng.below(3000));  // then this much later
    // Background commits every second as well as on fsync; half the rounds with the bio cache
    // off; two rounds in three on a device with a volatile write cache, whose Flush a fsync waits
    // for (and which the kill empties, as a power cut empties a drive's).
    const std::string opts = std::string("commit=1,bio_cache=") + (seed % 2 ? "on" : "off");
    const std::string dev = "emu:" + img + (seed % 3 ? ",vwc" : "");
    CAPTURE(dev);
    pid_t pid = mount_fg(dev, mnt, opts);
    Workload w(seed);
    PosixBackend be(mnt);
    std::atomic<uint64_t> done{0};
    std::atomic<bool> killed{false};
    std::thread killer([&] {
      while (done.load() < kill_at) std::this_thread::sleep_for(std::chrono::microseconds(50));
      std::this_thread::sleep_for(kill_delay);
      kill(pid, SIGKILL);
      killed = true;
    });
    REQUIRE(w.setup(be) == 0);
    // Operations fail (ENOTCONN) once the daemon is gone; stop a little after that.
    for (uint64_t i = 0; i < 2000; i++) {
      const int e = w.step(be);
      done++;
      if (killed && e) break;
    }
    killer.join();
    ops_total += w.ops();
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st));
    run("fusermount3 -u -z " + mnt);
    if (is_mounted(mnt)) run("umount -l " + mnt);
    REQUIRE_FALSE(is_mounted(mnt));

    pid = mount_fg(dev, mnt, "bio_cache=on");
    PosixBackend after(mnt);
    const std::string broken = w.check(after);
    CHECK_MESSAGE(broken == "", "killed after " << kill_at << " operations: " << broken);
    promised += w.synced_files();
    size_t files = 0;
    const std::string unreadable = read_all(mnt, &files);
    CHECK_MESSAGE(unreadable == "", unreadable);
    REQUIRE(run("fusermount3 -u " + mnt) == 0);
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    std::string out;
    const int rc = run(kBin + "/fsck.biofs -n emu:" + img, &out);
    CHECK_MESSAGE(rc == 0, "fsck.biofs -n after the kill at " << kill_at << ": " << out);
  }
  MESSAGE(rounds << " rounds, " << ops_total << " operations, " << promised << " fsync'd files checked");
}

TEST_CASE("crash: SIGKILL of the daemon in the middle of tar -x on emu:IMG,vwc remounts, reads back and checks clean") {
  // tar writes without fsync, so the kill may lose what the write cache held and no commit
  // flushed; what the journal promised must be there and consistent: the tree reads back, tar
  // runs again over it to the end, and fsck finds nothing.
  if (!can_mount()) {
    MESSAGE("skipped: needs /dev/fuse, root and fusermount3");
    return;
  }
  ScratchDir dir;
  const std::string img = dir.file("disk.img"), mnt = dir.file("mnt"), src = dir.file("src");
  const std::string tarball = dir.file("src.tar");
  REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
  // 300 files of 1-60 KiB in 10 directories and four of 1 MiB: small writes and cache-filling ones.
  for (int d = 0; d < 10; d++) {
    const std::string sub = src + "/d" + std::to_string(d);
    std::filesystem::create_directories(sub);
    for (int f = 0; f < 30; f++) {
      std::ofstream(sub + "/f" + std::to_string(f), std::ios::binary)
          << std::string(size_t(1024 * (1 + (f * 13 + d * 7) % 60)), char('a' + (f + d) % 26));
    }
  }
  for (int b = 0; b < 4; b++) std::ofstream(src + "/big" + std::to_string(b), std::ios::binary) << std::string(1 << 20, char('A' + b));
  REQUIRE(run("tar -C " + src + " -cf " + tarball + " .") == 0);
  // Its own count (BIOFS_TAR_CRASH_ROUNDS, else BIOFS_CRASH_ROUNDS): a round costs about 3 s,
  // ten times the other cases' (each journal commit of the small journal is a host fdatasync),
  // and the kill instants it draws span 300 ms, about 1.5 times tar's whole run.
  const uint64_t rounds = env_u64("BIOFS_TAR_CRASH_ROUNDS", env_u64("BIOFS_CRASH_ROUNDS", 3));
  const uint64_t seed0 = env_u64("BIOFS_CRASH_SEED", 1);
  int interrupted = 0;  // rounds whose tar the kill cut short
  for (uint64_t r = 0; r < rounds; r++) {
    const uint64_t seed = seed0 + r;
    CAPTURE(seed);
    make_image(img, 64ull << 20);
    const std::string dev = "emu:" + img + ",vwc";
    pid_t pid = mount_fg(dev, mnt, "commit=1");
    Rng rng(seed ^ 0x7A7);
    const auto kill_after = std::chrono::milliseconds(20 + rng.below(300));
    const pid_t tar = fork();
    REQUIRE(tar >= 0);
    if (tar == 0) {
      execlp("tar", "tar", "-C", mnt.c_str(), "-xf", tarball.c_str(), (char*)nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(kill_after);
    kill(pid, SIGKILL);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    REQUIRE(waitpid(tar, &st, 0) == tar);  // done or failed (ENOTCONN): it must end
    if (WIFEXITED(st) && WEXITSTATUS(st) != 0) interrupted++;
    run("fusermount3 -u -z " + mnt);
    if (is_mounted(mnt)) run("umount -l " + mnt);
    REQUIRE_FALSE(is_mounted(mnt));

    pid = mount_fg(dev, mnt, "");
    size_t files = 0;
    const std::string unreadable = read_all(mnt, &files);
    CHECK_MESSAGE(unreadable == "", "killed after " << kill_after.count() << " ms: " << unreadable);
    std::string out;
    CHECK_MESSAGE(run("tar -C " + mnt + " -xf " + tarball, &out) == 0, out);
    CHECK_MESSAGE(run("diff -r " + src + " " + mnt, &out) == 0, out);
    REQUIRE(run("fusermount3 -u " + mnt) == 0);
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    const int rc = run(kBin + "/fsck.biofs -n " + dev, &out);
    CHECK_MESSAGE(rc == 0, "fsck.biofs -n after the kill at " << kill_after.count() << " ms: " << out);
  }
  MESSAGE(rounds << " rounds, " << interrupted << " with tar cut short by the kill");
}

// Faults through a real mount: the daemon's device gets delays from its device string and
// timeouts and failures from BIOFS_FAULT (after the mount's own commands); every system call must come back, with data or
// an error, the daemon must unmount, and the image must mount again, keep the fsync'd files
// and check clean.
TEST_CASE("fault: a FUSE mount over a faulty device answers every call and remounts clean") {
  if (!can_mount()) {
    MESSAGE("skipped: needs /dev/fuse, root and fusermount3");
    return;
  }
  ScratchDir dir;
  const std::string img = dir.file("disk.img"), mnt = dir.file("mnt");
  REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
  make_image(img, 32ull << 20);
  // Delays in the device string (commas and all, through the mount), the rest from the environment.
  pid_t pid = mount_fg("emu:" + img + ",vwc,delay=0.2,delay_us=300", mnt, "commit=1",
                           "fault_after=300,fail_read=0.002,fail_write=0.002,fail_flush=0.004,"
                           "timeout=0.003,timeout_ms=20,seed=5");
  Workload w(11);
  PosixBackend be(mnt);
  int failed = 0;
  if (w.setup(be) != 0) failed++;
  for (int i = 0; i < 300; i++) failed += w.step(be) != 0;
  REQUIRE(run("fusermount3 -u " + mnt) == 0);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));  // it exits (perhaps saying a commit failed), it does not crash
  w.remounted();
  pid = mount_fg("emu:" + img, mnt, "");
  PosixBackend after(mnt);
  const std::string broken = w.check(after);
  CHECK_MESSAGE(broken == "", broken);
  size_t files = 0;
  const std::string unreadable = read_all(mnt, &files);
  CHECK_MESSAGE(unreadable == "", unreadable);
  REQUIRE(run("fusermount3 -u " + mnt) == 0);
  REQUIRE(waitpid(pid, &st, 0) == pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n emu:" + img, &out) == 0, out);
  MESSAGE(failed << " of 300 operations failed; " << w.synced_files() << " fsync'd files checked, " << files
                 << " files read back");
}
