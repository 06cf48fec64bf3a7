// Helpers for the tests that mount biofs through the kernel: running the built tools, starting
// the daemon in the foreground, unmounting and waiting for it, patterns and whole files.
#pragma once

#include <doctest/doctest.h>

#include "../pattern.h"

#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace biofs::test {


namespace stdfs = std::filesystem;
inline const std::string kBin = BIOFS_BIN_DIR;

// Runs a command line; returns its exit status and its stdout+stderr.
inline int run(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string s;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) s.append(buf, n);
  const int st = pclose(p);
  if (out) *out = s;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

inline bool is_mounted(const std::string& mnt) {
  std::ifstream m("/proc/mounts");
  std::string line;
  while (std::getline(m, line))
    if (line.find(" " + mnt + " fuse.biofs ") != std::string::npos ||
        line.find(" " + mnt + " fuseblk.biofs ") != std::string::npos)  // blkdev=
      return true;
  return false;
}

// The options every test mount adds: BIOFS_TEST_MOUNT_OPTS, which ctest sets to run a suite
// again over the other FUSE transports (fuse_uring=on, the reactor, and fuse_uring=libfuse;
// tests/fs/CMakeLists.txt). Without it a
// mount that names no transport gets fuse_uring=off, so the first run of each suite covers
// /dev/fuse although the daemon's default (auto) takes io_uring where it can.
// A kernel without FUSE-over-io_uring (no enable_uring parameter) runs them on /dev/fuse and
// says so, as fuse_uring=auto does.
inline std::string with_test_opts(const std::string& opts) {
  const char* env = getenv("BIOFS_TEST_MOUNT_OPTS");
  std::string extra = env && *env ? env : "";
  if (extra.empty()) {
    if (opts.find("fuse_uring=") != std::string::npos) return opts;
    extra = "fuse_uring=off";
  }
  if ((extra == "fuse_uring=on" || extra == "fuse_uring=libfuse") &&
      access("/sys/module/fuse/parameters/enable_uring", R_OK) != 0) {
    MESSAGE("this kernel has no FUSE-over-io_uring: the io_uring run of this test uses /dev/fuse");
    extra = "fuse_uring=auto";
  }
  return opts.empty() ? extra : opts + "," + extra;
}

// Starts the daemon in the foreground as a child, waits for the mount to appear. fault_env:
// the daemon's BIOFS_FAULT (devices/device_string.h), if any.
inline pid_t mount_fg(const std::string& img, const std::string& mnt, const std::string& given_opts,
                      const char* fault_env = nullptr) {
  const std::string opts = with_test_opts(given_opts);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (fault_env) setenv("BIOFS_FAULT", fault_env, 1);
    const std::string bin = kBin + "/biofs";
    if (opts.empty()) execl(bin.c_str(), "biofs", img.c_str(), mnt.c_str(), "-f", (char*)nullptr);
    else execl(bin.c_str(), "biofs", img.c_str(), mnt.c_str(), "-f", "-o", opts.c_str(), (char*)nullptr);
    _exit(127);
  }
  for (int i = 0; i < 200 && !is_mounted(mnt); i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) FAIL("the daemon exited before mounting");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(is_mounted(mnt));
  return pid;
}

inline void unmount(const std::string& mnt, pid_t pid) {
  std::string out;
  REQUIRE_MESSAGE(run("fusermount3 -u " + mnt, &out) == 0, out);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);  // the daemon has written everything back
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

// kill -9 of a foreground daemon, then the lazy unmount of its dead mount: a crash.
inline void kill_daemon(const std::string& mnt, pid_t pid) {
  REQUIRE(kill(pid, SIGKILL) == 0);
  REQUIRE(waitpid(pid, nullptr, 0) == pid);
  run("fusermount3 -u -z " + mnt);
}

inline void write_file(const std::string& path, const std::string& data, bool sync = false) {
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, data.data(), data.size()) == ssize_t(data.size()));
  if (sync) REQUIRE(fsync(fd) == 0);
  REQUIRE(close(fd) == 0);
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}


// One 4 KiB block aligned for O_DIRECT, freed at scope exit; p is null if allocation failed.
struct DirectBlock {
  uint8_t* p;
  explicit DirectBlock(size_t bytes = 4096) : p(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes))) {}
  DirectBlock(const DirectBlock&) = delete;
  DirectBlock& operator=(const DirectBlock&) = delete;
  ~DirectBlock() { std::free(p); }
};

// A scratch directory with an image of `bytes` made by mkfs.biofs and an empty mount point;
// removed (unmounting first if needed) at scope exit. Under $BIOFS_SCRATCH_DIR (default /tmp):
// /dev/shm puts the images in memory, where the emulated namespace runs its commands inline
// (nvme/emu_ns.h), so the same tests cover both of its paths.
struct FuseScratch {
  std::string dir, img, mnt;
  explicit FuseScratch(uint64_t bytes, const std::string& mkfs_args = "") {
    const char* base = std::getenv("BIOFS_SCRATCH_DIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/biofs-fuse-XXXXXX";
    REQUIRE(mkdtemp(tmpl.data()));
    dir = tmpl, img = dir + "/img", mnt = dir + "/mnt";
    std::filesystem::create_directory(mnt);
    { std::ofstream(img).close(); }
    REQUIRE(truncate(img.c_str(), off_t(bytes)) == 0);
    std::string out;
    REQUIRE_MESSAGE(run(kBin + "/mkfs.biofs -q " + mkfs_args + " " + img, &out) == 0, out);
  }
  ~FuseScratch() {
    if (is_mounted(mnt)) run("fusermount3 -u -z " + mnt);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

inline bool have_fuse() { return access("/dev/fuse", R_OK | W_OK) == 0; }
// True, with a line saying so, where the test cannot mount: it then skips.
inline bool no_fuse() {
  if (have_fuse()) return false;
  MESSAGE("skipped: /dev/fuse is absent or not accessible");
  return true;
}

// Whether the kernel offers FUSE-over-io_uring to this user (as root the daemon can switch the
// fuse module's enable_uring on): the reactor (fuse_uring=on, daemon/fuse_reactor.h) needs
// nothing of libfuse.
inline bool kernel_uring_possible() {
  return access("/sys/module/fuse/parameters/enable_uring", R_OK) == 0 && geteuid() == 0;
}

// Whether fuse_uring=libfuse can be had: the kernel's ring and this build's libfuse's
// (CMakeLists.txt: 3.18+ built with liburing).
inline bool libfuse_ring_possible() { return BIOFS_LIBFUSE_HAS_URING && kernel_uring_possible(); }

// The fuse_uring= values a test mounts with here: off, and on (the reactor) and libfuse where
// possible (else it says so).
inline std::vector<std::string> fuse_transports() {
  std::vector<std::string> t{"off"};
  if (kernel_uring_possible()) t.push_back("on");
  else MESSAGE("skipped fuse_uring=on: this kernel has no FUSE-over-io_uring, or not root");
  if (libfuse_ring_possible()) t.push_back("libfuse");
  else MESSAGE("skipped fuse_uring=libfuse: no FUSE-over-io_uring here (kernel, or this build's libfuse), or not root");
  return t;
}

// The stats' "transport" for a fuse_uring= value.
inline std::string transport_of(const std::string& fuse_uring) {
  return fuse_uring == "on" ? "reactor" : fuse_uring == "libfuse" ? "libfuse ring" : "/dev/fuse";
}

// Pins the calling thread to one CPU: its FUSE requests then go to that CPU's ring queue.
inline void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Waits until `count` reaches `want` or the deadline passes; true if it did. For threads blocked
// in calls on a mount: after false, killing the daemon ends those calls (the connection aborts).
inline bool wait_for_count(const std::atomic<int>& count, int want, std::chrono::steady_clock::time_point deadline) {
  while (count.load() < want && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return count.load() >= want;
}

// The mount's stats JSON (daemon/stats.h), read through its xattr.
inline std::string stats_of(const std::string& mnt) {
  std::string out;
  REQUIRE(run("getfattr --only-values -n user.biofs.stats " + mnt, &out) == 0);
  return out;
}

// A number in the stats JSON, by key ("polled": 12 -> 12); -1 if absent.
inline long long stat_number(const std::string& stats, const std::string& key) {
  const size_t at = stats.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::atoll(stats.c_str() + at + key.size() + 3);
}

// A number inside the stats' object `object` ("io", "write_cache", "reactor"), by key; -1 if absent.
inline long long stat_in(const std::string& stats, const std::string& object, const std::string& key) {
  const size_t at = stats.find("\"" + object + "\":{");
  if (at == std::string::npos) return -1;
  const std::string inner = stats.substr(at, stats.find('}', at) - at);
  return stat_number(inner, key);
}

// A boolean in the stats JSON, by key ("inline": true -> true); REQUIREs that it is there.
inline bool stat_flag(const std::string& stats, const std::string& key) {
  const bool yes = stats.find("\"" + key + "\":true") != std::string::npos;
  REQUIRE_MESSAGE((yes || stats.find("\"" + key + "\":false") != std::string::npos), key);
  return yes;
}

// The daemon's libfuse version from its stats ("libfuse": "3.14.0" -> 314); REQUIREs it.
inline unsigned libfuse_version(const std::string& stats) {
  const size_t at = stats.find("\"libfuse\":\"");
  REQUIRE(at != std::string::npos);
  unsigned major = 0, minor = 0;
  REQUIRE(std::sscanf(stats.c_str() + at + 11, "%u.%u", &major, &minor) == 2);
  return major * 100 + minor;
}

inline constexpr uid_t kNobody = 65534;

// Runs `call` in a child as user `uid` (group the same number, no supplementary groups);
// returns the errno it failed with, 0 on success.
inline int errno_as(uid_t uid, const std::function<int()>& call) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (setgroups(0, nullptr) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid)) _exit(200);
    _exit(call() >= 0 ? 0 : errno);
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  return WEXITSTATUS(st);
}
inline int errno_as_nobody(const std::function<int()>& call) { return errno_as(kNobody, call); }

}  // namespace biofs::test
