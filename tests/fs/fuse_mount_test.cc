// End to end through the kernel: mkfs.biofs on an image file, mount with the biofs daemon,
// use the mount with ordinary system calls, unmount, remount with the block-core toggles
// flipped, and read everything back.
#include <doctest/doctest.h>

#include "fuse_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
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

namespace {

// The "fuse" object of the mount's stats (daemon/stats.h): requested and seen transport.
std::string stats_of(const std::string& mnt) {
  std::string out;
  REQUIRE(run("getfattr --only-values -n user.biofs.stats " + mnt, &out) == 0);
  return out;
}

// A number in the stats JSON, by key ("polled": 12 -> 12); -1 if absent.
long long stat_number(const std::string& stats, const std::string& key) {
  const size_t at = stats.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::atoll(stats.c_str() + at + key.size() + 3);
}

}  // namespace

TEST_CASE("fuse: a mount that names no transport takes FUSE-over-io_uring where the kernel has it, its rings in SCHED_IDLE as root") {
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(64 << 20);
  std::string out;
  REQUIRE_MESSAGE(run(kBin + "/biofs " + s.img + " " + s.mnt, &out) == 0, out);  // as a user would, no -o
  write_file(s.mnt + "/f", "x");
  const std::string stats = stats_of(s.mnt);
  CHECK(stats.find("\"requested\":\"auto\"") != std::string::npos);
  CHECK(stats.find(fuse_uring_possible() ? "\"transport\":\"io_uring\"" : "\"transport\":\"/dev/fuse\"") !=
        std::string::npos);
  // As root the ring threads run in SCHED_IDLE under the guard (fuse_uring_sched=auto).
  CHECK(stats.find(fuse_uring_possible() ? "\"ring_sched\":\"idle\"" : "\"ring_sched\":\"normal\"") != std::string::npos);
  REQUIRE(run("fusermount3 -u " + s.mnt, &out) == 0);
}

TEST_CASE("fuse: CPU-bound threads on every CPU beside the daemon: its SCHED_IDLE rings are moved back and the I/O goes on") {
  // A SCHED_IDLE ring thread gets the CPU only when nothing else in its group wants it: busy
  // threads in the daemon's own session (its scheduling group) would hold every request up,
  // until the guard (daemon/ring_guard.h) moves the waiting ring thread to SCHED_OTHER.
  if (!have_fuse() || !fuse_uring_possible()) {
    MESSAGE("skipped: no /dev/fuse, or no FUSE-over-io_uring (or not root)");
    return;
  }
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_sched=idle");
  std::atomic<bool> hog{true};
  std::vector<std::thread> hogs;
  for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); cpu++)
    hogs.emplace_back([&, cpu] {
      pin_to_cpu(int(cpu));
      while (hog.load(std::memory_order_relaxed)) {
      }
    });
  std::string stats;
  {
    const int fd = open((s.mnt + "/f").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
    REQUIRE(fd >= 0);
    DirectBlock b;
    std::memset(b.p, 7, 4096);
    for (int i = 0; i < 300; i++) REQUIRE(pwrite(fd, b.p, 4096, off_t(i % 64) * 4096) == 4096);
    for (int i = 0; i < 300; i++) REQUIRE(pread(fd, b.p, 4096, off_t(i % 64) * 4096) == 4096);
    close(fd);
    stats = stats_of(s.mnt);
  }
  hog = false;
  for (std::thread& t : hogs) t.join();
  CHECK(stats.find("\"ring_sched\":\"idle\"") != std::string::npos);
  CHECK(stat_number(stats, "guard_boosts") >= 1);
  unmount(s.mnt, pid);
}

TEST_CASE("fuse: each transport carries the I/O it is asked for, and mmap works on an O_DIRECT file") {
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(64 << 20);
  for (const std::string& transport : fuse_transports()) {
    CAPTURE(transport);
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=" + transport);
    const std::string data = pattern(1 << 20, transport == "on" ? 7 : 8);
    {
      const int fd = open((s.mnt + "/d").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
      REQUIRE(fd >= 0);
      void* buf = nullptr;
      REQUIRE(posix_memalign(&buf, 4096, data.size()) == 0);
      std::memcpy(buf, data.data(), data.size());
      REQUIRE(pwrite(fd, buf, data.size(), 0) == ssize_t(data.size()));
      std::memset(buf, 0, data.size());
      REQUIRE(pread(fd, buf, data.size(), 0) == ssize_t(data.size()));
      CHECK(std::memcmp(buf, data.data(), data.size()) == 0);
      free(buf);
      // ext4 maps a file opened O_DIRECT; FUSE does once the server offers
      // FUSE_DIRECT_IO_ALLOW_MMAP (else ENODEV).
      void* map = mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, fd, 0);
      REQUIRE_MESSAGE(map != MAP_FAILED, strerror(errno));
      CHECK(std::memcmp(map, data.data(), data.size()) == 0);
      munmap(map, data.size());
      close(fd);
    }
    const std::string stats = stats_of(s.mnt);
    CHECK(stats.find("\"requested\":\"" + transport + "\"") != std::string::npos);
    CHECK(stats.find(transport == "on" ? "\"transport\":\"io_uring\"" : "\"transport\":\"/dev/fuse\"") != std::string::npos);
    // The emulated namespace runs its commands inline where the image is in memory
    // (BIOFS_SCRATCH_DIR=/dev/shm), through io_uring on a disk.
    struct statfs sfs;
    REQUIRE(statfs(s.dir.c_str(), &sfs) == 0);
    const bool in_memory = sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
    CHECK((stats.find("\"inline\":true") != std::string::npos) == in_memory);
    CHECK(stats.find("\"inline_flush\":true") != std::string::npos);  // flushes run inline on any file
    if (in_memory) CHECK(stat_number(stats, "inline_commands") >= 2);
    else CHECK(stat_number(stats, "inline_commands") == 0);
    unmount(s.mnt, pid);
  }
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

namespace {

// The scheduling policy of each of the daemon's threads, by thread name (fuse-ring-0, ...).
std::vector<std::pair<std::string, int>> thread_policies(pid_t pid) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::string comm;
    std::getline(std::ifstream(t.path() / "comm"), comm);
    out.emplace_back(comm, sched_getscheduler(pid_t(std::stol(t.path().filename()))));
  }
  return out;
}

long rings_in(const std::vector<std::pair<std::string, int>>& policies, int ring_policy) {
  long n = 0;
  for (const auto& [name, policy] : policies) n += name.rfind("fuse-ring-", 0) == 0 && policy == ring_policy;
  return n;
}

// The daemon's thread policies once all `rings` ring threads are in `ring_policy`, or after 10 s.
// Reads /proc only: touching the mount would wake a ring.
std::vector<std::pair<std::string, int>> settled_policies(pid_t pid, int ring_policy, long rings) {
  std::vector<std::pair<std::string, int>> policies = thread_policies(pid);
  for (int i = 0; i < 200 && rings_in(policies, ring_policy) != rings; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    policies = thread_policies(pid);
  }
  return policies;
}

}  // namespace

TEST_CASE("fuse: fuse_uring_sched=idle puts the ring threads, and only them, in SCHED_IDLE, and requests still complete with every CPU busy") {
  if (!have_fuse() || !fuse_uring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, FUSE-over-io_uring and root");
    return;
  }
  FuseScratch s(64 << 20);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (const std::string sched : {"normal", "idle"}) {
    CAPTURE(sched);
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_sched=" + sched);
    // Two moments may show a ring thread outside its class: a ring thread names itself before
    // it sets its class (libfuse's fuse_uring_thread), and the mount can be up before every
    // ring thread has started; and work on the other CPUs (ctest -j runs tests side by side)
    // can starve a SCHED_IDLE ring thread, which the guard moves to SCHED_OTHER and back once
    // it has been calm for ten periods. The daemon is quiet now: wait until every ring thread
    // is in its class.
    const int ring_policy = sched == "idle" ? SCHED_IDLE : SCHED_OTHER;
    const std::vector<std::pair<std::string, int>> policies = settled_policies(pid, ring_policy, cpus);
    int rings = 0;
    for (const auto& [name, policy] : policies) {
      CAPTURE(name);
      const bool ring = name.rfind("fuse-ring-", 0) == 0;
      rings += ring;
      CHECK(policy == (ring ? ring_policy : SCHED_OTHER));
    }
    CHECK(rings == cpus);  // libfuse: one ring queue and thread per CPU
    CHECK(stats_of(s.mnt).find("\"ring_sched\":\"" + sched + "\"") != std::string::npos);
    // A SCHED_IDLE thread runs only when its CPU has nothing else to run: with a busy loop
    // on every CPU the ring threads are starved to the scheduler's minimum share, and every
    // request must still be answered (slowly), nothing lost.
    std::atomic<bool> stop{false};
    std::vector<std::thread> hogs;
    for (long c = 0; c < cpus; c++)
      hogs.emplace_back([&stop, c] {
        pin_to_cpu(int(c));
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
    const std::string dir = s.mnt + "/busy-" + sched;
    REQUIRE(mkdir(dir.c_str(), 0755) == 0);
    for (int i = 0; i < 50; i++) write_file(dir + "/f" + std::to_string(i), "file " + std::to_string(i));
    stop = true;
    for (std::thread& t : hogs) t.join();
    for (int i = 0; i < 50; i++) CHECK(read_file(dir + "/f" + std::to_string(i)) == "file " + std::to_string(i));
    unmount(s.mnt, pid);
  }
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse: fuse_uring_sched=auto runs a waiting ring in SCHED_OTHER while reads are in flight, SCHED_IDLE again after, and idle does not") {
  // Device completions are task work of the ring thread that submitted them (daemon/ring_guard.h):
  // with fio's queue of reads in flight and the ring waiting behind fio on its CPU, auto moves
  // the ring to SCHED_OTHER; once the reads have ended it returns to SCHED_IDLE. The image's
  // commands go through the emulated queue's io_uring (inline=off), as on a disk.
  if (!have_fuse() || !fuse_uring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, FUSE-over-io_uring and root");
    return;
  }
  std::string out;
  REQUIRE_MESSAGE(run("fio --version", &out) == 0, "fio is missing (tools/install-deps.sh installs it): " << out);
  FuseScratch s(96 << 20);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (const std::string sched : {"auto", "idle"}) {
    CAPTURE(sched);
    const pid_t pid = mount_fg("emu:" + s.img + ",inline=off", s.mnt, "fuse_uring=on,fuse_uring_sched=" + sched);
    const std::string fio = "taskset -c 0 fio --name=q --filename=" + s.mnt + "/f --size=32M --bs=4k --direct=1 "
                            "--ioengine=io_uring --iodepth=32 --rw=randread --runtime=2 --time_based --output=/dev/null";
    // Quiet: every ring returns to SCHED_IDLE (ten calm periods; a test beside this one may
    // keep a ring starved for a while).
    auto all_rings_idle = [&] { return rings_in(settled_policies(pid, SCHED_IDLE, cpus), SCHED_IDLE) == cpus; };
    // A round may show starvation instead (a test beside this one filling CPU 0 moves the ring
    // for that reason first, and a starved ring is not moved again for I/O): up to three
    // rounds, each from idle rings.
    long long io_boosts = 0;
    for (int round = 0; round < (sched == "auto" ? 3 : 1) && io_boosts == 0; round++) {
      CHECK(all_rings_idle());
      REQUIRE_MESSAGE(run(fio, &out) == 0, out);
      io_boosts = stat_number(stats_of(s.mnt), "guard_io_boosts");
    }
    if (sched == "auto") CHECK(io_boosts >= 1);
    else CHECK(io_boosts == 0);  // idle: the guard looks at starvation only
    CHECK(all_rings_idle());
    unmount(s.mnt, pid);
  }
}

TEST_CASE("fuse: unlinked files give their inodes and blocks back once the kernel forgets them, on both transports") {
  // The space of an unlinked inode is freed at its last FORGET; over io_uring the daemon
  // pauses between forgets so that they arrive as batches (fuse_ops.cc, gather_forgets).
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(64 << 20);
  for (const std::string& transport : fuse_transports()) {
    CAPTURE(transport);
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=" + transport);
    // The root directory's first entry gives it a block, which it keeps (as ext4's directories
    // never shrink): take it before counting.
    write_file(s.mnt + "/first-" + transport, "");
    struct statvfs before {}, now {};
    REQUIRE(statvfs(s.mnt.c_str(), &before) == 0);
    const std::string dir = s.mnt + "/t-" + transport;
    REQUIRE(mkdir(dir.c_str(), 0755) == 0);
    for (int i = 0; i < 300; i++) write_file(dir + "/f" + std::to_string(i), std::string(8192, char('a' + i % 26)));
    REQUIRE(statvfs(s.mnt.c_str(), &now) == 0);
    REQUIRE(now.f_ffree + 301 == before.f_ffree);  // the files and their directory
    for (int i = 0; i < 300; i++) REQUIRE(unlink((dir + "/f" + std::to_string(i)).c_str()) == 0);
    REQUIRE(rmdir(dir.c_str()) == 0);
    // Forgets are asynchronous: wait for them (bounded, so a lost one fails instead of hanging).
    for (int i = 0; i < 200; i++) {
      REQUIRE(statvfs(s.mnt.c_str(), &now) == 0);
      if (now.f_ffree == before.f_ffree && now.f_bfree == before.f_bfree) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(now.f_ffree == before.f_ffree);
    CHECK(now.f_bfree == before.f_bfree);
    unmount(s.mnt, pid);
  }
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse: small direct reads and writes run to completion on poll queues, poll_queues=0 turns it off") {
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(64 << 20);
  for (const std::string opts : {"", "poll_queues=0"}) {
    CAPTURE(opts);
    const pid_t pid = mount_fg(s.img, s.mnt, opts);
    const int fd = open((s.mnt + "/p").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
    REQUIRE(fd >= 0);
    void* buf = nullptr;
    REQUIRE(posix_memalign(&buf, 4096, 4096) == 0);
    const int ops = 64;
    for (int i = 0; i < ops; i++) {  // one at a time: a worker is always free to receive
      std::memset(buf, i, 4096);
      REQUIRE(pwrite(fd, buf, 4096, off_t(i) * 4096) == 4096);
    }
    int bad = 0;
    for (int i = ops - 1; i >= 0; i--) {
      REQUIRE(pread(fd, buf, 4096, off_t(i) * 4096) == 4096);
      bad += static_cast<uint8_t*>(buf)[0] != uint8_t(i) || static_cast<uint8_t*>(buf)[4095] != uint8_t(i);
    }
    CHECK(bad == 0);
    // Overwrites of the now allocated blocks take the fast path, from the request's buffer.
    for (int i = 0; i < ops; i++) {
      std::memset(buf, 0x80 + i, 4096);
      REQUIRE(pwrite(fd, buf, 4096, off_t(i) * 4096) == 4096);
    }
    for (int i = 0; i < ops; i++) {
      REQUIRE(pread(fd, buf, 4096, off_t(i) * 4096) == 4096);
      bad += static_cast<uint8_t*>(buf)[0] != uint8_t(0x80 + i) || static_cast<uint8_t*>(buf)[4095] != uint8_t(0x80 + i);
    }
    CHECK(bad == 0);
    free(buf);
    close(fd);
    const std::string stats = stats_of(s.mnt);
    const bool ring = stats.find("\"transport\":\"io_uring\"") != std::string::npos;
    if (opts.empty()) {
      CHECK(stat_number(stats, "poll_queues") > 0);
      // Each request found a worker free: every one ran to completion in its worker.
      CHECK(stat_number(stats, "polled") >= 4 * ops);
      // A polled write's buffer stays put until it has ended: no copy, on either transport.
      CHECK(stat_number(stats, "fs_write_copies") == 0);
    } else {
      CHECK(stat_number(stats, "poll_queues") == 0);
      CHECK(stat_number(stats, "polled") == 0);
      // /dev/fuse: the worker's buffer is reused once the handler returns, so an overwrite that
      // completes later was copied; the ring's payload buffer stays the request's until the reply.
      if (ring) CHECK(stat_number(stats, "fs_write_copies") == 0);
      else CHECK(stat_number(stats, "fs_write_copies") >= ops);
    }
    unmount(s.mnt, pid);
  }
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse: over io_uring, an I/O runs to completion in its ring thread when nothing waits behind it, never when something does, and then the completion thread replies") {
  if (!have_fuse() || !fuse_uring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, FUSE-over-io_uring and root");
    return;
  }
  FuseScratch s(64 << 20);
  void* buf = nullptr;
  REQUIRE(posix_memalign(&buf, 4096, 4096) == 0);
  const int ops = 256;
  for (const std::string sched : {"normal", "idle"}) {
    CAPTURE(sched);
    // One at a time: each request is alone in its ring, so each is polled and answered by its
    // ring thread (fuse_req_uring_waiting() is 0), none by another thread.
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_sched=" + sched);
    const int fd = open((s.mnt + "/q-" + sched).c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
    REQUIRE(fd >= 0);
    for (int i = 0; i < ops; i++) {  // allocating writes: not all of them take the polled path
      std::memset(buf, i, 4096);
      REQUIRE(pwrite(fd, buf, 4096, off_t(i) * 4096) == 4096);
    }
    const std::string before = stats_of(s.mnt);
    int bad = 0;
    for (int i = 0; i < ops; i++) {
      REQUIRE(pread(fd, buf, 4096, off_t(i) * 4096) == 4096);
      bad += static_cast<uint8_t*>(buf)[0] != uint8_t(i) || static_cast<uint8_t*>(buf)[4095] != uint8_t(i);
      std::memset(buf, 0x80 + i, 4096);
      REQUIRE(pwrite(fd, buf, 4096, off_t(i) * 4096) == 4096);  // an overwrite
    }
    const std::string after = stats_of(s.mnt);
    CHECK(bad == 0);
    CHECK(stat_number(after, "polled") - stat_number(before, "polled") == 2 * ops);
    CHECK(stat_number(after, "replies_elsewhere") == stat_number(before, "replies_elsewhere"));
    close(fd);
    unmount(s.mnt, pid);
  }
  // Many at once into one ring (every reader on CPU 0), each device command held 50 ms: the
  // ring thread may poll the first, which holds up the ring while it waits; then the others
  // are waiting behind, and none is polled. Handled as one batch, their bios share a plug
  // (fuse_uring_plug=on): fewer plug flushes than requests, against one each without it.
  for (const std::string plug : {"on", "off"}) {
    CAPTURE(plug);
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_plug=" + plug, "delay=1,delay_us=50000,seed=5");
    const int readers = 12;
    std::atomic<int> opened{0}, bad{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < readers; t++)
      threads.emplace_back([&, t] {
        pin_to_cpu(0);
        DirectBlock b;
        if (!b.p) return (void)bad++;
        const int fd = open((s.mnt + "/q-idle").c_str(), O_RDONLY | O_DIRECT);
        opened++;
        while (!go.load()) std::this_thread::yield();
        if (fd < 0 || pread(fd, b.p, 4096, off_t(t) * 4096) != 4096 || b.p[0] != uint8_t(0x80 + t)) bad++;
        if (fd >= 0) close(fd);
      });
    while (opened.load() < readers) std::this_thread::yield();
    const std::string before = stats_of(s.mnt);
    go = true;
    for (std::thread& t : threads) t.join();
    const std::string after = stats_of(s.mnt);
    CHECK(bad == 0);
    const long long polled = stat_number(after, "polled") - stat_number(before, "polled");
    CHECK(polled <= 1);
    // The rest completed on the completion thread, which answered them itself.
    CHECK(stat_number(after, "replies_elsewhere") - stat_number(before, "replies_elsewhere") == readers - polled);
    const long long requests = stat_number(after, "requests") - stat_number(before, "requests");
    const long long flushes = stat_number(after, "plug_flushes") - stat_number(before, "plug_flushes");
    MESSAGE("plug " << plug << ": " << requests << " requests in " << flushes << " plug flushes");
    CHECK(requests == readers);
    if (plug == "on") CHECK(flushes < requests);
    else CHECK(flushes == requests);
    unmount(s.mnt, pid);
  }
  free(buf);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// The hazard that libfuse patch 0005 removes: a ring thread runs a handler with its queue's
// lock held, here a hole punch that waits until no direct I/O is in flight on the file
// (inode_dio_wait), while the reads in flight complete on the completion thread, which ends
// each read's I/O count and replies in turn. A reply that waited for the ring's lock would
// stop the completion thread before the later reads' counts end, and the punch would wait for
// ever. The replies go out with the ring thread's batch instead.
TEST_CASE("fuse: over io_uring, the completion thread's replies never wait for a ring thread that waits for their I/O") {
  if (!have_fuse() || !fuse_uring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, FUSE-over-io_uring and root");
    return;
  }
  FuseScratch s(64 << 20);
  const int readers = 12, blocks = 64;
  {
    std::string data;
    for (int b = 0; b < blocks; b++) data += std::string(4096, char('a' + b % 26));
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on");
    write_file(s.mnt + "/f", data, true);
    unmount(s.mnt, pid);
  }
  // Every command's completion held back 50 ms: the reads are still in flight when the punch
  // comes, and complete together. Everything on CPU 0, so everything goes through one ring.
  const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on", "delay=1,delay_us=50000,seed=9");
  std::atomic<int> started{0}, finished{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < readers; t++)
    threads.emplace_back([&, t] {
      pin_to_cpu(0);
      DirectBlock b;
      if (!b.p) return (void)bad++;
      const int fd = open((s.mnt + "/f").c_str(), O_RDONLY | O_DIRECT);
      started++;
      if (fd < 0 || pread(fd, b.p, 4096, off_t(t) * 4096) != 4096 || char(b.p[100]) != char('a' + t % 26)) bad++;
      if (fd >= 0) close(fd);
      finished++;
    });
  int punch_err = -1;
  threads.emplace_back([&] {
    pin_to_cpu(0);
    while (started.load() < readers) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the reads are in the ring by now
    const int fd = open((s.mnt + "/f").c_str(), O_RDWR);
    punch_err = fd < 0 ? errno
                       : fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(blocks - 8) * 4096, 8 * 4096)
                             ? errno
                             : 0;
    if (fd >= 0) close(fd);
    finished++;
  });
  const bool hung = !wait_for_count(finished, readers + 1, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  if (hung) kill(pid, SIGKILL);  // the aborted connection ends the waiting calls
  for (std::thread& t : threads) t.join();
  REQUIRE_MESSAGE(!hung, "reads and a hole punch through one ring still waiting after 30 s");
  CHECK(bad == 0);
  CHECK(punch_err == 0);
  CHECK(read_file(s.mnt + "/f").substr(size_t(blocks - 8) * 4096) == std::string(8 * 4096, '\0'));
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// fuse_uring_plug (daemon/README.md, "Plugging across a ring batch"): a ring thread keeps its
// plug from one read or write to the next while requests wait in its ring. Everything through
// one ring (all on CPU 0), direct reads and writes from many threads beside hole punches,
// truncates and fsyncs that block on the filesystem's lock or on the I/O in flight: nothing
// may wait for bios that sit in a plug, and every block reads back what was written last.
TEST_CASE("fuse: over io_uring, reads and writes plugged across a ring batch beside punches, truncates and fsyncs") {
  if (!have_fuse() || !fuse_uring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, FUSE-over-io_uring and root");
    return;
  }
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on", "delay=0.3,delay_us=2000,seed=11");
  const int writers = 8, blocks_each = 8, rounds = 60;
  const std::string f = s.mnt + "/f", g = s.mnt + "/g";
  write_file(f, std::string(size_t(writers * blocks_each + 16) * 4096, 'x'), true);
  std::atomic<int> finished{0}, bad{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < writers; t++)
    threads.emplace_back([&, t] {
      pin_to_cpu(0);
      DirectBlock b;
      if (!b.p) return (void)bad++;
      uint8_t* p = b.p;
      const int fd = open(f.c_str(), O_RDWR | O_DIRECT);
      if (fd < 0) bad++;
      for (int r = 0; fd >= 0 && r < rounds; r++)
        for (int k = 0; k < blocks_each; k++) {
          const off_t off = off_t(t * blocks_each + k) * 4096;
          std::memset(p, (t * 31 + r * 7 + k) & 0xff, 4096);
          if (pwrite(fd, p, 4096, off) != 4096) bad++;
          std::memset(p, 0, 4096);
          if (pread(fd, p, 4096, off) != 4096 || p[0] != ((t * 31 + r * 7 + k) & 0xff) || p[4095] != p[0]) bad++;
        }
      if (fd >= 0) close(fd);
      finished++;
    });
  int meta_errors = 0;
  threads.emplace_back([&] {
    pin_to_cpu(0);
    const int fd = open(f.c_str(), O_RDWR), gd = open(g.c_str(), O_CREAT | O_RDWR, 0644);
    for (int i = 0; !stop.load() && fd >= 0 && gd >= 0; i++) {
      const off_t tail = off_t(writers * blocks_each) * 4096;  // beyond every writer's blocks
      meta_errors += fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, tail + (i % 8) * 4096, 4096) != 0;
      meta_errors += ftruncate(gd, off_t(i % 5) * 8192) != 0;
      meta_errors += fsync(fd) != 0;
    }
    meta_errors += fd < 0 || gd < 0;
    if (fd >= 0) close(fd);
    if (gd >= 0) close(gd);
    finished++;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  wait_for_count(finished, writers, deadline);
  stop = true;
  const bool hung = !wait_for_count(finished, writers + 1, deadline);
  if (hung) kill(pid, SIGKILL);  // the aborted connection ends the waiting calls
  for (std::thread& t : threads) t.join();
  REQUIRE_MESSAGE(!hung, "I/O through one ring still waiting after 120 s");
  CHECK(bad == 0);
  CHECK(meta_errors == 0);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse: ram:SIZE mounts a filesystem in memory, formatted at mount, mkfs and fsck refuse it") {
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(1 << 20);  // its image is not used: the mount point is
  std::string out;
  CHECK(run(kBin + "/mkfs.biofs ram:64M", &out) == 1);
  CHECK(out.find("a RAM disk lives only inside the daemon") != std::string::npos);
  CHECK(run(kBin + "/fsck.biofs -n ram:64M", &out) == 8);
  pid_t pid = mount_fg("ram:64M", s.mnt, "");
  const std::string data = pattern(3 << 20, 11);
  write_file(s.mnt + "/f", data, true);
  stdfs::create_directory(s.mnt + "/d");
  CHECK(read_file(s.mnt + "/f") == data);
  struct statvfs sv;
  REQUIRE(statvfs(s.mnt.c_str(), &sv) == 0);
  CHECK(uint64_t(sv.f_blocks) * sv.f_frsize <= (64u << 20));
  unmount(s.mnt, pid);
  // Gone with the daemon, as tmpfs: the next mount starts empty.
  pid = mount_fg("ram:64M", s.mnt, "");
  CHECK_FALSE(stdfs::exists(s.mnt + "/f"));
  unmount(s.mnt, pid);
}

// The kernel sends no fsync after an O_DSYNC direct write: the daemon makes the write durable
// before it answers. An overwrite goes out with FUA and needs no flush; RWF_DSYNC on one
// write does the same; a plain direct write is neither FUA nor flushed. A buffered O_DSYNC
// write is followed by the kernel's fsync: one flush each, no FUA.
TEST_CASE("fuse: O_DSYNC, O_SYNC and RWF_DSYNC direct overwrites reach the device as FUA writes, without a flush") {
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(64 << 20);
  // A volatile write cache: without one, the block layer drops FUA as the kernel does.
  const pid_t pid = mount_fg("emu:" + s.img + ",vwc", s.mnt, "commit=0");
  const std::string path = s.mnt + "/d";
  write_file(path, pattern(16 * 4096, 3), true);  // allocated and durable
  void* buf = nullptr;
  REQUIRE(posix_memalign(&buf, 4096, 4096) == 0);
  std::memset(buf, 0x5a, 4096);
  const int n = 8;
  struct Case {
    const char* name;
    int open_flags;
    int rwf;
    bool durable;
  };
  for (const Case c : {Case{"plain", O_DIRECT, 0, false}, Case{"O_DSYNC", O_DIRECT | O_DSYNC, 0, true},
                       Case{"O_SYNC", O_DIRECT | O_SYNC, 0, true}, Case{"RWF_DSYNC", O_DIRECT, RWF_DSYNC, true},
                       Case{"buffered O_DSYNC", O_DSYNC, 0, false}}) {
    CAPTURE(c.name);
    const int fd = open(path.c_str(), O_WRONLY | c.open_flags);
    REQUIRE(fd >= 0);
    const std::string before = stats_of(s.mnt);
    for (int i = 0; i < n; i++) {
      iovec v{buf, 4096};
      REQUIRE(pwritev2(fd, &v, 1, off_t(i) * 4096, c.rwf) == 4096);
    }
    const std::string after = stats_of(s.mnt);
    close(fd);
    const long long fua = stat_number(after, "fua_writes") - stat_number(before, "fua_writes");
    const long long flushes = stat_number(after, "flushes") - stat_number(before, "flushes");
    if (c.open_flags & O_SYNC & ~O_DSYNC) {
      // O_SYNC also makes the times durable: a write in a new clock tick commits them (the
      // commit block is itself a PREFLUSH+FUA write).
      CHECK(fua >= n);
    } else if (!(c.open_flags & O_DIRECT)) {
      CHECK(fua == 0);
      CHECK(flushes == n);
    } else {
      CHECK(fua == (c.durable ? n : 0));
      CHECK(flushes == 0);
    }
  }
  free(buf);
  unmount(s.mnt, pid);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

namespace {

// A number inside the stats' object `object` ("io", "write_cache"), by key; -1 if absent.
long long stat_in(const std::string& stats, const std::string& object, const std::string& key) {
  const size_t at = stats.find("\"" + object + "\":{");
  if (at == std::string::npos) return -1;
  const std::string inner = stats.substr(at, stats.find('}', at) - at);
  return stat_number(inner, key);
}

}  // namespace

TEST_CASE("fuse: tar -x into a new directory on emu:IMG,vwc waits on no host write (the tar cliff)") {
  // The cause of the cliff: through FUSE without the kernel's write-back cache every write(2)
  // waits for the device, and each device write was a host O_DIRECT write, so tar paid the host
  // disk's latency about four times per file. A device with a volatile cache answers from it.
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(256 << 20);
  struct statfs sfs;
  REQUIRE(statfs(s.dir.c_str(), &sfs) == 0);
  if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC) {
    MESSAGE("skipped: the image is in memory, where the emulated namespace runs every command inline and "
            "keeps no write cache (nvme/emu_ns.h); the cliff is a disk's");
    return;
  }
  // A tree as tar meets it: 240 files of 1-40 KiB (tar writes 10 KiB records, so most writes
  // start inside a block) in 8 directories.
  const std::string src = s.dir + "/src", tarball = s.dir + "/src.tar";
  int files = 0;
  for (int d = 0; d < 8; d++) {
    const std::string dir = src + "/d" + std::to_string(d);
    stdfs::create_directories(dir);
    for (int f = 0; f < 30; f++, files++) write_file(dir + "/f" + std::to_string(f), pattern(1024 * (1 + (f * 7 + d) % 40), files));
  }
  std::string out;
  REQUIRE_MESSAGE(run("tar -C " + src + " -cf " + tarball + " .", &out) == 0, out);

  const std::string dev = "emu:" + s.img + ",vwc";
  pid_t pid = mount_fg(dev, s.mnt, "");
  REQUIRE(mkdir((s.mnt + "/new").c_str(), 0755) == 0);
  const std::string before = stats_of(s.mnt);
  REQUIRE_MESSAGE(run("tar -C " + s.mnt + "/new -xf " + tarball, &out) == 0, out);
  const std::string after = stats_of(s.mnt);
  const long long writes = stat_in(after, "io", "writes") - stat_in(before, "io", "writes");
  const long long cached = stat_in(after, "write_cache", "writes") - stat_in(before, "write_cache", "writes");
  INFO("device writes " << writes << ", answered from the write cache " << cached << ", files " << files);
  CHECK(writes >= files);                   // every file's data went to the device
  CHECK(writes - cached <= files / 10);     // and almost none of them waited for the host
  CHECK_MESSAGE(run("diff -r " + src + " " + s.mnt + "/new", &out) == 0, out);
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  // What the cache held is on the image after the unmount.
  pid = mount_fg(dev, s.mnt, "");
  CHECK_MESSAGE(run("diff -r " + src + " " + s.mnt + "/new", &out) == 0, out);
  unmount(s.mnt, pid);
}
