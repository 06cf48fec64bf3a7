// Device faults under the driver (nvme/fault_inject.h): failed reads, writes and flushes,
// delayed and timed-out completions. The caller gets EIO, nothing hangs, the filesystem stays
// consistent (or stops writing, with one line, when a metadata commit fails) and remounts
// clean once the faults stop. Rounds of the random-fault workload: BIOFS_FAULT_ROUNDS (3).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "rel_util.h"
#include "fs/io_batch.h"
#include "fs/io_buf.h"

using namespace biofs_test;

namespace {

constexpr uint64_t kImage = 24ull << 20;

// Captures what the code under test prints on stderr (the one-line messages).
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& path) : path_(path) {
    fflush(stderr);
    saved_ = dup(2);
    const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    REQUIRE(fd >= 0);
    dup2(fd, 2);
    close(fd);
  }
  std::string finish() {
    if (saved_ >= 0) {
      fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
    }
    std::ifstream f(path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  ~StderrCapture() { finish(); }

 private:
  std::string path_;
  int saved_ = -1;
};

FaultConfig no_faults() { return FaultConfig{}; }

}  // namespace

TEST_CASE("fault: options in the device string and BIOFS_FAULT, and bad ones refused in one line") {
  DeviceSpec ds;
  REQUIRE(parse_device_spec("emu:/x.img,fail_read=0.25,fail_write=1,fail_flush=0,delay=0.5,delay_us=300,"
                            "timeout=0.01,timeout_ms=40,fault_after=7,seed=9",
                            &ds)
              .ok());
  CHECK(ds.faults);
  CHECK(ds.fault.fail_read == 0.25);
  CHECK(ds.fault.fail_write == 1);
  CHECK(ds.fault.delay_us == 300);
  CHECK(ds.fault.timeout_ms == 40);
  CHECK(ds.fault.after == 7);
  CHECK(ds.fault.seed == 9);
  CHECK(ds.fault.dont_retry);
  CHECK(ds.max_retries == NVME_DEFAULT_MAX_RETRIES);
  REQUIRE(parse_device_spec("emu:/x.img,fault_retry,max_retries=2", &ds).ok());
  CHECK_FALSE(ds.fault.dont_retry);
  CHECK(ds.max_retries == 2);
  REQUIRE(parse_device_spec("emu:/x.img", &ds).ok());
  CHECK_FALSE(ds.faults);
  for (const char* bad : {"emu:/x.img,fail_read=1.5", "emu:/x.img,delay_us=0", "emu:/x.img,timeout=abc",
                          "emu:/x.img,fault_after=-1", "nvme:/dev/ng0n1,fail_write=2",
                          "emu:/x.img,max_retries=256"}) {
    CAPTURE(bad);
    const Status s = parse_device_spec(bad, &ds);
    CHECK_FALSE(s.ok());
    const std::string& err = s.message();
    CHECK(err.find('\n') == std::string::npos);
    CHECK(err.find(std::string(bad).substr(std::string(bad).rfind(',') + 1)) != std::string::npos);
  }
  setenv("BIOFS_FAULT", "fail_flush=0.5,seed=4", 1);
  const Status ok = parse_device_spec("emu:/x.img,vwc", &ds);
  setenv("BIOFS_FAULT", "fail_flush=7", 1);
  const Status bad = parse_device_spec("emu:/x.img", &ds);
  unsetenv("BIOFS_FAULT");
  CHECK(ok.ok());
  CHECK_FALSE(bad.ok());
  CHECK(bad.message().find("BIOFS_FAULT") != std::string::npos);
  REQUIRE(parse_device_spec("emu:/x.img,vwc", &ds).ok());
  CHECK_FALSE(ds.faults);  // the variable is gone again
}

TEST_CASE("fault: failed reads, writes and flushes reach the caller as EIO, and stop when turned off") {
  ScratchDir dir;
  auto dev = open_test_device("emu:" + dir.file("d.img") + ",size=4M,vwc,fail_read=0", DeviceOptions{});
  REQUIRE(dev->faults());
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  std::string a(4096, 'a'), back(4096, '\0');
  REQUIRE(io.write(1, 1, a.data()) == 0);
  FaultConfig c;
  c.fail_read = 1;
  dev->faults()->set(c);
  CHECK(io.read(1, 1, back.data()) == -EIO);
  CHECK(io.write(2, 1, a.data()) == 0);
  CHECK(io.flush() == 0);
  c = no_faults();
  c.fail_write = 1;
  dev->faults()->set(c);
  CHECK(io.write(3, 1, a.data()) == -EIO);
  CHECK(io.read(1, 1, back.data()) == 0);
  CHECK(back == a);
  c = no_faults();
  c.fail_flush = 1;
  dev->faults()->set(c);
  CHECK(io.flush() == -EIO);
  // A write that needs a flush before it (REQ_PREFLUSH) is not written when the flush fails.
  std::string z(4096, 'z');
  CHECK(io.write(4, 1, z.data(), REQ_PREFLUSH | REQ_FUA) == -EIO);
  dev->faults()->set(no_faults());
  REQUIRE(io.read(4, 1, back.data()) == 0);
  CHECK(back == std::string(4096, '\0'));
  CHECK(io.write(4, 1, z.data(), REQ_PREFLUSH | REQ_FUA) == 0);
  CHECK(dev->faults()->counters().failed == 4);  // read, write, flush, the pre-flush
}

TEST_CASE("fault: v6.18 nvme_decide_disposition: a failed command without DNR is retried up to max_retries, one with DNR or REQ_FAILFAST is not") {
  ScratchDir dir;
  const std::string img = dir.file("d.img");
  std::string a(4096, 'a');
  {
    auto dev = open_test_device("emu:" + img + ",size=4M,fault_retry", DeviceOptions{});
    BlockIo io(dev->bdev(), 4096);
    REQUIRE(io.init() == 0);
    REQUIRE(io.write(1, 1, a.data()) == 0);
    FaultConfig c;
    c.fail_read = 1;
    c.dont_retry = false;  // fault_retry: the injected status has no DNR
    dev->faults()->set(c);
    std::string back(4096, '\0');
    uint64_t failed = 0;  // injected failures so far (the counter is cumulative)
    auto failed_now = [&] {
      const uint64_t n = dev->faults()->counters().failed - failed;
      failed += n;
      return n;
    };
    CHECK(io.read(1, 1, back.data()) == -EIO);
    CHECK(failed_now() == 1 + NVME_DEFAULT_MAX_RETRIES);  // sent 6 times
    CHECK(dev->nvme()->retries() == NVME_DEFAULT_MAX_RETRIES);
    // REQ_FAILFAST (blk_noretry_request): failed once, not retried.
    c.fail_read = 0, c.fail_write = 1;
    dev->faults()->set(c);
    CHECK(io.write(2, 1, a.data(), REQ_FAILFAST) == -EIO);
    CHECK(failed_now() == 1);
    CHECK(dev->nvme()->retries() == NVME_DEFAULT_MAX_RETRIES);
    // DNR (the injector's default, as the kernel's dont_retry): failed once, not retried.
    c = no_faults();
    c.fail_read = 1;
    dev->faults()->set(c);
    CHECK(io.read(1, 1, back.data()) == -EIO);
    CHECK(failed_now() == 1);
    CHECK(dev->nvme()->retries() == NVME_DEFAULT_MAX_RETRIES);
    // A fault on a fraction of commands: retries hide nearly all of it, DNR none of it.
    for (const bool dnr : {true, false}) {
      CAPTURE(dnr);
      c = no_faults();
      c.fail_read = 0.3, c.seed = 11, c.dont_retry = dnr;
      dev->faults()->set(c);
      int errors = 0;
      for (int i = 0; i < 200; i++) errors += io.read(1, 1, back.data()) != 0;
      if (dnr) CHECK(errors > 30);  // about 60 of 200
      else CHECK(errors < 3);       // 0.3^6 of 200: about 0.15
      CHECK(failed_now() > 30);
    }
    dev->faults()->set(no_faults());
  }
  // max_retries=0: never retried.
  auto dev = open_test_device("emu:" + img + ",size=4M,fault_retry,max_retries=0", DeviceOptions{});
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  FaultConfig c;
  c.fail_read = 1;
  c.dont_retry = false;
  dev->faults()->set(c);
  std::string back(4096, '\0');
  CHECK(io.read(1, 1, back.data()) == -EIO);
  CHECK(dev->faults()->counters().failed == 1);
  CHECK(dev->nvme()->retries() == 0);
}

TEST_CASE("fault: the same seed fails the same commands, another seed others") {
  ScratchDir dir;
  auto pattern_for = [&](uint64_t seed) {
    auto dev = open_test_device("emu:" + dir.file("d.img") + ",size=4M,fail_write=0.3,seed=" + std::to_string(seed),
                           DeviceOptions{});
    BlockIo io(dev->bdev(), 4096);
    REQUIRE(io.init() == 0);
    std::string a(4096, 'a'), bits;
    for (int i = 0; i < 200; i++) bits += io.write(uint64_t(i % 512), 1, a.data()) ? '1' : '0';
    return bits;
  };
  const std::string p1 = pattern_for(5), p2 = pattern_for(5), p3 = pattern_for(6);
  CHECK(p1 == p2);
  CHECK(p1 != p3);
  const auto ones = std::count(p1.begin(), p1.end(), '1');
  CHECK(ones > 30);  // about 60 of 200
  CHECK(ones < 100);
}

TEST_CASE("fault: delayed completions carry their data, timed-out ones end in EIO, nothing hangs") {
  ScratchDir dir;
  // vwc: a flush reaches only a device with a volatile write cache (blockcore/blk_flush.h).
  auto dev = open_test_device("emu:" + dir.file("d.img") + ",size=8M,vwc,delay=1,delay_us=2000", DeviceOptions{});
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  // Faults are per device command: every other block, so no two bios of a batch merge into one
  // request (blockcore/blk_rq_merge.h) and each is a command of its own.
  std::vector<IoBuf> bufs;
  {
    IoBatch b(&io);
    for (int i = 0; i < 64; i++) {
      bufs.emplace_back(4096);
      std::memset(bufs.back().data(), 'A' + i % 26, 4096);
      b.write(uint64_t(2 * i), 1, bufs.back().data());
    }
    CHECK(b.wait() == 0);
  }
  CHECK(dev->faults()->counters().delayed == 64);
  {
    IoBatch b(&io);
    std::vector<IoBuf> in;
    for (int i = 0; i < 64; i++) {
      in.emplace_back(4096);
      b.read(uint64_t(2 * i), 1, in.back().data());
    }
    CHECK(b.wait() == 0);
    for (int i = 0; i < 64; i++) CHECK(std::memcmp(in[size_t(i)].data(), bufs[size_t(i)].data(), 4096) == 0);
  }
  FaultConfig c;
  c.timeout = 1;
  c.timeout_ms = 20;
  dev->faults()->set(c);
  CHECK(io.write(100, 1, bufs[0].data()) == -EIO);
  CHECK(io.flush() == -EIO);
  // A batch where some commands time out, some are delayed and some fail: it ends, with EIO.
  c = no_faults();
  c.timeout = 0.1, c.timeout_ms = 15, c.delay = 0.3, c.delay_us = 500, c.fail_write = 0.1, c.seed = 3;
  dev->faults()->set(c);
  for (int round = 0; round < 5; round++) {
    IoBatch b(&io);
    for (int i = 0; i < 64; i++) b.write(uint64_t(200 + 2 * i), 1, bufs[size_t(i)].data());
    const int st = b.wait();
    CHECK((st == 0 || st == -EIO));
  }
  const FaultCounters n = dev->faults()->counters();
  CHECK(n.timed_out > 2);
  CHECK(n.failed > 0);
  dev->faults()->set(no_faults());
  std::string back(4096, '\0');
  CHECK(io.read(0, 1, back.data()) == 0);
}

TEST_CASE("fault: failed file reads and data writes give EIO, and the filesystem stays consistent") {
  ScratchDir dir;
  const std::string img = dir.file("fs.img");
  make_image(img, kImage);
  const std::string spec = "emu:" + img + ",fail_read=0";
  const std::string data = pattern_data(50000, 1);
  {
    Mounted m = open_fs(spec);
    REQUIRE(m.fs);
    FsBackend be(*m.fs);
    REQUIRE(be.create("/kept") == 0);
    REQUIRE(be.write("/kept", 0, data) == 0);
    REQUIRE(be.fsync("/kept") == 0);
    REQUIRE(be.create("/other") == 0);
    m.fs->unmount();
    m.close();
    m = open_fs(spec);  // a fresh mount: nothing of /kept is cached
    REQUIRE(m.fs);
    FsBackend be2(*m.fs);
    uint64_t ino;
    REQUIRE(be2.resolve("/kept", &ino) == 0);
    // The fault windows below must find no metadata waiting to commit (a failed commit rightly
    // stops the filesystem): /kept's first read since its write moves its atime (relatime,
    // fs/atime.h), so that read and its commit happen here.
    std::string first;
    REQUIRE(be2.read("/kept", &first) == 0);
    REQUIRE(m.fs->sync() == 0);
    FaultConfig c;
    c.fail_read = 1;
    m.dev->faults()->set(c);
    std::string got(data.size(), '\0');
    CHECK(m.fs->read(ino, 0, got.size(), got.data()) == -EIO);
    c = no_faults();
    c.fail_write = 1;
    m.dev->faults()->set(c);
    uint64_t other;
    REQUIRE(be2.resolve("/other", &other) == 0);
    CHECK(m.fs->write(other, 0, data.size(), data.data()) == -EIO);
    m.dev->faults()->set(no_faults());
    CHECK(be2.read("/kept", &got) == 0);
    CHECK(got == data);
    CHECK(be2.write("/other", 0, "after") == 0);
    CHECK(be2.fsync("/other") == 0);
    CHECK(m.fs->unmount() == 0);
  }
  CHECK(fsck_errors(img) == "");
  Mounted m = open_fs("emu:" + img);
  REQUIRE(m.fs);
  FsBackend be(*m.fs);
  std::string got;
  CHECK(be.read("/kept", &got) == 0);
  CHECK(got == data);
  CHECK(be.read("/other", &got) == 0);
  CHECK(got == "after");
}

TEST_CASE("fault: a failed metadata commit stops writing with one line, and the disk remounts as of the last commit") {
  ScratchDir dir;
  const std::string img = dir.file("fs.img");
  make_image(img, kImage);
  const std::string data = pattern_data(20000, 2);
  for (const char* kind : {"flush", "write"}) {
    CAPTURE(kind);
    Mounted m = open_fs("emu:" + img + ",vwc,fail_flush=0");
    REQUIRE(m.fs);
    FsBackend be(*m.fs);
    const std::string name = std::string("/synced-") + kind;
    REQUIRE(be.create(name) == 0);
    REQUIRE(be.write(name, 0, data) == 0);
    REQUIRE(be.fsync(name) == 0);
    REQUIRE(be.create("/lost") == 0);
    FaultConfig c;
    (std::string(kind) == "flush" ? c.fail_flush : c.fail_write) = 1;
    m.dev->faults()->set(c);
    StderrCapture cap(dir.file("stderr.txt"));
    CHECK(be.fsync("/lost") == -EIO);
    CHECK(be.create("/after") == -EROFS);
    CHECK(m.fs->unmount() != 0);
    const std::string said = cap.finish();
    CHECK(said.find("biofs: metadata commit failed (Input/output error): no more changes are written until a remount") !=
          std::string::npos);
    m.close();
    CHECK(fsck_errors(img) == "");
    Mounted r = open_fs("emu:" + img);
    REQUIRE_MESSAGE(r.fs, r.err);
    FsBackend rb(*r.fs);
    std::string got;
    CHECK(rb.read(name, &got) == 0);
    CHECK(got == data);
    CHECK(rb.unlink("/lost") == -ENOENT);
    CHECK(r.fs->unmount() == 0);
  }
}

// A metadata read that fails may leave an operation half done (a rename that removed the old
// entry and could not read the new directory's block): nothing more may be committed.
TEST_CASE("fault: a failed metadata read stops writing with one line, and the disk remounts clean") {
  ScratchDir dir;
  const std::string img = dir.file("fs.img");
  make_image(img, kImage);
  {
    Mounted m = open_fs("emu:" + img);
    REQUIRE(m.fs);
    FsBackend be(*m.fs);
    REQUIRE(be.mkdir("/a") == 0);
    REQUIRE(be.mkdir("/b") == 0);
    REQUIRE(be.create("/a/f") == 0);
    REQUIRE(be.write("/a/f", 0, "contents") == 0);
    for (int i = 0; i < 200; i++) REQUIRE(be.create("/b/n" + std::to_string(i)) == 0);  // several blocks
    REQUIRE(m.fs->unmount() == 0);
  }
  Mounted m = open_fs("emu:" + img + ",fail_read=0");  // cold cache: /b's blocks are not read yet
  REQUIRE(m.fs);
  FsBackend be(*m.fs);
  uint64_t a, b;
  REQUIRE(be.resolve("/a", &a) == 0);
  REQUIRE(be.resolve("/b", &b) == 0);
  {
    std::string got;
    REQUIRE(be.read("/a/f", &got) == 0);  // /a's block is cached now
  }
  FaultConfig c;
  c.fail_read = 1;
  m.dev->faults()->set(c);
  StderrCapture cap(dir.file("stderr.txt"));
  CHECK(m.fs->rename(a, "f", b, "g", 0) == -EIO);
  m.dev->faults()->set(no_faults());
  CHECK(be.create("/a/h") == -EIO);     // the first change after it is refused, with the line
  CHECK(be.create("/a/i") == -EROFS);   // and every later one
  CHECK(m.fs->unmount() != 0);
  const std::string said = cap.finish();
  CHECK(said.find("biofs: metadata read failed (Input/output error): no more changes are written until a remount") !=
        std::string::npos);
  m.close();
  Mounted r = open_fs("emu:" + img);
  REQUIRE_MESSAGE(r.fs, r.err);
  FsBackend rb(*r.fs);
  std::string got;
  CHECK(rb.read("/a/f", &got) == 0);
  CHECK(got == "contents");
  CHECK(r.fs->unmount() == 0);
  r.close();
  CHECK(fsck_errors(img) == "");
}

// Random faults of every kind under the mixed workload, in epochs: faults on for a stretch of
// operations, then off; unmount (which fails if a commit failed: the disk is then as of the last
// good one), check the fsync'd files and fsck, remount and go on. Every remount must succeed.
TEST_CASE("fault: a workload under random faults leaves a filesystem that remounts and checks clean") {
  ScratchDir dir;
  const std::string img = dir.file("run.img");
  const uint64_t rounds = env_u64("BIOFS_FAULT_ROUNDS", 3), seed0 = env_u64("BIOFS_FAULT_SEED", 1);
  uint64_t failed_ops = 0, injected = 0, promised = 0, read_only = 0;
  nvme_set_error_log_limit(0);
  for (uint64_t r = 0; r < rounds; r++) {
    const uint64_t seed = seed0 + r;
    make_image(img, kImage);
    Workload w(seed);
    for (int epoch = 0; epoch < 8; epoch++) {
      CAPTURE(seed);
      CAPTURE(epoch);
      {
        Mounted m = open_fs("emu:" + img + ",vwc,fail_read=0");
        REQUIRE_MESSAGE(m.fs, m.err);
        FsBackend be(*m.fs);
        if (epoch == 0) REQUIRE(w.setup(be) == 0);
        FaultConfig c;
        c.fail_read = 0.01, c.fail_write = 0.005, c.fail_flush = 0.01;
        c.delay = 0.05, c.delay_us = 400, c.timeout = 0.003, c.timeout_ms = 10, c.seed = seed * 100 + uint64_t(epoch);
        m.dev->faults()->set(c);
        for (int i = 0; i < 30; i++) failed_ops += w.step(be) != 0;
        const FaultCounters n = m.dev->faults()->counters();
        injected += n.failed + n.timed_out;
        m.dev->faults()->set(no_faults());
        read_only += m.fs->unmount() != 0;
      }
      w.remounted();
      {  // a clean mount replays what the journal holds; then the promise and fsck
        Mounted m = open_fs("emu:" + img);
        REQUIRE_MESSAGE(m.fs, m.err);
        FsBackend be(*m.fs);
        const std::string broken = w.check(be);
        CHECK_MESSAGE(broken == "", broken);
        promised += w.synced_files();
        CHECK(m.fs->unmount() == 0);
      }
      const std::string errs = fsck_errors(img);
      CHECK_MESSAGE(errs == "", errs);
    }
    Mounted m = open_fs("emu:" + img);
    REQUIRE_MESSAGE(m.fs, m.err);
    std::map<std::string, std::string> tree;
    CHECK(walk_tree(*m.fs, "", disk::ROOT_INO, &tree) == 0);
    CHECK(m.fs->unmount() == 0);
  }
  nvme_set_error_log_limit(32);
  CHECK(injected > 0);
  MESSAGE(rounds << " rounds: " << injected << " faults injected, " << failed_ops << " operations failed, "
                 << read_only << " epochs ended read-only, " << promised << " fsync'd files checked");
}
