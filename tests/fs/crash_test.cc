// Crash consistency: every write the filesystem issues is logged (brd's write observer); a
// crash at write k is the mkfs image plus the first k writes (brd has no volatile cache, so a
// completed write is durable). For many k: the image must mount (replaying the journal), fsck
// must find no error, and every file whose fsync had returned before write k must read back
// whole.
#include <doctest/doctest.h>

#include <linux/falloc.h>

#include <cstring>
#include <string>
#include <vector>

#include "blockcore/brd.h"
#include "fs/filesystem.h"
#include "fs/fsck/fsck.h"
#include "fs_mount.h"
#include "fs/mkfs.h"
#include "fsck_util.h"

using namespace biofs;

namespace {

constexpr uint64_t kDev = 16 << 20;

struct Write {
  uint64_t off;
  std::string data;
};

struct Synced {
  size_t log_len;     // writes that had completed when fsync returned
  std::string name;
  std::string data;
  bool prefix = false;  // appended to later: what was synced is a prefix of what is there
};

std::string content(int i) {
  std::string s(size_t(500 + (i * 3779) % 20000), '\0');
  for (size_t k = 0; k < s.size(); k++) s[k] = char('a' + (k * 7 + size_t(i)) % 26);
  return s;
}

// A RAM disk with a filesystem made on it; a short journal, so that commits come often.
struct Formatted {
  std::unique_ptr<BrdDevice> dev;
  BlockIo io;
  Formatted() : dev(make()), io(dev->bdev(), 4096) {
    REQUIRE(io.init() == 0);
    MkfsOptions mo;
    mo.journal_blocks = 64;
    REQUIRE(make_filesystem(io, mo).message() == "");
  }
  static std::unique_ptr<BrdDevice> make() {
    std::unique_ptr<BrdDevice> d;
    REQUIRE(BrdDevice::create(kDev, &d).ok());
    return d;
  }
};

}  // namespace

TEST_CASE("crash: every prefix of the write stream mounts, checks clean, and keeps fsync'd files") {
  Formatted fresh;
  BrdDevice& dev = *fresh.dev;
  BlockIo& io = fresh.io;
  std::string base(kDev, '\0');
  dev.peek(0, base.data(), kDev);

  std::vector<Write> log;
  dev.set_write_observer([&](uint64_t off, const uint8_t* d, uint32_t len) {
    log.push_back({off, std::string(reinterpret_cast<const char*>(d), len)});
  });
  std::vector<Synced> synced;
  {
    auto fs = test::mount_for_test(io);
    struct stat st;
    REQUIRE(fs->mkdir(disk::ROOT_INO, "d", 0755, 0, 0, &st) == 0);
    const uint64_t d = st.st_ino;
    std::vector<std::pair<std::string, std::string>> pending;
    // "frag" grows by one block per round, interleaved with the other files' blocks, so its
    // extent map moves into an extent tree part-way.
    REQUIRE(fs->mknod(disk::ROOT_INO, "frag", S_IFREG | 0644, 0, 0, 0, &st) == 0);
    const uint64_t frag = st.st_ino;
    std::string frag_data;
    for (int i = 0; i < 60; i++) {
      const std::string blk = content(1000 + i).substr(0, 4096) + std::string(4096, char('A' + i % 26));
      REQUIRE(fs->write(frag, frag_data.size(), 4096, blk.data()) == 4096);
      frag_data += blk.substr(0, 4096);
      std::string name = "f" + std::to_string(i);
      REQUIRE(fs->mknod(d, name, S_IFREG | 0644, 0, 0, 0, &st) == 0);
      const uint64_t ino = st.st_ino;
      std::string data = content(i);
      REQUIRE(fs->write(ino, 0, data.size(), data.data()) == ssize_t(data.size()));
      if (i % 5 == 2) {  // rename (before it is synced)
        REQUIRE(fs->rename(d, name, d, name + "r", 0) == 0);
        name += "r";
      }
      if (i % 6 == 4) {  // truncate down (before it is synced)
        struct stat a{}, out;
        a.st_size = off_t(data.size() / 2);
        REQUIRE(fs->setattr(ino, SETATTR_SIZE, a, &out) == 0);
        data.resize(data.size() / 2);
      }
      pending.push_back({name, data});
      if (i % 7 == 3) {  // remove an older, unsynced-or-synced file: frees blocks for reuse
        std::string victim = "f" + std::to_string(i - 3);
        if ((i - 3) % 5 == 2) victim += "r";
        REQUIRE(fs->unlink(d, victim) == 0);
        std::erase_if(synced, [&](const Synced& s) { return s.name == victim; });
        std::erase_if(pending, [&](const auto& p) { return p.first == victim; });
      }
      if (i % 4 == 1) {
        REQUIRE(fs->fsync(st.st_ino, false) == 0);
        for (auto& [n, dd] : pending) synced.push_back({log.size(), n, dd});
        pending.clear();
        synced.push_back({log.size(), "/frag", frag_data, true});
      }
    }
    REQUIRE(fs->unmount() == 0);
  }
  dev.set_write_observer(nullptr);
  REQUIRE(log.size() > 100);
  MESSAGE(log.size() << " writes logged, " << synced.size() << " files fsync'd");
  if (getenv("CRASH_DUMP"))
    for (size_t w = 0; w < 120 && w < log.size(); w++)
      printf("w%zu blk %lu len %zu magic %08x\n", w, (unsigned long)(log[w].off / 4096), log[w].data.size(),
             *reinterpret_cast<const uint32_t*>(log[w].data.data()));

  // Every prefix: each is a crash point. `state` is the image after the first k writes; the
  // one RAM disk gets all of it before each mount (the last mount's replay and fsck wrote into
  // it), so that a prefix costs a copy, not a new 16 MiB of page faults.
  int checked = 0;
  std::unique_ptr<BrdDevice> img_owner;
  REQUIRE(BrdDevice::create(kDev, &img_owner).ok());
  BrdDevice& img = *img_owner;
  std::string state = base;
  for (size_t k = 0; k <= log.size(); k++) {
    if (k > 0) state.replace(log[k - 1].off, log[k - 1].data.size(), log[k - 1].data);
    img.poke(0, state.data(), kDev);
    BlockIo iio(img.bdev(), 4096);
    REQUIRE(iio.init() == 0);
    std::string err;
    MountOptions o;
    o.commit_interval_s = 0;
    std::unique_ptr<Filesystem> fs;
    err = Filesystem::mount(iio, o, &fs).message();
    REQUIRE_MESSAGE(fs, "crash after write " << k << ": " << err);
    // Files fsync'd before the crash are whole.
    struct stat st;
    uint64_t d = 0;
    if (fs->lookup(disk::ROOT_INO, "d", &st) == 0) d = st.st_ino;
    for (const Synced& s : synced) {
      if (s.log_len > k) continue;
      const bool top = s.name[0] == '/';
      REQUIRE_MESSAGE((top || d != 0), "crash after write " << k << ": directory d lost");
      REQUIRE_MESSAGE(fs->lookup(top ? disk::ROOT_INO : d, top ? s.name.substr(1) : s.name, &st) == 0,
                      "crash after write " << k << ": " << s.name << " lost");
      std::string got(s.data.size() + (s.prefix ? 0 : 10), '\0');
      const ssize_t n = fs->read(st.st_ino, 0, got.size(), got.data());
      got.resize(n < 0 ? 0 : size_t(n));
      REQUIRE_MESSAGE(got == s.data, "crash after write " << k << ": " << s.name << " has the wrong contents");
    }
    REQUIRE(fs->unmount() == 0);
    fs.reset();
    const test::FsckRun f = test::collect_fsck(iio);
    REQUIRE_MESSAGE(f.r.errors == 0, "crash after write " << k << ": " << f.text("; "));
    checked++;
  }
  MESSAGE(checked << " crash points checked");
}

// A collapse and an insert range (File::shift_range) are one journal transaction each: at every
// write of their stream the image mounts, fsck finds nothing, and the file is as it was before
// the operation or as it is after it; once the fsync after one has returned, after it.
TEST_CASE("crash: a collapse or an insert range leaves the file before or after, at every write") {
  Formatted fresh;
  BrdDevice& dev = *fresh.dev;
  BlockIo& io = fresh.io;
  // The file: 80 one-block extents (an extent tree), interleaved with another file's blocks.
  std::vector<std::string> states(1);
  {
    auto fs = test::mount_for_test(io);
    struct stat st;
    REQUIRE(fs->mknod(disk::ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &st) == 0);
    const uint64_t f = st.st_ino;
    REQUIRE(fs->mknod(disk::ROOT_INO, "gap", S_IFREG | 0644, 0, 0, 0, &st) == 0);
    for (int i = 0; i < 80; i++) {
      const std::string b = content(i).substr(0, 4096) + std::string(4096, char('a' + i % 26));
      REQUIRE(fs->write(f, uint64_t(i) * 4096, 4096, b.data()) == 4096);
      REQUIRE(fs->write(st.st_ino, uint64_t(i) * 4096, 4096, b.data()) == 4096);
      states[0] += b.substr(0, 4096);
    }
    REQUIRE(fs->unmount() == 0);
  }
  std::string base(kDev, '\0');
  dev.peek(0, base.data(), kDev);
  std::vector<Write> log;
  dev.set_write_observer([&](uint64_t off, const uint8_t* d, uint32_t len) {
    log.push_back({off, std::string(reinterpret_cast<const char*>(d), len)});
  });
  std::vector<size_t> synced_at;  // log length when each operation's fsync returned
  {
    auto fs = test::mount_for_test(io);
    struct stat st;
    REQUIRE(fs->lookup(disk::ROOT_INO, "f", &st) == 0);
    const uint64_t f = st.st_ino;
    states.push_back(states.back());
    REQUIRE(fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 10 * 4096, 30 * 4096) == 0);
    states.back().erase(10 * 4096, 30 * 4096);
    REQUIRE(fs->fsync(f, false) == 0);
    synced_at.push_back(log.size());
    states.push_back(states.back());
    REQUIRE(fs->fallocate(f, FALLOC_FL_INSERT_RANGE, 5 * 4096, 20 * 4096) == 0);
    states.back().insert(5 * 4096, std::string(20 * 4096, '\0'));
    REQUIRE(fs->fsync(f, false) == 0);
    synced_at.push_back(log.size());
    REQUIRE(fs->unmount() == 0);
  }
  dev.set_write_observer(nullptr);
  REQUIRE(synced_at[0] > 0);
  std::unique_ptr<BrdDevice> img_owner;
  REQUIRE(BrdDevice::create(kDev, &img_owner).ok());
  BrdDevice& img = *img_owner;
  std::string state = base;
  size_t seen[3] = {0, 0, 0};
  for (size_t k = 0; k <= log.size(); k++) {
    if (k > 0) state.replace(log[k - 1].off, log[k - 1].data.size(), log[k - 1].data);
    img.poke(0, state.data(), kDev);
    BlockIo iio(img.bdev(), 4096);
    REQUIRE(iio.init() == 0);
    auto fs = test::mount_for_test(iio);
    struct stat st;
    REQUIRE(fs->lookup(disk::ROOT_INO, "f", &st) == 0);
    std::string got(states[0].size() + 30 * 4096, '\0');
    const ssize_t n = fs->read(st.st_ino, 0, got.size(), got.data());
    got.resize(n < 0 ? 0 : size_t(n));
    // Which state it is; no older than the last fsync that had returned, no newer than the next.
    const size_t oldest = k >= synced_at[1] ? 2 : k >= synced_at[0] ? 1 : 0;
    const size_t newest = k >= synced_at[0] ? 2 : 1;
    size_t which = 3;
    for (size_t s = oldest; s <= newest; s++)
      if (got == states[s]) which = s;
    REQUIRE_MESSAGE(which < 3, "crash after write " << k << ": the file is neither before nor after (" << got.size()
                                                   << " bytes)");
    seen[which]++;
    REQUIRE(fs->unmount() == 0);
    fs.reset();
    const test::FsckRun fr = test::collect_fsck(iio);
    REQUIRE_MESSAGE(fr.r.errors == 0, "crash after write " << k << ": " << fr.text("; "));
  }
  MESSAGE(log.size() << " crash points: before " << seen[0] << ", after the collapse " << seen[1]
                     << ", after the insert " << seen[2]);
  CHECK(seen[0] > 0);  // each state was met at some crash point: the stream was cut inside both
  CHECK(seen[1] > 0);
  CHECK(seen[2] > 0);
}
