// How the daemon's FUSE ring threads are scheduled, through a real mount: SCHED_IDLE rings, the
// ring guard that moves them back (starved, or waiting while I/O is in flight), and the choice
// to run an I/O to completion in its ring thread when nothing waits behind it. What these tests
// look at is what else runs on the CPUs, so they run alone (RUN_SERIAL, tests/fs/CMakeLists.txt).
#include <doctest/doctest.h>

#include "fuse_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace biofs::test;

namespace {

// The scheduling policy of each of the daemon's threads, by thread name (fuse-reactor-0, ...).
std::vector<std::pair<std::string, int>> thread_policies(pid_t pid) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::string comm;
    std::getline(std::ifstream(t.path() / "comm"), comm);
    out.emplace_back(comm, sched_getscheduler(pid_t(std::stol(t.path().filename()))));
  }
  return out;
}

long rings_in(const std::vector<std::pair<std::string, int>>& policies, int ring_policy,
              const std::string& prefix = "fuse-reactor-") {
  long n = 0;
  for (const auto& [name, policy] : policies) n += name.rfind(prefix, 0) == 0 && policy == ring_policy;
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

// With a CPU-bound thread pinned to every CPU, `ios` direct 4 KiB writes then reads of `path`
// (each must complete); returns the mount's stats read before the busy threads stop.
std::string direct_io_with_every_cpu_busy(const std::string& mnt, const std::string& path, int ios) {
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
    const int fd = open(path.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
    REQUIRE(fd >= 0);
    DirectBlock b;
    std::memset(b.p, 7, 4096);
    for (int i = 0; i < ios; i++) REQUIRE(pwrite(fd, b.p, 4096, off_t(i % 64) * 4096) == 4096);
    for (int i = 0; i < ios; i++) REQUIRE(pread(fd, b.p, 4096, off_t(i % 64) * 4096) == 4096);
    close(fd);
    stats = stats_of(mnt);
  }
  hog = false;
  for (std::thread& t : hogs) t.join();
  return stats;
}

}  // namespace


TEST_CASE("fuse: a mount that names no transport takes the reactor where the kernel has FUSE-over-io_uring, its threads in SCHED_IDLE as root") {
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
  CHECK(stats.find(kernel_uring_possible() ? "\"transport\":\"reactor\"" : "\"transport\":\"/dev/fuse\"") !=
        std::string::npos);
  // As root the reactor threads run in SCHED_IDLE under the guard (fuse_uring_sched=auto).
  CHECK(stats.find(kernel_uring_possible() ? "\"ring_sched\":\"idle\"" : "\"ring_sched\":\"normal\"") != std::string::npos);
  REQUIRE(run("fusermount3 -u " + s.mnt, &out) == 0);
}

TEST_CASE("fuse: fuse_uring_sched=auto runs a waiting ring in SCHED_OTHER while reads are in flight, SCHED_IDLE again after, and idle does not") {
  // Device completions are task work of the ring thread that submitted them (daemon/ring_guard.h):
  // with fio's queue of reads in flight and the ring waiting behind fio on its CPU, auto moves
  // the ring to SCHED_OTHER; once the reads have ended it returns to SCHED_IDLE. The image's
  // commands go through the emulated queue's io_uring (inline=off), as on a disk.
  if (!have_fuse() || !kernel_uring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, FUSE-over-io_uring and root");
    return;
  }
  std::string out;
  REQUIRE_MESSAGE(run("fio --version", &out) == 0, "fio is missing (tools/install-deps.sh installs it): " << out);
  FuseScratch s(96 << 20);
  // On an image in memory (BIOFS_SCRATCH_DIR=/dev/shm) the host completes each read as it is
  // submitted, so no read is ever in flight behind the ring: the disk run covers this.
  struct statfs sfs;
  REQUIRE(statfs(s.dir.c_str(), &sfs) == 0);
  if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC) {
    MESSAGE("skipped: the image is in memory, where no device read stays in flight");
    return;
  }
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);  // a reactor per possible CPU
  for (const std::string sched : {"auto", "idle"}) {
    CAPTURE(sched);
    const pid_t pid = mount_fg("emu:" + s.img + ",inline=off", s.mnt, "fuse_uring=on,fuse_uring_sched=" + sched);
    const std::string fio = "taskset -c 0 fio --name=q --filename=" + s.mnt + "/f --size=32M --bs=4k --direct=1 "
                            "--ioengine=io_uring --iodepth=32 --rw=randread --runtime=2 --time_based --output=/dev/null";
    // Quiet: every ring returns to SCHED_IDLE (ten calm periods).
    auto all_rings_idle = [&] { return rings_in(settled_policies(pid, SCHED_IDLE, cpus), SCHED_IDLE) == cpus; };
    // A round may show starvation instead (other load on CPU 0 moves the ring for that reason
    // first, and a starved ring is not moved again for I/O): up to three rounds, each from idle
    // rings.
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
    const bool ring = stats.find("\"transport\":\"/dev/fuse\"") == std::string::npos;
    if (opts.empty()) {
      CHECK(stat_number(stats, "poll_queues") > 0);
      // Each request found a worker free: every one ran to completion in its worker.
      CHECK(stat_number(stats, "polled") >= 4 * ops);
      // A polled write's buffer stays put until it has ended: no copy, on either transport,
      // where it is page-aligned (libfuse >= 3.17.1 on /dev/fuse); otherwise every one is copied.
      if (ring || stat_flag(stats, "dev_payload_aligned")) CHECK(stat_number(stats, "fs_write_copies") == 0);
      else CHECK(stat_number(stats, "fs_write_copies") == ops);
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
  if (!have_fuse() || !kernel_uring_possible()) {
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
    // reactor thread (none waits behind it), none by another thread.
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
  // (fuse_uring_plug=on): fewer plug flushes than requests, against one each without it. The
  // readers' blocks are neighbours, so nomerges=2 keeps a request per read to count.
  for (const std::string plug : {"on", "off"}) {
    CAPTURE(plug);
    const pid_t pid =
        mount_fg(s.img, s.mnt, "fuse_uring=on,nomerges=2,fuse_uring_plug=" + plug, "delay=1,delay_us=50000,seed=5");
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

// A ring thread runs a handler, here a hole punch that waits until no direct I/O is in flight on
// the file (inode_dio_wait), while the reads in flight complete on the completion thread, which
// ends each read's I/O count and replies in turn. A reply that waited for the ring thread (as
// one into libfuse's ring waits for the queue's lock) would stop the completion thread before
// the later reads' counts end, and the punch would wait for ever. The reactor's replies are
// posted to the ring thread instead (fuse_reactor.h).
TEST_CASE("fuse: over io_uring, the completion thread's replies never wait for a ring thread that waits for their I/O") {
  if (!have_fuse() || !kernel_uring_possible()) {
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

// libfuse's own ring, stock (fuse_uring=libfuse): a reply from another thread is not safe there
// (daemon/fuse_ops.cc, HeldReply), so each read and write is answered by the ring thread that
// took it, whether it polled its I/O or the completion thread ended it (poll_queues=0), and
// however many requests wait in its ring: all on CPU 0, every command held 20 ms.
TEST_CASE("fuse: over libfuse's ring every read and write is answered by the ring thread that took it") {
  if (!have_fuse() || !libfuse_ring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, root, and FUSE-over-io_uring in the kernel and in this build's libfuse");
    return;
  }
  FuseScratch s(64 << 20);
  const int threads = 12;
  for (const std::string opts : {"", ",poll_queues=0"}) {
    CAPTURE(opts);
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=libfuse" + opts, "delay=1,delay_us=20000,seed=3");
    const std::string path = s.mnt + "/held" + std::to_string(opts.size());
    write_file(path, std::string(size_t(threads) * 4096, 'x'), true);
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
      ts.emplace_back([&, t] {
        pin_to_cpu(0);
        DirectBlock b;
        const int fd = open(path.c_str(), O_RDWR | O_DIRECT);
        if (!b.p || fd < 0) return (void)bad++;
        std::memset(b.p, 'a' + t, 4096);
        if (pwrite(fd, b.p, 4096, off_t(t) * 4096) != 4096) bad++;
        std::memset(b.p, 0, 4096);
        if (pread(fd, b.p, 4096, off_t(t) * 4096) != 4096 || b.p[0] != 'a' + t || b.p[4095] != 'a' + t) bad++;
        close(fd);
      });
    for (std::thread& t : ts) t.join();
    CHECK(bad == 0);
    const std::string stats = stats_of(s.mnt);
    CHECK(stats.find("\"transport\":\"libfuse ring\"") != std::string::npos);
    CHECK(stat_number(stats, "replies_elsewhere") == 0);
    if (opts.empty()) CHECK(stat_number(stats, "polled") >= 2 * threads);
    else CHECK(stat_number(stats, "polled") == 0);
    unmount(s.mnt, pid);
  }
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse reactor: fuse_uring_sched puts the reactor threads in SCHED_IDLE or not, and with every CPU busy the guard moves them back and the I/O goes on") {
  if (!have_fuse() || !kernel_uring_possible()) {
    MESSAGE("skipped: needs /dev/fuse, FUSE-over-io_uring and root");
    return;
  }
  FuseScratch s(64 << 20);
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (const std::string sched : {"normal", "idle"}) {
    CAPTURE(sched);
    const pid_t pid = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_sched=" + sched);
    write_file(s.mnt + "/f" + sched, "x");  // INIT is done: the reactor threads exist
    const int policy = sched == "idle" ? SCHED_IDLE : SCHED_OTHER;
    std::vector<std::pair<std::string, int>> policies = thread_policies(pid);
    for (int i = 0; i < 200 && rings_in(policies, policy, "fuse-reactor-") != cpus; i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      policies = thread_policies(pid);
    }
    CHECK(rings_in(policies, policy, "fuse-reactor-") == cpus);  // one per CPU, all in the class asked for
    // Nothing else in SCHED_IDLE; an io_uring worker of a reactor's ring (iou-wrk-N, which the
    // kernel starts for a command it could not complete at once) is the reactor's own and has
    // its class.
    std::string others_idle;
    for (const auto& [name, p] : policies)
      if (name.rfind("fuse-reactor-", 0) != 0 && name.rfind("iou-wrk-", 0) != 0 && p == SCHED_IDLE)
        others_idle += name + " ";
    CHECK_MESSAGE(others_idle.empty(), others_idle);
    // CPU-bound threads on every CPU: an idle-class reactor gets no CPU until the guard moves it.
    const std::string stats = direct_io_with_every_cpu_busy(s.mnt, s.mnt + "/d" + sched, 200);
    CHECK(stats.find("\"transport\":\"reactor\"") != std::string::npos);
    CHECK(stats.find("\"ring_sched\":\"" + sched + "\"") != std::string::npos);
    if (sched == "idle") CHECK(stat_number(stats, "guard_boosts") >= 1);
    else CHECK(stat_number(stats, "guard_boosts") == 0);
    unmount(s.mnt, pid);
  }
}
