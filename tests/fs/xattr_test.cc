// Extended attributes beyond the inline area: the external xattr block (BXTR) on brd. Names of
// 255 bytes, values of thousands, many attributes spilling to the block, the block shrinking
// and freed, kept across a remount and a journal replay, freed with its inode, XATTR_CREATE /
// XATTR_REPLACE, ENOSPC only when inline area and block are full, an image from before the
// block getting its feature bit on first use; fsck clean after each, and a damaged block found
// by fsck and repaired by -y.
#include <doctest/doctest.h>

#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "blockcore/brd.h"
#include "tests/blockcore/test_brd.h"
#include "fs/filesystem.h"
#include "fs_mount.h"
#include "fs/fsck/fsck.h"
#include "fs/mkfs.h"
#include "fs/xattr_block.h"
#include "fsck_util.h"

using namespace biofs;
using namespace biofs::disk;
using biofs::test::collect_fsck;
using biofs::test::FsckRun;

namespace {

constexpr uint32_t kBs = 4096;

struct Rig {
  std::unique_ptr<BrdDevice> dev_owner = test::make_test_brd(64 << 20);  // a journal big enough that a test's few operations share a transaction
  BrdDevice& dev = *dev_owner;
  BlockIo io{dev.bdev(), 4096};
  std::unique_ptr<Filesystem> fs;
  SuperBlock sb{};

  explicit Rig(bool old_image = false) {
    REQUIRE(io.init() == 0);
    REQUIRE(make_filesystem(io, MkfsOptions{}, &sb).message() == "");
    if (old_image) {  // as an older mkfs made it: no xattr block feature
      sb.feature_incompat &= ~FEATURE_INCOMPAT_XATTR_BLOCK;
      sb.checksum = superblock_crc(sb);
      dev.poke(0, &sb, sizeof(sb));
      dev.poke(sb.backup_sb_block * kBs, &sb, sizeof(sb));
    }
    mount();
  }
  void mount() { fs = test::mount_for_test(io); }
  void unmount() {
    REQUIRE(fs->unmount() == 0);
    fs.reset();
  }
  void remount() {
    unmount();
    mount();
  }
  uint64_t create(const std::string& name) {
    struct stat st;
    REQUIRE(fs->mknod(ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st) == 0);
    return st.st_ino;
  }
  std::map<std::string, std::string> all(uint64_t ino) {
    std::string names;
    REQUIRE(fs->listxattr(ino, &names) == 0);
    std::map<std::string, std::string> out;
    for (size_t p = 0; p < names.size();) {
      const size_t end = names.find('\0', p);
      REQUIRE(end != std::string::npos);
      const std::string n = names.substr(p, end - p);
      std::string v;
      REQUIRE(fs->getxattr(ino, n, &v) == 0);
      CHECK_MESSAGE(out.emplace(n, v).second, "listed twice: " << n);
      p = end + 1;
    }
    return out;
  }
  uint64_t free_blocks() {
    struct statvfs st;
    REQUIRE(fs->statfs(&st) == 0);
    return st.f_bfree;
  }
  blkcnt_t st_blocks(uint64_t ino) {
    struct stat st;
    REQUIRE(fs->getattr(ino, &st) == 0);
    return st.st_blocks;
  }
  // What is on the device (after a commit: its blocks are home).
  uint64_t inode_off(uint64_t n) const { return sb.inode_table_start * kBs + (n - 1) * INODE_SIZE; }
  Inode disk_inode(uint64_t n) {
    Inode d;
    dev.peek(inode_off(n), &d, sizeof(d));
    return d;
  }
  void put_inode(uint64_t n, Inode d) {
    d.checksum = inode_crc(n, d);
    dev.poke(inode_off(n), &d, sizeof(d));
  }
  std::vector<uint8_t> block(uint64_t b) {
    std::vector<uint8_t> v(kBs);
    dev.peek(b * kBs, v.data(), kBs);
    return v;
  }
  void put_block(uint64_t b, std::vector<uint8_t> v, bool fix_crc) {
    if (fix_crc) set_block_crc(v.data(), kBs);
    dev.poke(b * kBs, v.data(), kBs);
  }
  bool bit(uint64_t b) {
    const uint64_t bpb = bitmap_bits_per_block(kBs);
    auto v = block(sb.block_bitmap_start + b / bpb);
    return (v[sizeof(BlockHeader) + (b % bpb) / 8] >> (b % 8)) & 1;
  }
  FsckRun fsck(FsckMode m = FsckMode::check) { return collect_fsck(io, m); }
  // Unmounts and checks: no errors, no warnings.
  void clean() {
    if (fs) unmount();
    const FsckRun f = fsck();
    CHECK_MESSAGE(f.r.errors == 0, f.text());
    CHECK_MESSAGE(f.r.warnings == 0, f.text());
  }
};

std::string value(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = char((i * 2654435761u + seed * 40503u) >> 9);
  return s;
}

// `n` attributes user.attr-K of `len`-byte values: more than the inline area holds.
std::map<std::string, std::string> many(size_t n, size_t len) {
  std::map<std::string, std::string> m;
  for (size_t k = 0; k < n; k++) m["user.attr-" + std::to_string(k)] = value(len, unsigned(k));
  return m;
}

void set_all(Rig& r, uint64_t ino, const std::map<std::string, std::string>& m) {
  for (const auto& kv : m) REQUIRE_MESSAGE(r.fs->setxattr(ino, kv.first, kv.second, 0) == 0, kv.first);
}

}  // namespace

TEST_CASE("xattr: a 255-byte name works, a 256-byte one is ERANGE, an empty one EINVAL") {
  Rig r;
  const uint64_t ino = r.create("f");
  const std::string name255 = "user." + std::string(250, 'n');
  const std::string name256 = name255 + "n";
  CHECK(r.fs->setxattr(ino, name255, "v", 0) == 0);
  CHECK(r.fs->setxattr(ino, name256, "v", 0) == -ERANGE);
  CHECK(r.fs->setxattr(ino, "", "v", 0) == -EINVAL);
  std::string v;
  CHECK(r.fs->getxattr(ino, name256, &v) == -ENODATA);
  r.remount();
  REQUIRE(r.fs->getxattr(ino, name255, &v) == 0);
  CHECK(v == "v");
  CHECK(r.all(ino) == std::map<std::string, std::string>{{name255, "v"}});
  r.clean();
}

TEST_CASE("xattr: values of thousands of bytes round-trip, one byte more than the block holds is ENOSPC") {
  Rig r;
  const uint64_t ino = r.create("f");
  const std::string v3000 = value(3000, 1);
  REQUIRE(r.fs->setxattr(ino, "user.big", v3000, 0) == 0);
  std::string v;
  REQUIRE(r.fs->getxattr(ino, "user.big", &v) == 0);
  CHECK(v == v3000);
  // The largest value one entry takes: the block less its header and the entry's.
  const std::string name = "user.max";
  const size_t most = xattr_block_room(kBs) - XATTR_BLOCK_ENTRY_HEAD - name.size();
  CHECK(r.fs->setxattr(ino, name, value(most + 1, 2), 0) == -ENOSPC);
  REQUIRE(r.fs->removexattr(ino, "user.big") == 0);
  REQUIRE(r.fs->setxattr(ino, name, value(most, 2), 0) == 0);
  r.remount();
  REQUIRE(r.fs->getxattr(ino, name, &v) == 0);
  CHECK(v == value(most, 2));
  CHECK(r.st_blocks(ino) == kBs / 512);  // the xattr block is the file's only block
  r.clean();
}

TEST_CASE("xattr: many attributes spill into the block and all list and read back, also after a remount") {
  Rig r;
  const uint64_t ino = r.create("f");
  REQUIRE(r.fs->setxattr(ino, "user.a", "1", 0) == 0);  // small ones first: they stay inline
  REQUIRE(r.fs->setxattr(ino, "user.b", "22", 0) == 0);
  CHECK(r.st_blocks(ino) == 0);
  auto want = many(90, 20);
  set_all(r, ino, want);
  want["user.a"] = "1";
  want["user.b"] = "22";
  CHECK(r.all(ino) == want);
  CHECK(r.st_blocks(ino) == kBs / 512);
  REQUIRE(r.fs->sync() == 0);
  const Inode d = r.disk_inode(ino);
  REQUIRE((d.flags & INODE_XATTR_BLOCK) != 0);
  CHECK(d.xattr_len > 0);  // the inline area is used too
  CHECK(d.xattr_len <= INLINE_XATTR_BYTES_WITH_BLOCK);
  CHECK(d.blocks == 1);
  const uint64_t blk = xattr::block_of(d);
  CHECK(r.bit(blk));
  r.remount();
  CHECK(r.all(ino) == want);
  // Another file's attributes live in a block of their own.
  const uint64_t other = r.create("g");
  set_all(r, other, many(10, 30));
  CHECK(r.all(other) == many(10, 30));
  r.remount();
  CHECK(r.all(ino) == want);
  r.clean();
}

TEST_CASE("xattr: removing attributes shrinks the block, the last one out frees it, reusable after the commit") {
  Rig r;
  const uint64_t ino = r.create("f");
  REQUIRE(r.fs->sync() == 0);
  const uint64_t free0 = r.free_blocks();
  auto m = many(50, 40);
  set_all(r, ino, m);
  REQUIRE(r.fs->sync() == 0);
  CHECK(r.free_blocks() == free0 - 1);
  const uint64_t blk = xattr::block_of(r.disk_inode(ino));
  REQUIRE(blk != 0);
  const uint32_t used_full = reinterpret_cast<const XattrBlock*>(r.block(blk).data())->used;
  // Remove all but two: the block shrinks.
  size_t left = m.size();
  for (auto it = m.begin(); left > 2; left--) {
    REQUIRE(r.fs->removexattr(ino, it->first) == 0);
    it = m.erase(it);
  }
  CHECK(r.fs->removexattr(ino, "user.absent") == -ENODATA);
  REQUIRE(r.fs->sync() == 0);
  REQUIRE(xattr::block_of(r.disk_inode(ino)) == blk);
  CHECK(reinterpret_cast<const XattrBlock*>(r.block(blk).data())->used < used_full);
  CHECK(r.all(ino) == m);
  // The last two out: none is left in the block, so it goes.
  for (const auto& [n, v] : m) REQUIRE(r.fs->removexattr(ino, n) == 0);
  CHECK(r.all(ino).empty());
  CHECK(r.st_blocks(ino) == 0);
  REQUIRE(r.fs->sync() == 0);
  const Inode d = r.disk_inode(ino);
  CHECK((d.flags & INODE_XATTR_BLOCK) == 0);
  CHECK(d.xattr_len == 0);
  CHECK(d.blocks == 0);
  CHECK_FALSE(r.bit(blk));  // cleared when the transaction that freed it committed: free again
  CHECK(r.free_blocks() == free0);
  // Attributes that fit inline again need no block.
  REQUIRE(r.fs->setxattr(ino, "user.s", "small", 0) == 0);
  CHECK(r.st_blocks(ino) == 0);
  r.remount();
  CHECK(r.all(ino) == std::map<std::string, std::string>{{"user.s", "small"}});
  r.clean();
}

TEST_CASE("xattr: the block survives a crash: a committed transaction is replayed, an uncommitted one is lost") {
  Rig r;
  const uint64_t ino = r.create("f");
  const auto committed = many(30, 50);
  set_all(r, ino, committed);
  r.fs->crash_before_checkpoint();
  CHECK(r.fs->sync() == -EIO);  // the commit block is written, nothing went home
  r.fs->crash();
  r.fs.reset();
  CHECK((r.disk_inode(ino).flags & INODE_XATTR_BLOCK) == 0);  // only the journal has it
  r.mount();
  CHECK(r.fs->replayed() == 1);
  CHECK(r.all(ino) == committed);
  // Work never committed disappears whole: the second file's block with it.
  const uint64_t lost = r.create("lost");
  set_all(r, lost, many(30, 50));
  REQUIRE(r.fs->setxattr(ino, "user.late", value(500, 9), 0) == 0);
  r.fs->crash();
  r.fs.reset();
  r.mount();
  CHECK(r.fs->replayed() == 0);
  CHECK(r.all(ino) == committed);
  struct stat st;
  CHECK(r.fs->lookup(ROOT_INO, "lost", &st) == -ENOENT);
  r.clean();
}

TEST_CASE("xattr: unlinking the inode frees its block, also when a crash leaves it an orphan") {
  Rig r;
  const uint64_t ino = r.create("f");  // the root directory's first block is allocated here
  REQUIRE(r.fs->sync() == 0);
  const uint64_t free0 = r.free_blocks();
  set_all(r, ino, many(40, 30));
  REQUIRE(r.fs->sync() == 0);
  const uint64_t blk = xattr::block_of(r.disk_inode(ino));
  REQUIRE(blk != 0);
  CHECK(r.bit(blk));
  CHECK(r.free_blocks() == free0 - 1);
  REQUIRE(r.fs->unlink(ROOT_INO, "f") == 0);
  r.fs->forget(ino, 1);  // the last reference: freed now
  REQUIRE(r.fs->sync() == 0);
  CHECK_FALSE(r.bit(blk));
  CHECK(r.free_blocks() == free0);
  // Unlinked while open, then the machine dies: mount frees the orphan and its block.
  const uint64_t o = r.create("open");
  set_all(r, o, many(40, 30));
  REQUIRE(r.fs->open(o) == 0);
  REQUIRE(r.fs->unlink(ROOT_INO, "open") == 0);
  REQUIRE(r.fs->sync() == 0);
  const uint64_t oblk = xattr::block_of(r.disk_inode(o));
  REQUIRE(oblk != 0);
  CHECK(r.bit(oblk));
  r.fs->crash();
  r.fs.reset();
  r.mount();
  CHECK(r.fs->superblock().orphan_head == 0);
  CHECK_FALSE(r.bit(oblk));
  CHECK(r.free_blocks() == free0);
  r.clean();
}

TEST_CASE("xattr: XATTR_CREATE and XATTR_REPLACE for attributes inline and in the block") {
  Rig r;
  const uint64_t ino = r.create("f");
  auto m = many(20, 60);
  set_all(r, ino, m);
  REQUIRE(r.fs->setxattr(ino, "user.i", "x", 0) == 0);
  m["user.i"] = "x";
  REQUIRE(r.st_blocks(ino) == kBs / 512);
  for (const std::string n : {"user.attr-3", "user.i"}) {
    CHECK(r.fs->setxattr(ino, n, "other", XATTR_CREATE) == -EEXIST);
    CHECK(r.fs->setxattr(ino, n, m[n] + "+", XATTR_REPLACE) == 0);
    m[n] += "+";
  }
  CHECK(r.fs->setxattr(ino, "user.none", "v", XATTR_REPLACE) == -ENODATA);
  CHECK(r.fs->setxattr(ino, "user.new", value(700, 3), XATTR_CREATE) == 0);
  m["user.new"] = value(700, 3);
  // A replace that grows a value past the inline area, and one that shrinks it.
  CHECK(r.fs->setxattr(ino, "user.i", value(300, 4), XATTR_REPLACE) == 0);
  m["user.i"] = value(300, 4);
  CHECK(r.fs->setxattr(ino, "user.attr-5", "s", XATTR_REPLACE) == 0);
  m["user.attr-5"] = "s";
  CHECK(r.all(ino) == m);
  // A refused replace changes nothing.
  CHECK(r.fs->setxattr(ino, "user.attr-6", value(kBs, 5), XATTR_REPLACE) == -ENOSPC);
  r.remount();
  CHECK(r.all(ino) == m);
  r.clean();
}

TEST_CASE("xattr: ENOSPC only when the inline area and the block are really full, a refusal changes nothing") {
  Rig r;
  const uint64_t ino = r.create("f");
  std::map<std::string, std::string> m;
  // 100-byte values until one is refused.
  std::string refused;
  for (int k = 0; k < 100; k++) {
    const std::string n = "user.v" + std::to_string(k);
    const int rc = r.fs->setxattr(ino, n, value(100, unsigned(k)), 0);
    if (rc == -ENOSPC) {
      refused = n;
      break;
    }
    REQUIRE(rc == 0);
    m[n] = value(100, unsigned(k));
  }
  REQUIRE(!refused.empty());
  REQUIRE(r.fs->sync() == 0);
  const uint64_t blk = xattr::block_of(r.disk_inode(ino));
  REQUIRE(blk != 0);
  uint32_t used = reinterpret_cast<const XattrBlock*>(r.block(blk).data())->used;
  // Refused because its entry did not fit in what the block had left (it cannot go inline).
  CHECK(xattr_block_room(kBs) - used < XATTR_BLOCK_ENTRY_HEAD + refused.size() + 100);
  // Smaller ones still go in, into the block and the inline area, until each is really full.
  for (int k = 0; k < 2000; k++) {
    const std::string n = "user.s" + std::to_string(k);
    const int rc = r.fs->setxattr(ino, n, "v", 0);
    if (rc == -ENOSPC) {
      refused = n;
      break;
    }
    REQUIRE(rc == 0);
    m[n] = "v";
  }
  REQUIRE(r.fs->sync() == 0);
  const Inode d = r.disk_inode(ino);
  used = reinterpret_cast<const XattrBlock*>(r.block(blk).data())->used;
  CHECK(xattr_block_room(kBs) - used < XATTR_BLOCK_ENTRY_HEAD + refused.size() + 1);
  CHECK(INLINE_XATTR_BYTES_WITH_BLOCK - d.xattr_len < 2 + refused.size() + 1);
  CHECK(d.xattr_len > 0);
  CHECK(r.all(ino) == m);
  // Room made by a removal is used again.
  REQUIRE(r.fs->removexattr(ino, "user.v0") == 0);
  m.erase("user.v0");
  CHECK(r.fs->setxattr(ino, "user.again", value(90, 7), 0) == 0);
  m["user.again"] = value(90, 7);
  r.remount();
  CHECK(r.all(ino) == m);
  r.clean();
}

TEST_CASE("xattr: an image from before the block (no feature bit) gets the bit on the first spill only") {
  Rig r(true);
  const uint64_t ino = r.create("f");
  REQUIRE(r.fs->setxattr(ino, "user.a", "inline", 0) == 0);
  r.remount();
  CHECK((r.fs->superblock().feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK) == 0);
  set_all(r, ino, many(10, 100));
  CHECK((r.fs->superblock().feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK) != 0);
  r.unmount();
  SuperBlock now;
  REQUIRE(read_superblock(r.io, &now) == "");
  CHECK((now.feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK) != 0);
  r.mount();
  auto want = many(10, 100);
  want["user.a"] = "inline";
  CHECK(r.all(ino) == want);
  r.clean();
}

TEST_CASE("xattr: a damaged block reads as EUCLEAN, fsck finds it, -p leaves it to -y, -y drops or cuts it") {
  Rig r;
  const uint64_t a = r.create("a"), b = r.create("b"), c = r.create("c");
  REQUIRE(r.fs->setxattr(a, "user.in", "1", 0) == 0);
  set_all(r, a, many(10, 50));
  set_all(r, b, many(10, 50));
  set_all(r, c, many(10, 50));
  r.unmount();
  const uint64_t ablk = xattr::block_of(r.disk_inode(a)), bblk = xattr::block_of(r.disk_inode(b));
  const uint64_t cblk = xattr::block_of(r.disk_inode(c));
  REQUIRE(ablk);
  REQUIRE(bblk);
  REQUIRE(cblk);
  // a: a byte of an entry changed, the checksum left stale. b: its last entry's value length
  // runs past `used`, checksum made valid. c: its address pointed at b's block.
  auto ab = r.block(ablk);
  ab[100] ^= 0x5a;
  r.put_block(ablk, ab, false);
  auto bb = r.block(bblk);
  const auto* bx = reinterpret_cast<const XattrBlock*>(bb.data());
  uint32_t off = sizeof(XattrBlock), last = 0;
  for (uint32_t p = 0; p < bx->used;) {
    uint16_t vl;
    std::memcpy(&vl, bb.data() + off + p + 2, 2);
    last = off + p;
    p += XATTR_BLOCK_ENTRY_HEAD + bb[off + p] + vl;
  }
  const uint16_t huge = 3000;
  std::memcpy(bb.data() + last + 2, &huge, 2);
  r.put_block(bblk, bb, true);
  Inode ci = r.disk_inode(c);
  xattr::set_block(ci, bblk);
  r.put_inode(c, ci);

  r.mount();
  std::string v, names;
  CHECK(r.fs->getxattr(a, "user.in", &v) == -EUCLEAN);
  CHECK(r.fs->listxattr(a, &names) == -EUCLEAN);
  CHECK(r.fs->listxattr(b, &names) == -EUCLEAN);
  CHECK(r.fs->getxattr(c, "user.attr-1", &v) == -EUCLEAN);
  CHECK(r.fs->setxattr(b, "user.x", "y", 0) == -EUCLEAN);
  r.unmount();

  FsckRun f = r.fsck();
  INFO(f.text());
  CHECK(f.r.errors > 0);
  CHECK(f.has("inode " + std::to_string(a) + " xattr block " + std::to_string(ablk) + " fails its checksum"));
  CHECK(f.has("inode " + std::to_string(b) + " xattr block " + std::to_string(bblk) + " has an entry running past its end"));
  CHECK(f.has("block " + std::to_string(bblk) + " is claimed twice (again by inode " + std::to_string(c) + "'s xattr block)"));
  CHECK(f.has("block " + std::to_string(cblk) + " is marked in use but nothing owns it"));

  std::vector<uint8_t> before(r.sb.block_count * kBs), after(before.size());
  r.dev.peek(0, before.data(), before.size());
  f = r.fsck(FsckMode::preen);
  CHECK(f.r.needs_yes > 0);
  CHECK(f.has("needs -y"));
  CHECK_FALSE(f.r.changed);
  r.dev.peek(0, after.data(), after.size());
  CHECK(after == before);

  f = r.fsck(FsckMode::yes);
  INFO(f.text());
  CHECK_FALSE(f.r.fatal);
  CHECK(f.r.errors == 0);
  CHECK(f.has("xattr block " + std::to_string(ablk) + " fails its checksum or header check: dropped"));
  CHECK(f.has("xattr block " + std::to_string(bblk) + " has an entry running past its end at byte " +
                       std::to_string(last) + ": cut after the last whole entry (9 kept)"));
  CHECK(f.has("claimed twice (again by inode " + std::to_string(c) + "'s xattr block): dropped"));
  CHECK(fsck_exit_code(f.r, FsckMode::yes) == 1);
  r.clean();
  f = r.fsck(FsckMode::yes);
  CHECK_MESSAGE(fsck_exit_code(f.r, FsckMode::yes) == 0, f.text());

  // a keeps its inline attribute, b its first nine, c none; the blocks freed are free.
  r.mount();
  CHECK(r.all(a) == std::map<std::string, std::string>{{"user.in", "1"}});
  auto nine = many(10, 50);
  auto rb = r.all(b);
  CHECK(rb.size() == 9);
  for (const auto& [n, val] : rb) CHECK(nine.at(n) == val);
  CHECK(r.all(c).empty());
  CHECK(r.st_blocks(a) == 0);
  CHECK(r.st_blocks(b) == kBs / 512);
  CHECK(r.st_blocks(c) == 0);
  r.unmount();
  CHECK_FALSE(r.bit(ablk));
  CHECK(r.bit(bblk));
  CHECK_FALSE(r.bit(cblk));
  // And the repaired files take attributes again.
  r.mount();
  set_all(r, c, many(10, 50));
  CHECK(r.all(c) == many(10, 50));
  r.clean();
}

TEST_CASE("xattr: an address outside the data area, or a flag the superblock does not allow, is damage") {
  Rig r;
  const uint64_t a = r.create("a"), b = r.create("b");
  set_all(r, a, many(5, 40));
  set_all(r, b, many(5, 40));
  r.unmount();
  // a's address turned to an inode table block; the superblock loses the feature b relies on.
  Inode ai = r.disk_inode(a);
  const uint64_t ablk = xattr::block_of(ai), table = r.sb.inode_table_start;
  xattr::set_block(ai, table);
  r.put_inode(a, ai);
  SuperBlock s;
  REQUIRE(read_superblock(r.io, &s) == "");
  s.feature_incompat &= ~FEATURE_INCOMPAT_XATTR_BLOCK;
  s.checksum = superblock_crc(s);
  r.dev.poke(0, &s, sizeof(s));
  r.dev.poke(s.backup_sb_block * kBs, &s, sizeof(s));
  r.mount();
  std::string v;
  CHECK(r.fs->getxattr(a, "user.attr-1", &v) == -EUCLEAN);
  CHECK(r.fs->getxattr(b, "user.attr-1", &v) == -EUCLEAN);
  r.unmount();
  FsckRun f = r.fsck();
  INFO(f.text());
  CHECK(f.has("inode " + std::to_string(a) + " xattr block " + std::to_string(table) + " is outside the data area"));
  CHECK(f.has("inode " + std::to_string(b) + " xattr block " + std::to_string(xattr::block_of(r.disk_inode(b))) +
                       ": the superblock lacks the xattr block feature"));
  CHECK(f.has("block " + std::to_string(ablk) + " is marked in use but nothing owns it"));
  f = r.fsck(FsckMode::preen);
  CHECK(f.r.needs_yes > 0);
  CHECK_FALSE(f.r.changed);
  f = r.fsck(FsckMode::yes);
  INFO(f.text());
  CHECK(f.r.errors == 0);
  CHECK(f.has("is outside the data area: dropped"));
  CHECK(f.has("lacks the xattr block feature: feature set"));
  REQUIRE(read_superblock(r.io, &s) == "");
  CHECK((s.feature_incompat & FEATURE_INCOMPAT_XATTR_BLOCK) != 0);
  CHECK_FALSE(r.bit(ablk));
  r.mount();
  CHECK(r.all(a).empty());
  CHECK(r.all(b) == many(5, 40));
  r.clean();
}

TEST_CASE("xattr: placement keeps a set inline when it fits, else fills the 28 inline bytes to save the block most") {
  using xattr::Attr;
  std::vector<Attr> inl, blk;
  const Attr small{"user.a", "1"}, more{"user.b", std::string(18, 'b')};  // 9 + 26 bytes inline
  REQUIRE(xattr::place({small, more}, 1024, &inl, &blk));
  CHECK(inl.size() == 2);
  CHECK(blk.empty());
  // In order, the first (20 inline bytes) would go inline alone; the two of 14 save more.
  const Attr x{"user.x", std::string(12, 'x')}, y{"user.y", std::string(6, 'y')}, z{"user.z", std::string(6, 'z')};
  const Attr w{"user.w", std::string(100, 'w')};
  REQUIRE(xattr::place({x, y, z, w}, 1024, &inl, &blk));
  REQUIRE(inl.size() == 2);
  CHECK(inl[0].name == "user.y");
  CHECK(inl[1].name == "user.z");
  REQUIRE(blk.size() == 2);
  CHECK(blk[0].name == "user.x");
  CHECK(blk[1].name == "user.w");
  // A block filled to its last byte fits; one byte more does not; nor a 256-byte name.
  const Attr full{"user.f", std::string(xattr_block_room(1024) - XATTR_BLOCK_ENTRY_HEAD - 6, 'f')};
  CHECK(xattr::place({full}, 1024, &inl, &blk));
  CHECK(xattr::place({full, small}, 1024, &inl, &blk));  // the small one inline
  CHECK(inl.size() == 1);
  CHECK_FALSE(xattr::place({full, {"user.b", std::string(30, 'b')}}, 1024, &inl, &blk));
  CHECK_FALSE(xattr::place({{"user.f", full.value + "f"}}, 1024, &inl, &blk));
  CHECK_FALSE(xattr::place({{"user." + std::string(251, 'n'), "v"}}, 4096, &inl, &blk));
}
