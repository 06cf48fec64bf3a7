// Power cuts at the device (emu:...,vwc,powercut=N): what a drive with a volatile write cache
// keeps when its power goes, and that the filesystem's journal ordering and flushes survive it —
// at a seeded random command of a mixed workload, and in the middle of journal replay.
// Rounds: BIOFS_POWERCUT_ROUNDS (default 6); first seed: BIOFS_POWERCUT_SEED (default 1).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "rel_util.h"

using namespace biofs_test;

namespace {

constexpr uint64_t kImage = 24ull << 20;

std::string block_of(char c) { return std::string(4096, c); }

std::string read_raw(const std::string& path, uint64_t off, size_t len) {
  FILE* f = fopen(path.c_str(), "rb");
  REQUIRE(f);
  std::string s(len, '\0');
  REQUIRE(fseek(f, long(off), SEEK_SET) == 0);
  REQUIRE(fread(s.data(), 1, len, f) == len);
  fclose(f);
  return s;
}

// Runs the workload on `spec` until the power goes (or `max_ops`): ops done, fsyncs that
// returned 0. The workload object keeps the promise to check.
void run_until_cut(const std::string& spec, Workload* w, uint64_t max_ops, bool* cut) {
  Mounted m = open_fs(spec);
  EmuPowerCut* pc = m.dev->emu()->powercut();
  if (!m.fs) {
    // The cut fell among the mount's own writes (the point is drawn over every command of the
    // run): the mount fails with it, and only then. Nothing was promised; recovery is checked.
    REQUIRE_MESSAGE(pc->cut(), spec << ": " << m.err);
    *cut = true;
    return;
  }
  FsBackend be(*m.fs);
  if (w->setup(be) == 0)
    for (uint64_t i = 0; i < max_ops && !pc->cut(); i++) w->step(be);
  m.fs->unmount();  // after a cut this fails (and must neither hang nor crash)
  m.fs.reset();
  *cut = pc->cut();  // the cut may come in the unmount's own commits
}

uint64_t count_commands(const std::string& img, uint64_t seed, uint64_t max_ops) {
  Workload w(seed);
  Mounted m = open_fs("emu:" + img + ",vwc,powercut=0");
  REQUIRE_MESSAGE(m.fs, m.err);
  FsBackend be(*m.fs);
  REQUIRE(w.setup(be) == 0);
  for (uint64_t i = 0; i < max_ops; i++) REQUIRE(w.step(be) == 0);
  REQUIRE(m.fs->unmount() == 0);
  return m.dev->emu()->powercut()->commands();
}

}  // namespace

TEST_CASE("powercut: unflushed writes are lost, flushed and FUA writes survive, the cut write tears") {
  ScratchDir dir;
  const std::string img = dir.file("dev.img");
  {
    auto dev = open_test_device("emu:" + img + ",size=1M", DeviceOptions{});  // zeroes
  }
  for (int keep = 0; keep <= 1; keep++) {
    std::filesystem::resize_file(img, 0);
    std::filesystem::resize_file(img, 1 << 20);
    {
      // Commands that change state: 1 write A, 2 flush, 3 write B, 4 write C (FUA),
      // 5 write D (8 blocks): the power goes at the fifth.
      auto dev = open_test_device("emu:" + img + ",vwc,powercut=5,tear,seed=3" + (keep ? ",keep=1" : ""), DeviceOptions{});
      BlockIo io(dev->bdev(), 4096);
      REQUIRE(io.init() == 0);
      const std::string a = block_of('A'), b = block_of('B'), c = block_of('C');
      std::string d;
      for (int i = 0; i < 8; i++) d += block_of(char('0' + i));
      REQUIRE(io.write(0, 1, a.data()) == 0);
      REQUIRE(io.flush() == 0);
      REQUIRE(io.write(1, 1, b.data()) == 0);
      REQUIRE(io.write(2, 1, c.data(), REQ_FUA) == 0);
      CHECK(dev->emu()->powercut()->pending() == 2);
      CHECK(io.write(8, 8, d.data()) == -EIO);
      CHECK(dev->emu()->powercut()->cut());
      // Everything after the cut fails, reads included, and nothing hangs.
      std::string back(4096, '\0');
      CHECK(io.read(0, 1, back.data()) == -EIO);
      CHECK(io.write(3, 1, a.data()) == -EIO);
      CHECK(io.flush() == -EIO);
    }
    CHECK(read_raw(img, 0, 4096) == block_of('A'));
    CHECK(read_raw(img, 4096, 4096) == (keep ? block_of('B') : std::string(4096, '\0')));
    CHECK(read_raw(img, 8192, 4096) == block_of('C'));
    CHECK(read_raw(img, 3 * 4096, 4096) == std::string(4096, '\0'));
    // The torn write: a prefix of its 512-byte blocks landed, never all of them.
    const std::string got = read_raw(img, 8 * 4096, 8 * 4096);
    std::string d;
    for (int i = 0; i < 8; i++) d += block_of(char('0' + i));
    size_t landed = 0;
    while (landed < got.size() && got[landed] == d[landed]) landed++;
    CHECK(landed % 512 == 0);
    CHECK(landed < d.size());
    CHECK(got.substr(landed) == std::string(got.size() - landed, '\0'));
  }
}

TEST_CASE("powercut: without a cut point the namespace only counts, and a bad option is refused in one line") {
  ScratchDir dir;
  const std::string img = dir.file("dev.img");
  auto dev = open_test_device("emu:" + img + ",size=1M,vwc,powercut=0", DeviceOptions{});
  BlockIo io(dev->bdev(), 4096);
  REQUIRE(io.init() == 0);
  const std::string a = block_of('A');
  std::string back(4096, '\0');
  for (int i = 0; i < 10; i++) REQUIRE(io.write(uint64_t(i), 1, a.data()) == 0);
  REQUIRE(io.read(3, 1, back.data()) == 0);
  CHECK(back == a);
  REQUIRE(io.flush() == 0);
  CHECK(dev->emu()->powercut()->commands() == 11);  // reads do not count
  CHECK(dev->emu()->powercut()->pending() == 0);
  DeviceSpec ds;
  CHECK(parse_device_spec("emu:" + img + ",tear", &ds).message().find("need powercut=N") != std::string::npos);
  CHECK(parse_device_spec("emu:" + img + ",powercut=x", &ds).message().find("powercut=x") != std::string::npos);
  CHECK(parse_device_spec("emu:" + img + ",keep=2,powercut=1", &ds).message().find("keep=2") != std::string::npos);
}

// The core of the issue: for each seed, cut the power at a random command of the workload;
// the image must mount (replaying the journal), keep every fsync'd and untouched file, and
// check clean.
TEST_CASE("powercut: a filesystem cut at a random command mounts, keeps fsync'd files and checks clean") {
  ScratchDir dir;
  const std::string base = dir.file("base.img"), img = dir.file("run.img");
  make_image(base, kImage);
  const uint64_t rounds = env_u64("BIOFS_POWERCUT_ROUNDS", 6), seed0 = env_u64("BIOFS_POWERCUT_SEED", 1);
  const uint64_t ops = env_u64("BIOFS_POWERCUT_OPS", 160);
  uint64_t cut_rounds = 0, promised = 0;
  for (uint64_t r = 0; r < rounds; r++) {
    const uint64_t seed = seed0 + r;
    copy_file(base, img);
    const uint64_t total = count_commands(img, seed, ops);
    Rng rng(seed ^ 0xC0FFEE);
    const uint64_t at = 1 + rng.below(total);
    std::string spec = "emu:" + img + ",vwc,powercut=" + std::to_string(at) + ",seed=" + std::to_string(seed);
    if (seed % 2) spec += ",tear";
    if (seed % 3 == 0) spec += ",keep=0.5";
    CAPTURE(spec);
    copy_file(base, img);
    Workload w(seed);
    bool cut = false;
    run_until_cut(spec, &w, ops, &cut);
    CHECK(cut);
    cut_rounds += cut;
    promised += w.synced_files();
    Mounted m = open_fs("emu:" + img);
    REQUIRE_MESSAGE(m.fs, "after the cut at command " << at << " of " << total << ": " << m.err);
    FsBackend be(*m.fs);
    const std::string broken = w.check(be);
    CHECK_MESSAGE(broken == "", "cut at command " << at << " of " << total << ": " << broken);
    std::map<std::string, std::string> tree;
    CHECK(walk_tree(*m.fs, "", disk::ROOT_INO, &tree) == 0);
    REQUIRE(m.fs->unmount() == 0);
    m.close();
    const std::string errs = fsck_errors(img);
    CHECK_MESSAGE(errs == "", "cut at command " << at << " of " << total << ": " << errs);
  }
  MESSAGE(rounds << " rounds, " << cut_rounds << " cut, " << promised << " fsync'd files checked");
}

// Replay is idempotent: a power cut at any command of the mount that replays a transaction,
// then a second recovery, gives the same filesystem as one uninterrupted recovery.
TEST_CASE("powercut: journal replay cut at every command recovers to the same filesystem") {
  ScratchDir dir;
  const std::string base = dir.file("base.img"), crashed = dir.file("crashed.img"), img = dir.file("run.img");
  make_image(base, kImage);
  {  // a committed transaction whose checkpoint never happened
    copy_file(base, crashed);
    Mounted m = open_fs("emu:" + crashed);
    REQUIRE(m.fs);
    FsBackend be(*m.fs);
    Workload w(99);
    REQUIRE(w.setup(be) == 0);
    for (int i = 0; i < 40; i++) REQUIRE(w.step(be) == 0);
    REQUIRE(m.fs->sync() == 0);
    for (int i = 0; i < 25; i++) REQUIRE(w.step(be) == 0);
    m.fs->crash_before_checkpoint();
    CHECK(m.fs->sync() == -EIO);
    m.fs->crash();
  }
  std::map<std::string, std::string> want;
  uint64_t replay_cmds = 0;
  {
    copy_file(crashed, img);
    Mounted m = open_fs("emu:" + img + ",vwc,powercut=0");
    REQUIRE_MESSAGE(m.fs, m.err);
    CHECK(m.fs->replayed() == 1);
    replay_cmds = m.dev->emu()->powercut()->commands();
    REQUIRE(walk_tree(*m.fs, "", disk::ROOT_INO, &want) == 0);
    REQUIRE(m.fs->unmount() == 0);
  }
  REQUIRE(want.size() > 10);
  REQUIRE(replay_cmds > 3);
  int mounted_anyway = 0;
  for (uint64_t at = 1; at <= replay_cmds; at++) {
    CAPTURE(at);
    copy_file(crashed, img);
    {
      Mounted m = open_fs("emu:" + img + ",vwc,powercut=" + std::to_string(at) + ",tear,seed=" + std::to_string(at));
      mounted_anyway += m.fs != nullptr;  // a cut in the superblock write may still leave a mount
      if (m.fs) m.fs->unmount();
    }
    Mounted m = open_fs("emu:" + img);
    REQUIRE_MESSAGE(m.fs, "replay cut at command " << at << " of " << replay_cmds << ": " << m.err);
    std::map<std::string, std::string> got;
    REQUIRE(walk_tree(*m.fs, "", disk::ROOT_INO, &got) == 0);
    CHECK_MESSAGE(got == want, "replay cut at command " << at << ": " << got.size() << " entries, want " << want.size());
    REQUIRE(m.fs->unmount() == 0);
    m.close();
    const std::string errs = fsck_errors(img);
    CHECK_MESSAGE(errs == "", "replay cut at command " << at << ": " << errs);
  }
  MESSAGE(replay_cmds << " cut points in the replaying mount");
}

// O_DSYNC / O_SYNC writes (Filesystem::write_durable, what the daemon does for them): durable
// when they return. An overwrite is one FUA write with no flush and, for O_DSYNC, no commit
// even when its times changed; an allocating write commits; a plain write, unflushed, is lost.
TEST_CASE("powercut: O_DSYNC and O_SYNC writes are durable when they return, an overwrite as one FUA write") {
  ScratchDir dir;
  const std::string img = dir.file("fs.img");
  make_image(img, kImage);
  const std::string base = block_of('a') + block_of('a') + block_of('a') + block_of('a');
  uint64_t ino = 0;
  struct stat before_cut{};
  {
    Mounted m = open_fs("emu:" + img + ",vwc,powercut=0");
    REQUIRE_MESSAGE(m.fs, m.err);
    EmuPowerCut* pc = m.dev->emu()->powercut();
    struct stat st{};
    REQUIRE(m.fs->mknod(disk::ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st) == 0);
    ino = st.st_ino;
    REQUIRE(m.fs->write(ino, 0, base.size(), base.data()) == ssize_t(base.size()));
    REQUIRE(m.fs->fsync(ino, false) == 0);

    // O_DSYNC append of block 4: allocates, so the journal commits (more than one command).
    uint64_t cmds = pc->commands();
    const std::string d = block_of('d');
    CHECK(m.fs->write_durable(ino, Kiocb{.ki_pos = 4 * 4096}, 4096, d.data(), true) == 4096);
    CHECK(pc->commands() - cmds > 1);

    // O_SYNC overwrite of block 2 in a new tick: its times must survive too, so it commits.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cmds = pc->commands();
    const std::string e = block_of('e');
    CHECK(m.fs->write_durable(ino, Kiocb{.ki_pos = 2 * 4096}, 4096, e.data(), false) == 4096);
    CHECK(pc->commands() - cmds > 1);
    REQUIRE(m.fs->getattr(ino, &before_cut) == 0);

    // O_DSYNC overwrite of block 0, its times stale (a new clock tick): one command, the FUA
    // write; the new times stay in the running transaction.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cmds = pc->commands();
    const std::string b = block_of('b');
    CHECK(m.fs->write_durable(ino, Kiocb{.ki_pos = 0}, 4096, b.data(), true) == 4096);
    CHECK(pc->commands() - cmds == 1);

    // A plain overwrite of block 1: not durable (no flush or commit follows).
    const std::string c = block_of('c');
    CHECK(m.fs->write(ino, 4096, 4096, c.data()) == 4096);

    pc->cut_now();
    m.fs->unmount();  // fails after the cut; nothing more reaches the image
    m.close();
  }
  Mounted m = open_fs("emu:" + img);
  REQUIRE_MESSAGE(m.fs, m.err);
  struct stat st{};
  REQUIRE(m.fs->getattr(ino, &st) == 0);
  CHECK(st.st_size == 5 * 4096);
  // The O_SYNC write's times, committed; the O_DSYNC write's were not (fdatasync rules).
  CHECK(st.st_mtim.tv_sec == before_cut.st_mtim.tv_sec);
  CHECK(st.st_mtim.tv_nsec == before_cut.st_mtim.tv_nsec);
  std::string back(5 * 4096, '\0');
  REQUIRE(m.fs->read(ino, 0, back.size(), back.data()) == ssize_t(back.size()));
  CHECK(back.substr(0, 4096) == block_of('b'));
  CHECK(back.substr(4096, 4096) == block_of('a'));  // the plain write was in the volatile cache
  CHECK(back.substr(2 * 4096, 4096) == block_of('e'));
  CHECK(back.substr(3 * 4096, 4096) == block_of('a'));
  CHECK(back.substr(4 * 4096, 4096) == block_of('d'));
  REQUIRE(m.fs->unmount() == 0);
}
