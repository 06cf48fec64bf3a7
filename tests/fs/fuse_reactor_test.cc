// biofs's own FUSE-over-io_uring server side (fuse_uring=on, daemon/fuse_reactor.h), through
// a real mount: a storm of requests from many processes and threads on every CPU, with a queue
// depth that keeps requests waiting in the kernel, loses no reply and hangs nothing; replies
// made on another thread reach the ring through the reactor's post. (The POSIX, fio, lifecycle,
// xattr and crash suites run over the reactor too: their `.reactor` copies.)
#include <doctest/doctest.h>

#include "fuse_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace biofs::test;

namespace {

bool reactor_possible() {
  if (have_fuse() && kernel_uring_possible()) return true;
  MESSAGE("skipped: needs /dev/fuse, root and a kernel with FUSE-over-io_uring");
  return false;
}

// One thread's share of the storm, in a directory of its own: creates, direct writes and reads
// (each read checks what the thread wrote), stats, renames, unlinks. Returns the mismatches
// and failed calls.
int storm_thread(const std::string& dir, int seed, int rounds) {
  int bad = 0;
  DirectBlock blk;
  if (!blk.p || mkdir(dir.c_str(), 0755) != 0) return 1;
  for (int r = 0; r < rounds; r++) {
    const std::string f = dir + "/f" + std::to_string(r % 4);
    const int fd = open(f.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
    if (fd < 0) { bad++; continue; }
    for (int b = 0; b < 8; b++) {
      std::memset(blk.p, (seed * 131 + r * 7 + b) & 0xff, 4096);
      bad += pwrite(fd, blk.p, 4096, off_t(b) * 4096) != 4096;
    }
    for (int b = 7; b >= 0; b--) {
      std::memset(blk.p, 0, 4096);
      bad += pread(fd, blk.p, 4096, off_t(b) * 4096) != 4096;
      const uint8_t want = uint8_t((seed * 131 + r * 7 + b) & 0xff);
      bad += blk.p[0] != want || blk.p[4095] != want;
    }
    bad += close(fd) != 0;
    struct stat st;
    bad += stat(f.c_str(), &st) != 0 || st.st_size != 8 * 4096;
    const std::string g = f + ".moved";
    bad += rename(f.c_str(), g.c_str()) != 0;
    if (r % 3 == 0) bad += unlink(g.c_str()) != 0;
    else bad += rename(g.c_str(), f.c_str()) != 0;
  }
  return bad;
}

}  // namespace

TEST_CASE("fuse reactor: a storm from many processes and threads on every CPU, four entries per queue, loses no reply and hangs nothing") {
  if (!reactor_possible()) return;
  FuseScratch s(256 << 20);
  const pid_t daemon = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_qd=4");
  const int cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
  constexpr int kProcs = 4, kThreads = 6, kRounds = 40;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; p++) {
    const pid_t kid = fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
      alarm(240);  // a lost reply hangs a call: the child dies of SIGALRM instead of the test
      std::vector<std::thread> threads;
      std::vector<int> bad(kThreads, 0);
      for (int t = 0; t < kThreads; t++)
        threads.emplace_back([&, t] {
          pin_to_cpu((p * kThreads + t) % cpus);  // every CPU's queue gets requests
          bad[t] = storm_thread(s.mnt + "/p" + std::to_string(p) + "t" + std::to_string(t), p * kThreads + t, kRounds);
        });
      int total = 0;
      for (int t = 0; t < kThreads; t++) threads[t].join(), total += bad[t];
      _exit(total == 0 ? 0 : 1);
    }
    kids.push_back(kid);
  }
  for (pid_t kid : kids) {
    int st = 0;
    REQUIRE(waitpid(kid, &st, 0) == kid);
    CHECK_MESSAGE(WIFEXITED(st), "a storm process died of signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
  }
  const std::string stats = stats_of(s.mnt);
  CHECK(stats.find("\"transport\":\"reactor\"") != std::string::npos);
  CHECK(stats.find("\"why_not\":\"\"") != std::string::npos);
  // Each thread's rounds: 16 data requests and at least 7 others (open, stat, renames, ...).
  CHECK(stat_number(stats, "ring_requests") >= kProcs * kThreads * kRounds * 23);
  unmount(s.mnt, daemon);
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse reactor: every read or write answered on another thread reaches its ring through the reactor's post") {
  if (!reactor_possible()) return;
  FuseScratch s(256 << 20);
  // poll_queues=0: no request runs to completion in its reactor, so on a disk image (whose
  // commands complete on the device's thread) the replies come from elsewhere.
  const pid_t daemon = mount_fg(s.img, s.mnt, "fuse_uring=on,poll_queues=0");
  std::string out;
  REQUIRE_MESSAGE(run("fio --name=p --filename=" + s.mnt + "/f --size=16M --rw=randrw --bs=4k --direct=1 "
                      "--ioengine=io_uring --iodepth=16 --number_ios=4000 --verify=crc32c --output-format=terse 2>&1",
                      &out) == 0,
                  out);
  const std::string stats = stats_of(s.mnt);
  const long long posted = stat_number(stats, "posted_replies");
  const long long elsewhere = stat_number(stats, "replies_elsewhere");
  // Only reads and writes reply from another thread; each such reply is posted, none written
  // from there to the ring or to /dev/fuse, and none made on the reactor's own thread is.
  CHECK(posted == elsewhere);
  if (stats.find("\"inline\":false") != std::string::npos) CHECK(posted > 0);  // completions on the device's thread
  unmount(s.mnt, daemon);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// The completion cover (blockcore/blk_cover.h, daemon/README.md "The reactor reaps its CPU's
// completions"): on an image whose every command completes through the emulated queue's
// io_uring (inline=off), the reactor of the CPU fio runs on covers that CPU's hardware queue
// and reaps its reads there, and the data is right; with fuse_uring_cover=off no reactor covers
// and the completion thread's replies are posted, as before.
TEST_CASE("fuse reactor: the reactor reaps its CPU's hardware queue, and fuse_uring_cover=off leaves it to the completion thread") {
  if (!reactor_possible()) return;
  for (const std::string cover : {"on", "off"}) {
    CAPTURE(cover);
    FuseScratch s(256 << 20);
    // poll_queues=0: every read and write goes to the default queues, none runs to completion.
    const pid_t daemon =
        mount_fg("emu:" + s.img + ",inline=off", s.mnt, "fuse_uring=on,poll_queues=0,fuse_uring_cover=" + cover);
    std::string out;
    REQUIRE_MESSAGE(run("fio --name=c --filename=" + s.mnt + "/f --size=16M --rw=randrw --bs=4k --direct=1 "
                        "--ioengine=io_uring --iodepth=32 --number_ios=4000 --verify=crc32c --cpus_allowed=0 "
                        "--output-format=terse 2>&1",
                        &out) == 0,
                    out);
    const std::string stats = stats_of(s.mnt);
    const long long covering = stat_number(stats, "covering");
    const long long reaped = stat_number(stats, "device_reaps");
    const long long posted = stat_number(stats, "posted_replies");
    if (cover == "on") {
      CHECK(covering >= 1);
      CHECK(reaped > 0);
    } else {
      CHECK(covering == 0);
      CHECK(reaped == 0);
      CHECK(posted > 0);  // the completion thread answered them
    }
    unmount(s.mnt, daemon);
    CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  }
}

// Ready for zero copy (daemon/README.md): every entry's buffer is registered with its ring as
// a fixed buffer, fuse_uring_qd of them per reactor, one reactor per possible CPU; as root
// (CAP_IPC_LOCK) no memlock limit stands in the way, so the stats name no reason.
TEST_CASE("fuse reactor: every entry's buffer is a fixed buffer of its ring") {
  if (!reactor_possible()) return;
  FuseScratch s(64 << 20);
  const pid_t daemon = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_qd=8");
  write_file(s.mnt + "/f", "x");  // INIT is done: the rings exist
  const std::string stats = stats_of(s.mnt);
  CHECK(stat_number(stats, "fixed_buffers") == 8 * sysconf(_SC_NPROCESSORS_CONF));
  CHECK(stats.find("\"fixed_buffers_why_not\":\"\"") != std::string::npos);
  CHECK(read_file(s.mnt + "/f") == "x");
  unmount(s.mnt, daemon);
}

// Reads and writes decoded by the reactor itself (daemon/README.md, "Reads and writes without
// libfuse"): with fuse_uring_hot on, every read and write fio makes is a hot request and its
// data is right; a full filesystem answers a hot write with ENOSPC, not another error, and the
// data written before it reads back intact. With fuse_uring_hot=off libfuse decodes them all,
// with the same results.
TEST_CASE("fuse reactor: reads and writes decoded from the ring entry, and fuse_uring_hot=off leaves them to libfuse") {
  if (!reactor_possible()) return;
  for (const std::string hot : {"on", "off"}) {
    CAPTURE(hot);
    FuseScratch s(32 << 20);
    const pid_t daemon = mount_fg(s.img, s.mnt, "fuse_uring=on,fuse_uring_hot=" + hot);
    std::string out;
    REQUIRE_MESSAGE(run("fio --name=h --filename=" + s.mnt + "/f --size=4M --rw=randrw --bs=4k --direct=1 "
                        "--ioengine=io_uring --iodepth=16 --number_ios=2000 --verify=crc32c --output-format=terse 2>&1",
                        &out) == 0,
                    out);
    const long long hot_requests = stat_number(stats_of(s.mnt), "hot_requests");
    if (hot == "on") CHECK(hot_requests >= 2000);  // fio's I/Os, and its verify reads besides
    else CHECK(hot_requests == 0);

    // Fill the filesystem with direct 64 KiB writes, each its own pattern, until one fails.
    DirectBlock blk(64 << 10);
    REQUIRE(blk.p);
    const std::string full = s.mnt + "/full";
    int fd = open(full.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0644);
    REQUIRE(fd >= 0);
    int written = 0, err = 0;
    for (; written < 1024; written++) {
      std::memset(blk.p, 1 + written % 251, 64 << 10);
      if (pwrite(fd, blk.p, 64 << 10, off_t(written) << 16) != 64 << 10) {
        err = errno;
        break;
      }
    }
    CHECK(err == ENOSPC);
    CHECK(written > 0);
    close(fd);
    fd = open(full.c_str(), O_RDONLY | O_DIRECT);
    REQUIRE(fd >= 0);
    int bad = 0;
    for (int i = 0; i < written; i++) {
      bad += pread(fd, blk.p, 64 << 10, off_t(i) << 16) != 64 << 10;
      bad += blk.p[0] != 1 + i % 251 || blk.p[(64 << 10) - 1] != 1 + i % 251;
    }
    CHECK(bad == 0);
    close(fd);
    unmount(s.mnt, daemon);
    CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  }
}
