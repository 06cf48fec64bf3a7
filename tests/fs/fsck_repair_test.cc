// fsck repair (-p, -y): each class of damage is made on a populated filesystem on a RAM disk,
// repaired, checked clean afterwards, and every surviving file reads back its exact bytes.
// Preen refuses what needs -y (exit 4, nothing written). The fsck.biofs binary's exit codes.
#include <doctest/doctest.h>

#include "../pattern.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "blockcore/brd.h"
#include "tests/blockcore/test_brd.h"
#include "fs/filesystem.h"
#include "fs/fsck/fsck.h"
#include "fs_mount.h"
#include "fs/mkfs.h"
#include "fs/xattr_block.h"
#include "fsck_util.h"
#include "fuse_util.h"

using namespace biofs;
using namespace biofs::disk;
using biofs::test::collect_fsck;
using biofs::test::FsckRun;
using biofs::test::pattern;

namespace {

constexpr uint64_t kBs = 4096;

// A populated filesystem: files (one fragmented into an extent tree, one with attributes in an
// external xattr block), directories, a hard link, a long symlink; `files` holds every path's
// exact contents.
struct Rig {
  std::unique_ptr<BrdDevice> dev_owner = test::make_test_brd(32 << 20);
  BrdDevice& dev = *dev_owner;
  BlockIo io{dev.bdev(), 4096};
  SuperBlock sb{};
  std::map<std::string, std::string> files;
  std::map<std::string, uint64_t> ino;

  Rig() {
    REQUIRE(io.init() == 0);
    MkfsOptions mo;
    REQUIRE(make_filesystem(io, mo).message() == "");
    auto fs = test::mount_for_test(io);
    struct stat st;
    REQUIRE(fs->mkdir(ROOT_INO, "d", 0755, 0, 0, &st) == 0);
    ino["d"] = st.st_ino;
    REQUIRE(fs->mkdir(ino["d"], "sub", 0755, 0, 0, &st) == 0);
    ino["d/sub"] = st.st_ino;
    auto create = [&](uint64_t dir, const std::string& name, const std::string& path) {
      REQUIRE(fs->mknod(dir, name, S_IFREG | 0644, 0, 0, 0, &st) == 0);
      ino[path] = st.st_ino;
    };
    create(ROOT_INO, "a", "a");
    create(ROOT_INO, "b", "b");
    create(ino["d"], "c", "d/c");
    create(ino["d/sub"], "e", "d/sub/e");
    // a and b written block by block in turn: a's blocks alternate with b's, so a needs more
    // than four extents (a tree).
    files["a"] = pattern(40 * kBs, 1);
    files["b"] = pattern(40 * kBs + 123, 2);
    for (uint64_t i = 0; i < 41; i++)
      for (const char* f : {"a", "b"}) {
        const std::string& s = files[f];
        if (i * kBs >= s.size()) continue;
        const size_t n = std::min<size_t>(kBs, s.size() - i * kBs);
        REQUIRE(fs->write(ino[f], i * kBs, n, s.data() + i * kBs) == ssize_t(n));
      }
    files["d/c"] = pattern(5000, 3);
    files["d/sub/e"] = pattern(777, 4);
    REQUIRE(fs->write(ino["d/c"], 0, 5000, files["d/c"].data()) == 5000);
    REQUIRE(fs->write(ino["d/sub/e"], 0, 777, files["d/sub/e"].data()) == 777);
    REQUIRE(fs->link(ino["a"], ino["d"], "a-link", &st) == 0);
    files["d/a-link"] = files["a"];
    REQUIRE(fs->symlink(ROOT_INO, "s", std::string(200, 'y'), 0, 0, &st) == 0);
    for (int k = 0; k < 8; k++) REQUIRE(fs->setxattr(ino["b"], "user.b" + std::to_string(k), pattern(100, k), 0) == 0);
    REQUIRE(fs->unmount() == 0);
    REQUIRE(read_superblock(io, &sb) == "");
    REQUIRE((get_inode(ino["a"]).flags & INODE_EXTENT_TREE) != 0);
    REQUIRE((get_inode(ino["b"]).flags & INODE_XATTR_BLOCK) != 0);
    REQUIRE(check().r.errors == 0);
  }

  FsckRun check() { return collect_fsck(io); }
  FsckRun repair(FsckMode m) { return collect_fsck(io, m); }

  uint64_t inode_off(uint64_t n) const { return sb.inode_table_start * kBs + (n - 1) * INODE_SIZE; }
  Inode get_inode(uint64_t n) {
    Inode d;
    dev.peek(inode_off(n), &d, sizeof(d));
    return d;
  }
  void put_inode(uint64_t n, Inode d, bool fix_crc = true) {
    if (fix_crc) d.checksum = inode_crc(n, d);
    dev.poke(inode_off(n), &d, sizeof(d));
  }
  std::vector<uint8_t> get_block(uint64_t b) {
    std::vector<uint8_t> v(kBs);
    dev.peek(b * kBs, v.data(), kBs);
    return v;
  }
  void put_block(uint64_t b, std::vector<uint8_t> v, bool fix_crc = true) {
    if (fix_crc) set_block_crc(v.data(), kBs);
    dev.poke(b * kBs, v.data(), kBs);
  }
  // Sets or clears one bitmap bit (checksum kept valid).
  void set_bit(uint64_t start, uint64_t n, bool on) {
    const uint64_t bpb = bitmap_bits_per_block(kBs);
    auto v = get_block(start + n / bpb);
    uint8_t& byte = v[sizeof(BlockHeader) + (n % bpb) / 8];
    const uint8_t mask = uint8_t(1u << (n % 8));
    byte = on ? (byte | mask) : (byte & ~mask);
    put_block(start + n / bpb, v);
  }
  bool bit(uint64_t start, uint64_t n) {
    const uint64_t bpb = bitmap_bits_per_block(kBs);
    auto v = get_block(start + n / bpb);
    return (v[sizeof(BlockHeader) + (n % bpb) / 8] >> (n % 8)) & 1;
  }
  // The directory entry `name` in directory `dir`'s first block: its block and offset.
  std::pair<uint64_t, uint32_t> find_entry(uint64_t dir, const std::string& name) {
    const Inode d = get_inode(dir);
    REQUIRE(!(d.flags & INODE_EXTENT_TREE));
    for (unsigned x = 0; x < d.nr_extents; x++)
      for (uint64_t k = 0; k < d.extents[x].len; k++) {
        const uint64_t pblk = d.extents[x].pblk + k;
        auto v = get_block(pblk);
        for (uint32_t off = sizeof(DirBlock); off < kBs;) {
          const auto* e = reinterpret_cast<const DirEntry*>(v.data() + off);
          if (e->ino && std::string(reinterpret_cast<const char*>(e + 1), e->name_len) == name) return {pblk, off};
          off += e->rec_len;
        }
      }
    FAIL("no entry " << name);
    return {0, 0};
  }
  void kill_entry(uint64_t dir, const std::string& name) {  // as if it had never been made
    auto [pblk, off] = find_entry(dir, name);
    auto v = get_block(pblk);
    auto* e = reinterpret_cast<DirEntry*>(v.data() + off);
    e->ino = 0;
    e->name_len = 0;
    put_block(pblk, v);
  }

  // Mounts and reads every path in `expect` back; each must match exactly.
  void verify(const std::map<std::string, std::string>& expect) {
    auto fs = test::mount_for_test(io);
    for (const auto& kv : expect) {
      const std::string& path = kv.first;
      const std::string& want = kv.second;
      uint64_t at = ROOT_INO;
      struct stat st;
      for (size_t p = 0; p <= path.size();) {
        const size_t q = std::min(path.find('/', p), path.size());
        REQUIRE_MESSAGE(fs->lookup(at, path.substr(p, q - p), &st) == 0, path);
        at = st.st_ino;
        p = q + 1;
      }
      std::string got(want.size() + 10, '\0');
      const ssize_t n = fs->read(at, 0, got.size(), got.data());
      REQUIRE(n >= 0);
      got.resize(size_t(n));
      CHECK_MESSAGE(got == want, path);
    }
    REQUIRE(fs->unmount() == 0);
    const FsckRun c = check();
    CHECK_MESSAGE(c.r.errors == 0, c.text());
  }
  bool exists(const std::string& name, uint64_t dir = ROOT_INO) {
    auto fs = test::mount_for_test(io);
    struct stat st;
    const bool yes = fs->lookup(dir, name, &st) == 0;
    REQUIRE(fs->unmount() == 0);
    return yes;
  }
};

// -y repairs it (exit 1), a check afterwards is clean, a second -y finds nothing (exit 0).
FsckRun repair_yes(Rig& g) {
  FsckRun y = g.repair(FsckMode::yes);
  INFO(y.text());
  CHECK_FALSE(y.r.fatal);
  CHECK(y.r.repaired > 0);
  CHECK(y.r.errors == 0);
  CHECK(fsck_exit_code(y.r, FsckMode::yes) == 1);
  const FsckRun c = g.check();
  CHECK_MESSAGE(c.r.errors == 0, c.text());
  const FsckRun again = g.repair(FsckMode::yes);
  CHECK_MESSAGE(fsck_exit_code(again.r, FsckMode::yes) == 0, again.text());
  return y;
}

// -p refuses (exit 4), names -y, and leaves the damage as it was.
void preen_refuses(Rig& g, const std::string& names) {
  const FsckRun before = g.check();
  REQUIRE(before.r.errors > 0);
  const FsckRun p = g.repair(FsckMode::preen);
  INFO(p.text());
  CHECK(p.r.needs_yes > 0);
  CHECK(p.has("needs -y"));
  CHECK(p.has(names));
  CHECK_FALSE(p.r.changed);
  CHECK(fsck_exit_code(p.r, FsckMode::preen) == 4);
  CHECK(g.check().r.errors == before.r.errors);
}

}  // namespace

TEST_CASE("fsck repair: a clean filesystem needs nothing (exit 0, nothing written)") {
  Rig g;
  for (FsckMode m : {FsckMode::preen, FsckMode::yes}) {
    const FsckRun r = g.repair(m);
    CHECK_MESSAGE(r.lines.empty(), r.text());
    CHECK_FALSE(r.r.changed);
    CHECK(fsck_exit_code(r.r, m) == 0);
  }
  g.verify(g.files);
}

TEST_CASE("fsck repair: bitmap bits wrong both ways and free counts are preened") {
  Rig g;
  const Inode c = g.get_inode(g.ino["d/c"]);
  const uint64_t used = c.extents[0].pblk, unused = g.sb.block_count - 2;
  REQUIRE(g.bit(g.sb.block_bitmap_start, used));
  REQUIRE_FALSE(g.bit(g.sb.block_bitmap_start, unused));
  g.set_bit(g.sb.block_bitmap_start, used, false);
  g.set_bit(g.sb.block_bitmap_start, unused, true);
  g.set_bit(g.sb.inode_bitmap_start, g.ino["d/sub/e"] - 1, false);
  g.set_bit(g.sb.inode_bitmap_start, 50, true);
  SuperBlock s = g.sb;
  s.free_blocks += 7;
  s.free_inodes -= 3;
  s.checksum = superblock_crc(s);
  g.dev.poke(0, &s, sizeof(s));
  REQUIRE(g.check().r.errors >= 5);
  const FsckRun p = g.repair(FsckMode::preen);
  INFO(p.text());
  CHECK(p.has("block " + std::to_string(used) + " is in use but marked free"));
  CHECK(p.has("block " + std::to_string(unused) + " is marked in use but nothing owns it"));
  CHECK(p.has("inode " + std::to_string(g.ino["d/sub/e"]) + " is in use but marked free"));
  CHECK(p.has("inode 51 is marked in use but nothing owns it"));
  CHECK(p.has("superblock free counts"));
  CHECK(fsck_exit_code(p.r, FsckMode::preen) == 1);
  CHECK(g.check().r.errors == 0);
  CHECK(g.bit(g.sb.block_bitmap_start, used));
  CHECK_FALSE(g.bit(g.sb.block_bitmap_start, unused));
  g.verify(g.files);
}

TEST_CASE("fsck repair: a bitmap block with a bad checksum is rebuilt by preen") {
  Rig g;
  const uint8_t junk = 0x42;
  g.dev.poke(g.sb.block_bitmap_start * kBs + 3000, &junk, 1);
  const FsckRun p = g.repair(FsckMode::preen);
  INFO(p.text());
  CHECK(p.has("block bitmap block 1 fails its checksum"));
  CHECK(fsck_exit_code(p.r, FsckMode::preen) == 1);
  g.verify(g.files);
}

TEST_CASE("fsck repair: wrong link counts are preened") {
  Rig g;
  Inode a = g.get_inode(g.ino["a"]);
  a.nlink = 5;
  g.put_inode(g.ino["a"], a);
  Inode d = g.get_inode(g.ino["d"]);
  d.nlink = 9;
  g.put_inode(g.ino["d"], d);
  const FsckRun p = g.repair(FsckMode::preen);
  INFO(p.text());
  CHECK(p.has("inode " + std::to_string(g.ino["a"]) + " link count 5, should be 2: corrected"));
  CHECK(p.has("inode " + std::to_string(g.ino["d"]) + " link count 9, should be 3: corrected"));
  CHECK(fsck_exit_code(p.r, FsckMode::preen) == 1);
  CHECK(g.get_inode(g.ino["a"]).nlink == 2);
  g.verify(g.files);
}

TEST_CASE("fsck repair: an entry naming a freed inode needs -y, which removes it") {
  Rig g;
  const uint64_t b = g.ino["b"];
  Inode zero{};
  g.put_inode(b, zero, false);
  g.set_bit(g.sb.inode_bitmap_start, b - 1, false);
  preen_refuses(g, "entry 'b' names free inode " + std::to_string(b));
  const FsckRun y = repair_yes(g);
  CHECK(y.has("entry 'b' names free inode " + std::to_string(b) + ": entry removed"));
  CHECK(y.has("is marked in use but nothing owns it"));  // b's blocks, freed
  CHECK_FALSE(g.exists("b"));
  auto keep = g.files;
  keep.erase("b");
  g.verify(keep);
}

TEST_CASE("fsck repair: unreachable files and directories are reconnected in lost+found") {
  Rig g;
  g.kill_entry(g.ino["d"], "c");
  g.kill_entry(g.ino["d"], "sub");
  preen_refuses(g, "is in no directory");
  const FsckRun y = repair_yes(g);
  const std::string c = std::to_string(g.ino["d/c"]), sub = std::to_string(g.ino["d/sub"]);
  CHECK(y.has("there is no lost+found directory"));
  CHECK(y.has("inode " + c + " is in no directory: reconnected as /lost+found/#" + c));
  CHECK(y.has("directory " + sub + " is in no directory: reconnected as /lost+found/#" + sub));
  auto keep = g.files;
  keep.erase("d/c");
  keep.erase("d/sub/e");
  keep["lost+found/#" + c] = g.files["d/c"];
  keep["lost+found/#" + sub + "/e"] = g.files["d/sub/e"];
  g.verify(keep);
}

TEST_CASE("fsck repair: a block owned twice stays with its first owner and the later one is truncated") {
  Rig g;
  const uint64_t c = g.ino["d/c"], e = g.ino["d/sub/e"];
  REQUIRE(c < e);
  Inode ce = g.get_inode(c), ee = g.get_inode(e);
  ee.extents[0].pblk = ce.extents[0].pblk;  // e's only block is now c's first block too
  g.put_inode(e, ee);
  REQUIRE(g.check().has("claimed twice"));
  preen_refuses(g, "claimed twice");
  const FsckRun y = repair_yes(g);
  CHECK(y.has("inode " + std::to_string(e) + " truncated at file block 0"));
  CHECK(g.get_inode(e).size == 0);
  auto keep = g.files;
  keep["d/sub/e"] = "";
  g.verify(keep);
}

TEST_CASE("fsck repair: a deep extent tree is clean, and the deep tree feature missing from the superblock is set by -y") {
  // 1 KiB blocks: 3000 single-block extents take a root over index nodes over leaves.
  std::unique_ptr<BrdDevice> dev_owner;
  REQUIRE(BrdDevice::create(16 << 20, &dev_owner).ok());
  BrdDevice& dev = *dev_owner;
  BlockIo io{dev.bdev(), 4096};
  MkfsOptions mo;
  mo.block_size = 1024;
  REQUIRE(make_filesystem(io, mo).message() == "");
  const std::string block = pattern(1024, 9);
  {
    auto fs = test::mount_for_test(io);
    struct stat st;
    REQUIRE(fs->mknod(ROOT_INO, "deep", S_IFREG | 0644, 0, 0, 0, &st) == 0);
    for (uint64_t i = 0; i < 3000; i++) REQUIRE(fs->write(st.st_ino, 2 * i * 1024, 1024, block.data()) == 1024);
    REQUIRE(fs->unmount() == 0);
  }
  SuperBlock s;
  dev.peek(0, &s, sizeof(s));
  REQUIRE(s.magic == SB_MAGIC);
  REQUIRE((s.feature_incompat & FEATURE_INCOMPAT_DEEP_EXTENTS) != 0);
  const FsckRun clean = collect_fsck(io);
  CHECK_MESSAGE(clean.r.errors == 0, clean.text());
  s.feature_incompat &= ~FEATURE_INCOMPAT_DEEP_EXTENTS;
  s.checksum = superblock_crc(s);
  dev.poke(0, &s, sizeof(s));
  CHECK(collect_fsck(io).has("the superblock lacks the deep extent feature"));
  const FsckRun y = collect_fsck(io, FsckMode::yes);
  INFO(y.text());
  CHECK(y.has("feature set"));
  CHECK(collect_fsck(io).r.errors == 0);
  auto fs = test::mount_for_test(io);
  struct stat st;
  REQUIRE(fs->lookup(ROOT_INO, "deep", &st) == 0);
  for (uint64_t i = 0; i < 3000; i += 97) {
    std::string got(2048, '\1');
    REQUIRE(fs->read(st.st_ino, 2 * i * 1024, 2048, got.data()) == 2048);
    CHECK(got == block + std::string(1024, '\0'));
  }
}

TEST_CASE("fsck repair: a damaged inline xattr area is cut after its last whole entry, an overlong symlink cut") {
  Rig g;
  {
    auto fs = test::mount_for_test(g.io);
    REQUIRE(fs->setxattr(g.ino["d/c"], "user.k", "v1", 0) == 0);
    REQUIRE(fs->unmount() == 0);
  }
  Inode c = g.get_inode(g.ino["d/c"]);
  REQUIRE(c.xattr_len == 10);
  c.xattr_len = 17;  // a second entry that runs past the end
  c.xattr[10] = 5;
  c.xattr[11] = 9;
  g.put_inode(g.ino["d/c"], c);
  // And the long symlink (a target in its own block) says it is longer than a target can be.
  struct stat st;
  {
    auto fs = test::mount_for_test(g.io);
    REQUIRE(fs->lookup(ROOT_INO, "s", &st) == 0);
    REQUIRE(fs->unmount() == 0);
  }
  Inode s = g.get_inode(st.st_ino);
  REQUIRE(s.size == 200);
  s.size = 5000;
  g.put_inode(st.st_ino, s);
  preen_refuses(g, "inline xattr area is damaged");
  CHECK(g.check().has("symlink " + std::to_string(st.st_ino) + " has size 5000"));
  repair_yes(g);
  auto fs = test::mount_for_test(g.io);
  std::string v;
  CHECK(fs->getxattr(g.ino["d/c"], "user.k", &v) >= 0);
  CHECK(v == "v1");
  REQUIRE(fs->unmount() == 0);
  g.verify(g.files);
}

TEST_CASE("fsck repair: an inode with a bad checksum is cleared with its entries") {
  Rig g;
  const uint64_t b = g.ino["b"];
  const uint8_t junk = 0x99;
  g.dev.poke(g.inode_off(b) + 8, &junk, 1);
  preen_refuses(g, "inode " + std::to_string(b) + " fails its checksum");
  const FsckRun y = repair_yes(g);
  CHECK(y.has("inode " + std::to_string(b) + " fails its checksum: cleared"));
  CHECK(y.has("entry 'b' names inode " + std::to_string(b) + ", which was cleared"));
  CHECK_FALSE(g.exists("b"));
  auto keep = g.files;
  keep.erase("b");
  g.verify(keep);
}

TEST_CASE("fsck repair: a directory block with a bad checksum is emptied and what it named reconnected") {
  Rig g;
  const uint64_t sub = g.ino["d/sub"];
  const uint64_t pblk = g.get_inode(sub).extents[0].pblk;
  const uint8_t junk = 0x5a;
  g.dev.poke(pblk * kBs + 100, &junk, 1);
  preen_refuses(g, "fails its checksum");
  const FsckRun y = repair_yes(g);
  const std::string e = std::to_string(g.ino["d/sub/e"]);
  CHECK(y.has("inode " + e + " is in no directory: reconnected as /lost+found/#" + e));
  auto keep = g.files;
  keep.erase("d/sub/e");
  keep["lost+found/#" + e] = g.files["d/sub/e"];
  g.verify(keep);
}

TEST_CASE("fsck repair: a bad primary superblock is restored from the backup by -y") {
  Rig g;
  const char junk[] = "garbage";
  g.dev.poke(offsetof(SuperBlock, label), junk, sizeof(junk));  // the checksum fails
  preen_refuses(g, "primary superblock");
  const FsckRun y = repair_yes(g);
  CHECK(y.has("primary superblock: superblock checksum mismatch: restored from the backup"));
  SuperBlock now;
  REQUIRE(read_superblock(g.io, &now, false) == "");
  CHECK(std::memcmp(now.uuid, g.sb.uuid, 16) == 0);
  g.verify(g.files);
}

TEST_CASE("fsck repair: a primary superblock without its magic is found again from the backup by -y") {
  Rig g;
  const uint64_t zero = 0;
  g.dev.poke(0, &zero, sizeof(zero));
  const FsckRun n = g.check();  // -n looks for the backup as -y does, and says what -y would do
  INFO(n.text());
  CHECK_FALSE(n.r.fatal);
  CHECK(n.has("primary superblock: not a biofs filesystem (bad magic)"));
  CHECK(n.has("using the backup superblock"));
  CHECK(fsck_exit_code(n.r, FsckMode::check) == 4);
  const FsckRun p = g.repair(FsckMode::preen);
  INFO(p.text());
  CHECK(p.has("primary superblock: not a biofs filesystem (bad magic) (needs -y: restored from the backup)"));
  CHECK_FALSE(p.r.changed);
  CHECK(fsck_exit_code(p.r, FsckMode::preen) == 4);
  repair_yes(g);
  g.verify(g.files);
}

TEST_CASE("fsck repair: preen replays a committed journal transaction and frees orphans") {
  Rig g;
  auto fs = test::mount_for_test(g.io);
  struct stat st;
  REQUIRE(fs->mknod(ROOT_INO, "gone", S_IFREG | 0644, 0, 0, 0, &st) == 0);
  const uint64_t gone = st.st_ino;
  REQUIRE(fs->write(gone, 0, 3 * kBs, pattern(3 * kBs, 9).data()) == ssize_t(3 * kBs));
  REQUIRE(fs->unlink(ROOT_INO, "gone") == 0);  // still looked up: an orphan
  REQUIRE(fs->mknod(ROOT_INO, "new", S_IFREG | 0644, 0, 0, 0, &st) == 0);
  const std::string body = pattern(9000, 7);
  REQUIRE(fs->write(st.st_ino, 0, body.size(), body.data()) == ssize_t(body.size()));
  fs->crash_before_checkpoint();
  REQUIRE(fs->sync() == -EIO);  // committed in the journal, not yet home
  fs->crash();
  fs.reset();
  const FsckRun before = g.check();
  CHECK(before.has("journal holds a committed transaction"));
  const FsckRun p = g.repair(FsckMode::preen);
  INFO(p.text());
  CHECK(p.has("journal: replayed 1 committed transaction"));
  CHECK(p.has("inode " + std::to_string(gone) + " is an orphan (unlinked while open): freed"));
  CHECK(p.r.needs_yes == 0);
  CHECK(fsck_exit_code(p.r, FsckMode::preen) == 1);
  const FsckRun c = g.check();
  CHECK_MESSAGE(c.r.errors == 0, c.text());
  CHECK_MESSAGE(c.r.warnings == 0, c.text());
  auto keep = g.files;
  keep["new"] = body;
  g.verify(keep);
}

TEST_CASE("fsck repair: cancelled before the writes, it writes nothing and exits 32") {
  Rig g;
  Inode a = g.get_inode(g.ino["a"]);
  a.nlink = 7;
  g.put_inode(g.ino["a"], a);
  std::vector<uint8_t> before(g.sb.block_count * kBs), after(before.size());
  g.dev.peek(0, before.data(), before.size());
  std::atomic<bool> cancel{true};
  const FsckResult r = collect_fsck(g.io, FsckMode::yes, &cancel).r;
  CHECK(r.cancelled);
  CHECK_FALSE(r.changed);
  CHECK(fsck_exit_code(r, FsckMode::yes) == 32);
  g.dev.peek(0, after.data(), after.size());
  CHECK(after == before);
  cancel = false;
  repair_yes(g);
  g.verify(g.files);
}

TEST_CASE("fsck repair: damage at random never crashes or loops, and -y leaves a clean filesystem") {
  Rig g;
  std::vector<uint8_t> pristine(g.sb.block_count * kBs);
  g.dev.peek(0, pristine.data(), pristine.size());
  const uint64_t itab = g.sb.inode_table_start;
  // The blocks to damage: the superblock, the first inode table block, directory blocks, an
  // extent tree root, an xattr block, both bitmaps, the journal superblock.
  const std::vector<uint64_t> targets = {0, itab, itab, itab, g.get_inode(ROOT_INO).extents[0].pblk,
                                         g.get_inode(g.ino["d"]).extents[0].pblk,
                                         g.get_inode(g.ino["d/sub"]).extents[0].pblk,
                                         g.get_inode(g.ino["a"]).extent_root,
                                         xattr::block_of(g.get_inode(g.ino["b"])), g.sb.block_bitmap_start,
                                         g.sb.inode_bitmap_start, g.sb.journal_start};
  std::mt19937_64 rng(20261130);
  int fixed = 0;
  const int rounds = getenv("BIOFS_FSCK_ROUNDS") ? atoi(getenv("BIOFS_FSCK_ROUNDS")) : 60;
  for (int round = 0; round < rounds; round++) {
    g.dev.poke(0, pristine.data(), pristine.size());
    // A byte, or a 64-bit field set to a random or a small value; checksums made valid again
    // most of the time, so the damage reaches the structure checks.
    const bool fix_crc = round % 4 != 0;
    for (int k = 0; k < 1 + int(rng() % 4); k++) {
      const uint64_t blk = targets[rng() % targets.size()];
      auto v = g.get_block(blk);
      const size_t span = blk == 0 ? 508 : blk == itab ? 16 * INODE_SIZE : kBs;
      const size_t off = (blk == itab ? 0 : 16) + rng() % (span - (blk == itab ? 0 : 16) - 8);
      switch (rng() % 3) {
        case 0: v[off] = uint8_t(rng()); break;
        case 1: { const uint64_t x = rng(); std::memcpy(&v[off & ~size_t(7)], &x, 8); break; }
        default: { const uint64_t x = rng() % 3 ? rng() % 64 : UINT64_MAX - rng() % 4; std::memcpy(&v[off & ~size_t(7)], &x, 8); }
      }
      g.put_block(blk, v, false);
      if (!fix_crc) continue;
      if (blk == 0) {
        SuperBlock s;
        g.dev.peek(0, &s, sizeof(s));
        s.checksum = superblock_crc(s);
        g.dev.poke(0, &s, sizeof(s));
      } else if (blk == itab) {
        const uint64_t n = 1 + off / INODE_SIZE;
        g.put_inode(n, g.get_inode(n));
      } else {
        g.put_block(blk, g.get_block(blk));
      }
    }
    // Preen first: it repairs everything, or writes nothing at all.
    std::vector<uint8_t> damaged(pristine.size()), after(pristine.size());
    g.dev.peek(0, damaged.data(), damaged.size());
    const FsckRun p = g.repair(FsckMode::preen);
    if (p.r.needs_yes) {
      g.dev.peek(0, after.data(), after.size());
      CHECK_MESSAGE(after == damaged, p.text());
      CHECK(fsck_exit_code(p.r, FsckMode::preen) == 4);
    } else if (!p.r.fatal) {
      CHECK_MESSAGE(p.r.errors == 0, p.text());
    }
    const FsckRun y = g.repair(FsckMode::yes);
    INFO("round " << round << "\n" << y.text());
    if (getenv("BIOFS_FSCK_SHOW")) MESSAGE("round " << round << "\n" << y.text());
    if (y.r.fatal) continue;  // e.g. a superblock with no usable backup: nothing to repair
    CHECK(y.r.errors == 0);
    const FsckRun c = g.check();
    CHECK_MESSAGE(c.r.errors == 0, c.text());
    fixed += y.r.repaired > 0;
    std::string err;
    MountOptions o;
    o.commit_interval_s = 0;
    std::unique_ptr<Filesystem> fs;
    err = Filesystem::mount(g.io, o, &fs).message();
    CHECK_MESSAGE(fs, err);
    if (fs) CHECK(fs->unmount() == 0);
    const FsckRun again = g.repair(FsckMode::yes);
    CHECK_MESSAGE(fsck_exit_code(again.r, FsckMode::yes) == 0, again.text());
  }
  CHECK(fixed > rounds / 4);
}

// ---- the binary --------------------------------------------------------------------------------

namespace {

int run_fsck(const std::string& args, std::string* out = nullptr) {
  return test::run(test::kBin + "/fsck.biofs " + args, out);
}

}  // namespace

TEST_CASE("fsck repair: fsck.biofs exit codes for -n, -p and -y") {
  Rig g;
  const uint64_t b = g.ino["b"];
  Inode zero{};
  g.put_inode(b, zero, false);
  g.set_bit(g.sb.inode_bitmap_start, b - 1, false);
  char path[] = "/tmp/biofs-fsck-repair-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::vector<uint8_t> img(g.sb.block_count * kBs);
  g.dev.peek(0, img.data(), img.size());
  REQUIRE(write(fd, img.data(), img.size()) == ssize_t(img.size()));
  close(fd);
  const std::string dev = std::string("emu:") + path;
  std::string out;
  CHECK(run_fsck("", &out) == 16);
  CHECK(run_fsck("-n -y " + dev, &out) == 16);
  CHECK(run_fsck("-x " + dev, &out) == 16);
  CHECK(run_fsck("-n /nonexistent/biofs.img", &out) == 8);
  CHECK(run_fsck("-n " + dev, &out) == 4);
  CHECK(out.find("names free inode") != std::string::npos);
  CHECK(run_fsck("-p " + dev, &out) == 4);
  CHECK(out.find("need fsck.biofs -y") != std::string::npos);
  CHECK(run_fsck("-y " + dev, &out) == 1);
  CHECK(out.find("entry removed") != std::string::npos);
  CHECK(run_fsck("-n " + dev, &out) == 0);
  CHECK(out.find("clean") != std::string::npos);
  CHECK(run_fsck("-y " + dev, &out) == 0);
  CHECK(run_fsck("-a " + dev, &out) == 0);
  unlink(path);
}
