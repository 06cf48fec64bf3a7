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
#include <sstream>
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
      // FUSE_DIRECT_IO_ALLOW_MMAP (else ENODEV), which a libfuse before 3.16 cannot ask for.
      const std::string stats = stats_of(s.mnt);
      void* map = mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, fd, 0);
      if (stat_flag(stats, "direct_io_mmap")) {
        REQUIRE_MESSAGE(map != MAP_FAILED, strerror(errno));
        CHECK(std::memcmp(map, data.data(), data.size()) == 0);
        munmap(map, data.size());
      } else {
        MESSAGE("mmap of an O_DIRECT file not checked: libfuse " << libfuse_version(stats) << " cannot ask for it");
        CHECK(map == MAP_FAILED);
        CHECK(libfuse_version(stats) < 316);
      }
      close(fd);
    }
    const std::string stats = stats_of(s.mnt);
    CHECK(stats.find("\"requested\":\"" + transport + "\"") != std::string::npos);
    CHECK(stats.find("\"transport\":\"" + transport_of(transport) + "\"") != std::string::npos);
    if (transport == "on") {  // its rings took the requests, and it says of no trouble
      CHECK(stats.find("\"why_not\":\"\"") != std::string::npos);
      CHECK(stat_number(stats, "ring_requests") >= 4);
    }
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

// fuse_uring_plug (daemon/README.md, "Plugging across a ring batch"): a ring thread keeps its
// plug from one read or write to the next while requests wait in its ring. Everything through
// one ring (all on CPU 0), direct reads and writes from many threads beside hole punches,
// truncates and fsyncs that block on the filesystem's lock or on the I/O in flight: nothing
// may wait for bios that sit in a plug, and every block reads back what was written last.
TEST_CASE("fuse: over io_uring, reads and writes plugged across a ring batch beside punches, truncates and fsyncs") {
  if (!have_fuse() || !kernel_uring_possible()) {
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
static void dsync_case(const std::string& transport) {
  FuseScratch s(64 << 20);
  // A volatile write cache: without one, the block layer drops FUA as the kernel does.
  const pid_t pid = mount_fg("emu:" + s.img + ",vwc", s.mnt, "commit=0," + transport);
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

TEST_CASE("fuse: O_DSYNC, O_SYNC and RWF_DSYNC direct overwrites reach the device as FUA writes, without a flush") {
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  // On /dev/fuse libfuse decodes the writes; over the reactor it decodes them itself, the open
  // flags from fuse_write_in (fuse_uring_hot).
  for (const std::string& transport : fuse_transports()) {
    CAPTURE(transport);
    dsync_case("fuse_uring=" + transport);
  }
}


namespace {

// Whether `dir` is on tmpfs or ramfs: there the emulated namespace keeps no write cache.
bool in_memory(const std::string& dir) {
  struct statfs sfs;
  REQUIRE(statfs(dir.c_str(), &sfs) == 0);
  return sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
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
  if (in_memory(s.dir)) {
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

namespace {

// The daemon's minor page faults so far (/proc/PID/stat, field 10).
long long minor_faults(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  for (int i = 3; i <= 10 && rest >> field; i++) {
  }
  return std::stoll(field);
}

}  // namespace

TEST_CASE("fuse: 1 MiB direct writes on emu:IMG,vwc are copied once into the cache and fault in no memory per byte") {
  // Issue 50's cause: each cached write had a heap block of its own, and glibc maps a 128 KiB
  // block fresh (mmap) and unmaps it when freed, so every cached page cost the submitting thread
  // a page fault and every retired write a TLB shootdown of every CPU: 1 MiB writes at a tenth
  // of vwc=through's speed. The cache's memory is one ring, touched once at mount.
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(512 << 20);
  if (in_memory(s.dir)) {
    MESSAGE("skipped: the image is in memory, where the emulated namespace keeps no write cache (nvme/emu_ns.h)");
    return;
  }
  for (const std::string& transport : fuse_transports()) {
    CAPTURE(transport);
    const pid_t pid = mount_fg("emu:" + s.img + ",vwc", s.mnt, "fuse_uring=" + transport);
    const std::string file = s.mnt + "/big";
    std::string out;
    // A first pass lays the file out and lets the daemon's own buffers come into being.
    REQUIRE_MESSAGE(run("dd if=/dev/urandom of=" + file + " bs=1M count=64 oflag=direct status=none", &out) == 0, out);
    const std::string before = stats_of(s.mnt);
    const long long faults_before = minor_faults(pid);
    // 96 MiB: six times the 16 MiB cache, so its ring wraps and every span is reused.
    REQUIRE_MESSAGE(run("dd if=/dev/zero of=" + file + " bs=1M count=96 oflag=direct conv=notrunc status=none", &out) == 0, out);
    const long long faults = minor_faults(pid) - faults_before;
    const std::string after = stats_of(s.mnt);
    const long long pages = (96 << 20) / 4096;
    const long long cached_bytes = stat_in(after, "write_cache", "bytes_cached") - stat_in(before, "write_cache", "bytes_cached");
    INFO("daemon page faults " << faults << " for " << pages << " pages written; bytes copied into the cache " << cached_bytes);
    // Every byte copied in once, none twice; beside them at most a few metadata blocks (a
    // journal commit that falls inside the 96 MiB on a slow build).
    CHECK(cached_bytes >= 96ll << 20);
    CHECK(cached_bytes < (96ll << 20) + (1 << 20));
#ifndef BIOFS_SANITIZER_BUILD
    CHECK(faults < pages / 16);  // a fault per page with a heap block per write
#else
    // A sanitizer's allocator maps each large block afresh, and the daemon's per-I/O buffers
    // (fs/io_buf.cc) come from it in these builds instead of TBB's: the faults say nothing here.
    MESSAGE("fault count not checked in a sanitizer build: " << faults << " for " << pages << " pages");
#endif
    CHECK_MESSAGE(run("cmp -n " + std::to_string(96 << 20) + " " + file + " /dev/zero", &out) == 0, out);
    unmount(s.mnt, pid);
  }
  std::string out;
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

// The mount-time I/O contract (devices/io_contract.h): `-o verbose` prints it as the mount
// comes up, the stats carry it always, and what was asked for but is not there is named in both.
TEST_CASE("fuse: -o verbose prints the I/O contract at mount, and the stats carry it") {
  if (!have_fuse()) {
    MESSAGE("skipped: no /dev/fuse");
    return;
  }
  FuseScratch s(64 << 20);
  std::string out;
  REQUIRE_MESSAGE(run(kBin + "/biofs emu:" + s.img + ",mdts=3 " + s.mnt + " -o " + with_test_opts("verbose,poll_queues=1") +
                          " 2>&1",
                      &out) == 0,
                  out);
  REQUIRE(is_mounted(s.mnt));
  CHECK_MESSAGE(out.find("biofs: contract: device emu:" + s.img) != std::string::npos, out);
  CHECK_MESSAGE(out.find("mdts 32 KiB; limits: max 32 KiB per request") != std::string::npos, out);
  CHECK_MESSAGE(out.find("1 poll") != std::string::npos, out);
  CHECK_MESSAGE(out.find("biofs: contract: fuse ") != std::string::npos, out);
  const std::string stats = stats_of(s.mnt);
  CHECK(stat_number(stats, "mdts_bytes") == 32768);
  CHECK(stat_number(stats, "max_sectors") == 64);
  CHECK(stat_number(stats, "poll_queues") == 1);
  REQUIRE(run("fusermount3 -u " + s.mnt) == 0);

  // Without verbose: nothing printed, the stats still carry it; a RAM disk has no poll queues.
  REQUIRE(run(kBin + "/biofs ram:64M " + s.mnt + " -o " + with_test_opts("poll_queues=2") + " 2>&1", &out) == 0);
  CHECK_MESSAGE(out.find("contract") == std::string::npos, out);
  const std::string ram = stats_of(s.mnt);
  CHECK(stat_number(ram, "mdts_bytes") == 0);
  CHECK_MESSAGE(ram.find("poll_queues=2: this device has 0") != std::string::npos, ram);
  REQUIRE(run("fusermount3 -u " + s.mnt) == 0);
}

TEST_CASE("fuse: a mounted stripe holds each member image's lock: mkfs, fsck and a mount of a member are refused") {
  if (!have_fuse()) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible");
    return;
  }
  FuseScratch s(1 << 20);
  const std::string a = s.dir + "/a.img", b = s.dir + "/b.img";
  for (const std::string& f : {a, b}) {
    { std::ofstream(f).close(); }
    REQUIRE(truncate(f.c_str(), 64 << 20) == 0);
  }
  const std::string stripe = "stripe:emu:" + a + "+" + b + ",lba=4096";
  std::string out;
  REQUIRE_MESSAGE(run(kBin + "/mkfs.biofs -q " + stripe, &out) == 0, out);
  const pid_t pid = mount_fg(stripe, s.mnt, "");
  write_file(s.mnt + "/f", pattern(1 << 20, 3), true);
  // Each member is the mount's: the first one named and the last one, whatever their options.
  CHECK(run(kBin + "/mkfs.biofs -f -q " + b, &out) == 1);
  CHECK_MESSAGE(out.find(b + " is in use (mounted)") != std::string::npos, out);
  CHECK(run(kBin + "/fsck.biofs -n emu:" + a, &out) == 8);
  CHECK_MESSAGE(out.find(a + " is in use (mounted)") != std::string::npos, out);
  const std::string mnt2 = s.dir + "/mnt2";
  stdfs::create_directory(mnt2);
  CHECK(run(kBin + "/biofs " + b + ",lba=4096 " + mnt2, &out) == 32);
  CHECK_MESSAGE(out.find(b + " is in use") != std::string::npos, out);
  if (is_mounted(mnt2)) run("fusermount3 -u " + mnt2);
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + stripe, &out) == 0, out);
}
