// Tracing through a real mount (docs/tracing.md): `-o trace=DIR` leaves blktrace files that
// blkparse and btt read, and bpftrace attaches to the daemon's USDT probes and counts what fio did.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

constexpr int kReads = 400;

// A file of 8 MiB, written and synced.
void write_file(const std::string& mnt) {
  std::string out;
  REQUIRE_MESSAGE(run("fio --name=w --filename=" + mnt + "/f --size=8M --bs=1M --rw=write --end_fsync=1 --minimal", &out) == 0, out);
}
// kReads direct 4 KiB reads of it by one fio thread: each one FUSE READ and one bio of its own.
void read_file_direct(const std::string& mnt) {
  std::string out;
  REQUIRE_MESSAGE(run("fio --name=r --filename=" + mnt + "/f --size=8M --bs=4k --rw=randread --direct=1 --ioengine=psync"
                      " --number_ios=" + std::to_string(kReads) + " --norandommap --minimal", &out) == 0, out);
}

long long number_after(const std::string& text, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(label + R"(\s+(\d+))"))) return -1;
  return std::stoll(m[1]);
}

}  // namespace

TEST_CASE("trace=DIR: blkparse reads the mount's records, every read queued, issued and completed, btt follows them") {
  if (!have_fuse()) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible");
    return;
  }
  std::string out;
  if (run("command -v blkparse && command -v btt", &out) != 0) {
    MESSAGE("skipped: blkparse/btt not installed (Debian's blktrace package; tools/install-deps.sh)");
    return;
  }
  FuseScratch s(256 << 20);
  const std::string dir = s.dir + "/trace";
  std::filesystem::create_directory(dir);
  pid_t pid = mount_fg(s.img, s.mnt, "trace=" + dir);
  write_file(s.mnt);
  read_file_direct(s.mnt);
  unmount(s.mnt, pid);  // the records are in the files once the daemon has exited
  REQUIRE_MESSAGE(run("blkparse -i biofs -D " + dir + " -d " + dir + "/all.bin", &out) == 0, out);
  INFO(out.substr(out.size() > 3000 ? out.size() - 3000 : 0));
  const std::string total = out.substr(out.find("Total (biofs):"));
  // The direct reads, plus whatever metadata the filesystem read: every one completed.
  const long long queued = number_after(total, "Reads Queued:"), completed = number_after(total, "Reads Completed:");
  CHECK(queued >= kReads);
  CHECK(completed >= kReads);
  CHECK(number_after(total, "Read Dispatches:") == completed);
  CHECK(number_after(total, "Write Dispatches:") == number_after(total, "Writes Completed:"));
  CHECK(out.find("Skips: 0 forward") != std::string::npos);
  // btt computes the latency rows (how many I/Os it follows through is its own matter: it
  // loses some where a split write is in the stream; blk_trace_test pins an exact count).
  REQUIRE(run("cd " + dir + " && btt -i all.bin", &out) == 0);  // btt writes .dat files where it runs
  INFO(out);
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(R"(\nD2C\s+\S+\s+\S+\s+\S+\s+(\d+))")));
  CHECK(std::stoll(m[1]) > 0);
  REQUIRE(std::regex_search(out, m, std::regex(R"(\nQ2C\s+\S+\s+\S+\s+\S+\s+(\d+))")));
  CHECK(std::stoll(m[1]) > 0);
}

TEST_CASE("trace=DIR that is not a directory stops the mount with one line naming it") {
  if (!have_fuse()) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible");
    return;
  }
  FuseScratch s(64 << 20);
  std::string out;
  CHECK(run(kBin + "/biofs " + s.img + " " + s.mnt + " -o " + with_test_opts("trace=" + s.dir + "/missing") + " 2>&1", &out) == 32);
  CHECK(out.find("trace=" + s.dir + "/missing: No such file or directory") != std::string::npos);
  CHECK(!is_mounted(s.mnt));
  CHECK(run(kBin + "/biofs " + s.img + " " + s.mnt + " -o " + with_test_opts("trace=" + s.img) + " 2>&1", &out) == 32);
  CHECK(out.find("blktrace: cannot create " + s.img + "/biofs.blktrace.0") != std::string::npos);
  CHECK(!is_mounted(s.mnt));
}

TEST_CASE("USDT: bpftrace counts one fuse_request_receive per read and as many block issues as completions") {
  if (!have_fuse()) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible");
    return;
  }
  std::string out;
  if (run("command -v bpftrace", &out) != 0) {
    MESSAGE("skipped: bpftrace not installed (tools/install-deps.sh)");
    return;
  }
  FuseScratch s(256 << 20);
  pid_t pid = mount_fg(s.img, s.mnt, "");
  write_file(s.mnt);
  // Only this mount's daemon: other tests' daemons run the same binary meanwhile.
  const std::string bin = kBin + "/biofs", log = s.dir + "/bpftrace.out", mine = "pid == " + std::to_string(pid);
  const std::string script = "BEGIN { printf(\"ready\\n\"); } "
                             "usdt:" + bin + ":fuse:fuse_request_receive /" + mine + " && arg1 == 15/ { @reads = count(); } "
                             "usdt:" + bin + ":block:block_rq_issue /" + mine + "/ { @issue = count(); } "
                             "usdt:" + bin + ":block:block_rq_complete /" + mine + "/ { @complete = count(); } "
                             "usdt:" + bin + ":nvme:nvme_setup_cmd /" + mine + "/ { @setup = count(); }";
  const pid_t tracer = fork();
  REQUIRE(tracer >= 0);
  if (tracer == 0) {
    if (!freopen(log.c_str(), "w", stdout) || !freopen(log.c_str(), "a", stderr)) _exit(126);
    execlp("bpftrace", "bpftrace", "-e", script.c_str(), (char*)nullptr);
    _exit(127);
  }
  bool ready = false;
  for (int i = 0; i < 600 && !ready; i++) {  // bpftrace may take seconds to attach
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ready = read_file(log).find("ready") != std::string::npos;
    int st;
    if (!ready && waitpid(tracer, &st, WNOHANG) == tracer) break;
  }
  if (!ready) {
    kill(tracer, SIGKILL);
    waitpid(tracer, nullptr, 0);
    unmount(s.mnt, pid);
    MESSAGE("skipped: bpftrace could not attach (the kernel refuses BPF here?): " << read_file(log));
    return;
  }
  read_file_direct(s.mnt);
  kill(tracer, SIGINT);
  REQUIRE(waitpid(tracer, nullptr, 0) == tracer);
  unmount(s.mnt, pid);
  const std::string counts = read_file(log);
  INFO(counts);
  auto count = [&](const std::string& name) {
    std::smatch m;
    return std::regex_search(counts, m, std::regex("@" + name + R"(: (\d+))")) ? std::stoll(m[1]) : -1;
  };
  CHECK(count("reads") == kReads);  // FUSE_READ is opcode 15
  CHECK(count("issue") >= kReads);
  CHECK(count("complete") == count("issue"));
  CHECK(count("setup") == count("issue"));
}
