// The filesystem core on brd: files written, read, truncated and read back after a remount;
// directories with many entries; rename and link counts; a full filesystem; journal replay
// after a crash between commit and checkpoint.
#include <doctest/doctest.h>

#include "../pattern.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>
#include <thread>
#include <chrono>

#include "blockcore/brd.h"
#include "tests/blockcore/test_brd.h"
#include "fs/filesystem.h"
#include "fs_mount.h"
#include "fs/fsck/fsck.h"
#include "fs/mkfs.h"
#include "fsck_util.h"

using namespace biofs;
using biofs::test::pattern;

namespace {

struct Rig {
  std::unique_ptr<BrdDevice> dev_owner;
  BrdDevice& dev;
  BlockIo io;
  std::unique_ptr<Filesystem> fs;
  explicit Rig(uint64_t bytes = 64 << 20, MkfsOptions mo = {})
      : dev_owner(test::make_test_brd(bytes)), dev(*dev_owner), io(dev.bdev(), 4096) {
    REQUIRE(io.init() == 0);
    REQUIRE(make_filesystem(io, mo).message() == "");
    mount();
  }
  void mount() { fs = test::mount_for_test(io); }
  void remount() {
    REQUIRE(fs->unmount() == 0);
    fs.reset();
    mount();
  }
  uint64_t create(uint64_t parent, const std::string& name) {
    struct stat st;
    REQUIRE(fs->mknod(parent, name, S_IFREG | 0644, 0, 0, 0, &st) == 0);
    return st.st_ino;
  }
  uint64_t lookup(uint64_t parent, const std::string& name) {
    struct stat st;
    const int err = fs->lookup(parent, name, &st);
    return err ? 0 : st.st_ino;
  }
  std::vector<std::string> list(uint64_t dir) {
    std::vector<std::string> names;
    REQUIRE(fs->readdir(dir, 0, [&](const std::string& n, uint64_t, unsigned, uint64_t) {
      names.push_back(n);
      return true;
    }) == 0);
    return names;
  }
};

// Unmounts, checks the device with fsck (no error allowed), mounts again.
void check_fsck_clean(Rig& r) {
  REQUIRE(r.fs->unmount() == 0);
  r.fs.reset();
  const test::FsckRun f = test::collect_fsck(r.io);
  CHECK_MESSAGE(f.r.errors == 0, f.text("; "));
  r.mount();
}

std::string read_all(Filesystem& fs, uint64_t ino, size_t n) {
  std::string s(n, '\0');
  const ssize_t got = fs.read(ino, 0, n, s.data());
  REQUIRE(got >= 0);
  s.resize(size_t(got));
  return s;
}

}  // namespace

TEST_CASE("fs core: a file written at odd offsets reads back, before and after a remount") {
  Rig r;
  const uint64_t ino = r.create(disk::ROOT_INO, "a");
  const std::string data = pattern(300000, 1);
  // Three unaligned pieces, the middle one last.
  CHECK(r.fs->write(ino, 0, 1000, data.data()) == 1000);
  CHECK(r.fs->write(ino, 5000, data.size() - 5000, data.data() + 5000) == ssize_t(data.size() - 5000));
  CHECK(r.fs->write(ino, 1000, 4000, data.data() + 1000) == 4000);
  CHECK(read_all(*r.fs, ino, 400000) == data);
  r.remount();
  const uint64_t again = r.lookup(disk::ROOT_INO, "a");
  REQUIRE(again == ino);
  struct stat st;
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(st.st_size == off_t(data.size()));
  CHECK(S_ISREG(st.st_mode));
  CHECK(read_all(*r.fs, ino, 400000) == data);
}

TEST_CASE("fs core: holes read as zeros, truncate down zeroes the tail, truncate up is sparse") {
  Rig r;
  const uint64_t ino = r.create(disk::ROOT_INO, "sparse");
  CHECK(r.fs->write(ino, 1 << 20, 5, "hello") == 5);
  std::string got = read_all(*r.fs, ino, 2 << 20);
  REQUIRE(got.size() == (1u << 20) + 5);
  CHECK(got.substr(0, 1 << 20) == std::string(1 << 20, '\0'));
  CHECK(got.substr(1 << 20) == "hello");
  struct stat st, a{};
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(st.st_blocks == 8);  // one 4 KiB block allocated
  a.st_size = (1 << 20) + 2;
  REQUIRE(r.fs->setattr(ino, SETATTR_SIZE, a, &st) == 0);
  a.st_size = (1 << 20) + 10;
  REQUIRE(r.fs->setattr(ino, SETATTR_SIZE, a, &st) == 0);
  got = read_all(*r.fs, ino, 2 << 20);
  CHECK(got.substr(1 << 20) == std::string("he") + std::string(8, '\0'));
  a.st_size = 0;
  REQUIRE(r.fs->setattr(ino, SETATTR_SIZE, a, &st) == 0);
  CHECK(st.st_blocks == 0);
  r.remount();
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(st.st_size == 0);
}

TEST_CASE("fs core: a fragmented file moves its extents into a tree and back") {
  Rig r;
  const uint64_t a = r.create(disk::ROOT_INO, "a"), b = r.create(disk::ROOT_INO, "b");
  // Interleave single blocks of two files so each gets hundreds of extents.
  const std::string blk = pattern(4096, 3);
  for (int i = 0; i < 400; i++) {
    REQUIRE(r.fs->write(a, uint64_t(i) * 4096, 4096, blk.data()) == 4096);
    REQUIRE(r.fs->write(b, uint64_t(i) * 4096, 4096, blk.data()) == 4096);
  }
  r.remount();
  std::string got = read_all(*r.fs, a, 400 * 4096);
  REQUIRE(got.size() == 400u * 4096);
  for (int i = 0; i < 400; i++) REQUIRE(got.compare(size_t(i) * 4096, 4096, blk) == 0);
  struct stat st, at{};
  REQUIRE(r.fs->getattr(a, &st) == 0);
  CHECK(st.st_blocks > 400 * 8);  // the tree blocks are counted
  at.st_size = 4096 * 2;
  REQUIRE(r.fs->setattr(a, SETATTR_SIZE, at, &st) == 0);
  CHECK(st.st_blocks == 2 * 8);   // back inline: no tree blocks
  r.remount();
  CHECK(read_all(*r.fs, a, 1 << 20) == blk + blk);
}

TEST_CASE("fs core: a directory with 20000 entries: lookup, readdir, unlink, remount") {
  MkfsOptions mo;
  mo.inodes = 30000;
  Rig r(128 << 20, mo);
  struct stat st;
  REQUIRE(r.fs->mkdir(disk::ROOT_INO, "big", 0755, 0, 0, &st) == 0);
  const uint64_t dir = st.st_ino;
  const int n = 20000;
  for (int i = 0; i < n; i++) r.create(dir, "file-with-a-longish-name-" + std::to_string(i));
  CHECK(r.lookup(dir, "file-with-a-longish-name-12345") != 0);
  CHECK(r.list(dir).size() == size_t(n) + 2);
  for (int i = 0; i < n; i += 2) REQUIRE(r.fs->unlink(dir, "file-with-a-longish-name-" + std::to_string(i)) == 0);
  r.remount();
  const auto names = r.list(dir);
  CHECK(names.size() == size_t(n / 2) + 2);
  const std::set<std::string> set(names.begin(), names.end());
  CHECK(set.count("file-with-a-longish-name-1") == 1);
  CHECK(set.count("file-with-a-longish-name-2") == 0);
  // Space freed by the removals is reused: adding back does not grow the directory.
  REQUIRE(r.fs->getattr(dir, &st) == 0);
  const off_t size = st.st_size;
  for (int i = 0; i < n; i += 2) r.create(dir, "file-with-a-longish-name-" + std::to_string(i));
  REQUIRE(r.fs->getattr(dir, &st) == 0);
  CHECK(st.st_size == size);
  CHECK(r.list(dir).size() == size_t(n) + 2);
}

TEST_CASE("fs core: mkdir, rmdir, link counts, rename over a file, noreplace and exchange") {
  Rig r;
  struct stat st;
  REQUIRE(r.fs->mkdir(disk::ROOT_INO, "d", 0755, 0, 0, &st) == 0);
  const uint64_t d = st.st_ino;
  REQUIRE(r.fs->getattr(disk::ROOT_INO, &st) == 0);
  CHECK(st.st_nlink == 3);
  const uint64_t f = r.create(d, "f"), g = r.create(d, "g");
  CHECK(r.fs->write(f, 0, 1, "F") == 1);
  CHECK(r.fs->write(g, 0, 1, "G") == 1);
  CHECK(r.fs->rmdir(disk::ROOT_INO, "d") == -ENOTEMPTY);
  CHECK(r.fs->link(f, disk::ROOT_INO, "f-link", &st) == 0);
  CHECK(st.st_nlink == 2);
  CHECK(r.fs->rename(d, "g", d, "f", RENAME_NOREPLACE) == -EEXIST);
  CHECK(r.fs->rename(d, "g", disk::ROOT_INO, "f-link", RENAME_EXCHANGE) == 0);
  CHECK(r.lookup(disk::ROOT_INO, "f-link") == g);
  CHECK(r.lookup(d, "g") == f);
  // d/f and d/g are both links to f now: rename between them does nothing (POSIX).
  CHECK(r.fs->rename(d, "g", d, "f", 0) == 0);
  CHECK(r.lookup(d, "g") == f);
  CHECK(r.fs->unlink(d, "g") == 0);
  REQUIRE(r.fs->getattr(f, &st) == 0);
  CHECK(st.st_nlink == 1);
  // Rename over another file: the old target loses its link.
  CHECK(r.fs->rename(disk::ROOT_INO, "f-link", d, "f", 0) == 0);
  CHECK(r.lookup(d, "f") == g);
  CHECK(r.fs->rename(disk::ROOT_INO, "d", d, "sub", 0) == -EINVAL);  // into itself
  REQUIRE(r.fs->mkdir(disk::ROOT_INO, "e", 0755, 0, 0, &st) == 0);
  CHECK(r.fs->rename(disk::ROOT_INO, "e", d, "e", 0) == 0);
  REQUIRE(r.fs->getattr(d, &st) == 0);
  CHECK(st.st_nlink == 3);
  r.remount();
  CHECK(r.lookup(d, "f") == g);
  std::string s = read_all(*r.fs, g, 10);
  CHECK(s == "G");
  CHECK(r.fs->unlink(d, "f") == 0);
  CHECK(r.fs->rmdir(d, "e") == 0);
  CHECK(r.fs->rmdir(disk::ROOT_INO, "d") == 0);
  REQUIRE(r.fs->getattr(disk::ROOT_INO, &st) == 0);
  CHECK(st.st_nlink == 2);
  CHECK(r.list(disk::ROOT_INO).size() == 2);
}

TEST_CASE("fs core: symlinks short and long survive a remount") {
  Rig r;
  struct stat st;
  const std::string longt(3000, 'x');
  REQUIRE(r.fs->symlink(disk::ROOT_INO, "s", "target", 0, 0, &st) == 0);
  REQUIRE(r.fs->symlink(disk::ROOT_INO, "l", longt, 0, 0, &st) == 0);
  r.remount();
  std::string t;
  REQUIRE(r.fs->readlink(r.lookup(disk::ROOT_INO, "s"), &t) == 0);
  CHECK(t == "target");
  REQUIRE(r.fs->readlink(r.lookup(disk::ROOT_INO, "l"), &t) == 0);
  CHECK(t == longt);
}

TEST_CASE("fs core: a full filesystem gives ENOSPC, keeps existing data, reuses freed space") {
  MkfsOptions mo;
  mo.journal_blocks = 64;
  Rig r(8 << 20, mo);
  const uint64_t keep = r.create(disk::ROOT_INO, "keep");
  const std::string k = pattern(10000, 9);
  REQUIRE(r.fs->write(keep, 0, k.size(), k.data()) == ssize_t(k.size()));
  const uint64_t big = r.create(disk::ROOT_INO, "big");
  const std::string chunk = pattern(1 << 20, 5);
  ssize_t ret = 0;
  uint64_t off = 0;
  for (int i = 0; i < 20 && ret >= 0; i++, off += chunk.size()) ret = r.fs->write(big, off, chunk.size(), chunk.data());
  CHECK(ret == -ENOSPC);
  CHECK(read_all(*r.fs, keep, 20000) == k);
  struct statvfs sv;
  REQUIRE(r.fs->statfs(&sv) == 0);
  const auto free_full = sv.f_bfree;
  REQUIRE(r.fs->unlink(disk::ROOT_INO, "big") == 0);
  r.fs->forget(big, 1);  // the kernel's forget: only then is the inode's space freed
  REQUIRE(r.fs->sync() == 0);  // freed blocks become reusable once the unlink commits
  REQUIRE(r.fs->statfs(&sv) == 0);
  CHECK(sv.f_bfree > free_full + 256);
  const uint64_t again = r.create(disk::ROOT_INO, "again");
  CHECK(r.fs->write(again, 0, chunk.size(), chunk.data()) == ssize_t(chunk.size()));
  r.remount();
  CHECK(read_all(*r.fs, keep, 20000) == k);
  CHECK(read_all(*r.fs, r.lookup(disk::ROOT_INO, "again"), 2 << 20) == chunk);
}

TEST_CASE("fs core: a crash after the commit block is replayed at mount, uncommitted work is not") {
  Rig r;
  const uint64_t a = r.create(disk::ROOT_INO, "committed");
  REQUIRE(r.fs->write(a, 0, 5, "12345") == 5);
  r.fs->crash_before_checkpoint();
  CHECK(r.fs->sync() == -EIO);  // the journal holds the transaction; nothing went home
  r.fs->crash();
  r.fs.reset();
  // The home blocks do not have the file yet: only the journal does.
  r.mount();
  CHECK(r.fs->replayed() == 1);
  const uint64_t got = r.lookup(disk::ROOT_INO, "committed");
  REQUIRE(got == a);
  CHECK(read_all(*r.fs, a, 100) == "12345");
  // Work never committed disappears whole, and the filesystem stays usable.
  r.create(disk::ROOT_INO, "lost");
  r.fs->crash();
  r.fs.reset();
  r.mount();
  CHECK(r.fs->replayed() == 0);
  CHECK(r.lookup(disk::ROOT_INO, "lost") == 0);
  CHECK(r.lookup(disk::ROOT_INO, "committed") == a);
  r.create(disk::ROOT_INO, "after");
  r.remount();
  CHECK(r.lookup(disk::ROOT_INO, "after") != 0);
}

// ro,norecovery (ext4's noload): the committed transaction stays in the journal, unread and
// unapplied, until a mount that replays it; norecovery without ro is refused.
TEST_CASE("fs core: a read-only norecovery mount leaves the journal unreplayed for the next mount") {
  Rig r;
  const uint64_t a = r.create(disk::ROOT_INO, "committed");
  r.fs->crash_before_checkpoint();
  CHECK(r.fs->sync() == -EIO);
  r.fs->crash();
  r.fs.reset();
  MountOptions o;
  o.commit_interval_s = 0;
  o.norecovery = true;
  std::unique_ptr<Filesystem> fs;
  CHECK_FALSE(Filesystem::mount(r.io, o, &fs).ok());  // writable: refused
  o.read_only = true;
  REQUIRE(Filesystem::mount(r.io, o, &fs).ok());
  CHECK(fs->replayed() == 0);
  struct stat st;
  CHECK(fs->lookup(disk::ROOT_INO, "committed", &st) == -ENOENT);  // only the journal has it
  REQUIRE(fs->unmount() == 0);
  fs.reset();
  r.mount();
  CHECK(r.fs->replayed() == 1);
  CHECK(r.lookup(disk::ROOT_INO, "committed") == a);
}

TEST_CASE("fs core: fdatasync commits what reading the data back needs, fsync what changed the file, neither another file's changes") {
  Rig r;
  const uint64_t f = r.create(disk::ROOT_INO, "f");
  const std::string a(4096, 'a'), b(4096, 'b'), c(4096, 'c');
  REQUIRE(r.fs->sync() == 0);
  // An allocating write: size and blocks in the running transaction.
  REQUIRE(r.fs->write(f, 0, 4096, a.data()) == 4096);
  uint64_t n = r.fs->commits();
  CHECK(r.fs->fsync(f, true) == 0);
  CHECK(r.fs->commits() == n + 1);
  n = r.fs->commits();
  CHECK(r.fs->fsync(f, true) == 0);  // nothing since: a flush only
  CHECK(r.fs->fsync(f, false) == 0);
  CHECK(r.fs->commits() == n);
  // An overwrite a clock tick later changes the times only: fdatasync flushes, fsync commits.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  REQUIRE(r.fs->write(f, 0, 4096, b.data()) == 4096);
  CHECK(r.fs->fsync(f, true) == 0);
  CHECK(r.fs->commits() == n);
  CHECK(r.fs->fsync(f, false) == 0);
  CHECK(r.fs->commits() == n + 1);
  // Another file's change does not make fsync of this one commit.
  r.create(disk::ROOT_INO, "g");
  n = r.fs->commits();
  CHECK(r.fs->fsync(f, false) == 0);
  CHECK(r.fs->commits() == n);
  // The root directory commits whatever is pending: `sync MNT` (README.md, "Durability").
  REQUIRE(r.fs->sync() == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  REQUIRE(r.fs->write(f, 0, 4096, b.data()) == 4096);  // f's times only
  n = r.fs->commits();
  CHECK(r.fs->fsync(disk::ROOT_INO, true) == 0);
  CHECK(r.fs->commits() == n + 1);
  // Extending the file is for fdatasync to commit, and survives a crash right after it.
  n = r.fs->commits();
  REQUIRE(r.fs->write(f, 4096, 4096, c.data()) == 4096);
  CHECK(r.fs->fsync(f, true) == 0);
  CHECK(r.fs->commits() == n + 1);
  r.fs->crash();
  r.fs.reset();
  r.mount();
  CHECK(read_all(*r.fs, f, 8192) == b + c);
  check_fsck_clean(r);
}

TEST_CASE("fs core: a damaged metadata block is reported, not trusted") {
  Rig r;
  struct stat st;
  REQUIRE(r.fs->mkdir(disk::ROOT_INO, "d", 0755, 0, 0, &st) == 0);
  r.create(st.st_ino, "x");
  r.remount();
  // Find d's directory block by its magic and owner, and flip a byte in its entries.
  const uint64_t dino = st.st_ino;
  const auto& sb = r.fs->superblock();
  int corrupted = 0;
  for (uint64_t b = sb.data_start; b < sb.block_count; b++) {
    disk::DirBlock db;
    r.dev.peek(b * 4096, &db, sizeof(db));
    if (db.h.magic == disk::BLK_DIR && db.owner == dino) {
      const uint8_t junk = 0xEE;
      r.dev.poke(b * 4096 + 40, &junk, 1);
      corrupted++;
    }
  }
  REQUIRE(corrupted == 1);
  const uint64_t d = r.lookup(disk::ROOT_INO, "d");
  REQUIRE(d != 0);
  CHECK(r.fs->lookup(d, "x", &st) == -EUCLEAN);
}

// load_extents() (fs/extent_load.cc) checks an inode's map as it is read, since the extent code
// trusts it: each way a map can be wrong is refused with EUCLEAN, the inode's checksum
// being right. One subcase per rule.
TEST_CASE("fs core: an inode whose extent map is out of order, empty or outside the data area is refused") {
  Rig r;
  const uint64_t ino = r.create(disk::ROOT_INO, "f");
  const std::string data = pattern(4096, 9);
  REQUIRE(r.fs->write(ino, 0, 4096, data.data()) == 4096);
  REQUIRE(r.fs->write(ino, 8 * 4096, 4096, data.data()) == 4096);  // two inline extents
  const disk::SuperBlock sb = r.fs->superblock();
  REQUIRE(r.fs->unmount() == 0);
  r.fs.reset();
  const uint64_t pos = sb.inode_table_start * 4096 + (ino - 1) * disk::INODE_SIZE;
  disk::Inode d;
  r.dev.peek(pos, &d, sizeof(d));
  REQUIRE(d.nr_extents == 2);
  disk::Extent& a = d.extents[0];
  disk::Extent& b = d.extents[1];
  bool damaged = true;
  SUBCASE("as written: read back") { damaged = false; }
  SUBCASE("overlapping") { b.lblk = a.lblk; }
  SUBCASE("empty") { b.len = 0; }
  SUBCASE("an unknown flag") { b.flags = 0x80; }
  SUBCASE("before the data area") { b.pblk = sb.data_start - 1; }
  SUBCASE("past the device") { b.pblk = sb.block_count + 5; }  // so block_count - pblk would wrap
  SUBCASE("running past the device") { b.len = uint32_t(sb.block_count - b.pblk + 1); }
  SUBCASE("more inline extents than the inode holds") {
    // A fifth would be read from the bytes after the array (parent, then xattr): made to look
    // like a good extent after four good ones, so only the count refuses it.
    d.extents[2] = {20, a.pblk, 1, 0};
    d.extents[3] = {30, a.pblk, 1, 0};
    const disk::Extent fifth{40, a.pblk, 1, 0};
    std::memcpy(reinterpret_cast<char*>(&d) + offsetof(disk::Inode, extents) + sizeof(d.extents), &fifth, sizeof(fifth));
    d.xattr_len = 0;
    d.nr_extents = disk::INLINE_EXTENTS + 1;
  }
  d.checksum = disk::inode_crc(ino, d);
  r.dev.poke(pos, &d, sizeof(d));
  r.mount();
  struct stat st;
  if (damaged) {
    CHECK(r.fs->getattr(ino, &st) == -EUCLEAN);
  } else {
    REQUIRE(r.fs->getattr(ino, &st) == 0);
    CHECK(read_all(*r.fs, ino, 9 * 4096).substr(8 * 4096) == data);
  }
}

TEST_CASE("fs core: a file unlinked while open survives until released, and a crash frees it at mount") {
  Rig r;
  const uint64_t ino = r.create(disk::ROOT_INO, "open-file");
  const std::string data = pattern(50000, 4);
  REQUIRE(r.fs->open(ino) == 0);
  REQUIRE(r.fs->write(ino, 0, data.size(), data.data()) == ssize_t(data.size()));
  REQUIRE(r.fs->unlink(disk::ROOT_INO, "open-file") == 0);
  CHECK(r.lookup(disk::ROOT_INO, "open-file") == 0);
  CHECK(read_all(*r.fs, ino, 100000) == data);  // still readable through the open handle
  CHECK(r.fs->superblock().orphan_head == ino);
  struct statvfs before;
  REQUIRE(r.fs->statfs(&before) == 0);
  REQUIRE(r.fs->sync() == 0);
  r.fs->crash();  // the machine dies with the file open
  r.fs.reset();
  r.mount();      // the orphan list is walked and the inode freed
  CHECK(r.fs->superblock().orphan_head == 0);
  struct statvfs after;
  REQUIRE(r.fs->statfs(&after) == 0);
  CHECK(after.f_bfree >= before.f_bfree + 12);
  CHECK(after.f_ffree == before.f_ffree + 1);
  struct stat st;
  CHECK(r.fs->getattr(ino, &st) == -ESTALE);
  // The normal path: the last release frees it.
  const uint64_t b = r.create(disk::ROOT_INO, "b");
  REQUIRE(r.fs->open(b) == 0);
  REQUIRE(r.fs->unlink(disk::ROOT_INO, "b") == 0);
  r.fs->forget(b, 1);
  CHECK(r.fs->getattr(b, &st) == 0);
  REQUIRE(r.fs->release(b) == 0);
  CHECK(r.fs->superblock().orphan_head == 0);
  CHECK(r.fs->getattr(b, &st) == -ESTALE);
}

TEST_CASE("fs core: fallocate makes unwritten extents that read as zeros until written, punch hole") {
  Rig r;
  const uint64_t ino = r.create(disk::ROOT_INO, "f");
  REQUIRE(r.fs->fallocate(ino, 0, 0, 64 * 4096) == 0);
  struct stat st;
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(st.st_size == 64 * 4096);
  CHECK(st.st_blocks == 64 * 8);
  CHECK(read_all(*r.fs, ino, 64 * 4096) == std::string(64 * 4096, '\0'));
  CHECK(r.fs->lseek(ino, 0, SEEK_DATA) == -ENXIO);  // unwritten counts as a hole
  // A write into the middle converts just those blocks.
  const std::string mid = pattern(10000, 2);
  REQUIRE(r.fs->write(ino, 20000, mid.size(), mid.data()) == ssize_t(mid.size()));
  CHECK(r.fs->lseek(ino, 0, SEEK_DATA) == 16384);
  CHECK(r.fs->lseek(ino, 20000, SEEK_HOLE) == 32768);
  r.remount();
  std::string want(64 * 4096, '\0');
  want.replace(20000, mid.size(), mid);
  CHECK(read_all(*r.fs, ino, 64 * 4096) == want);
  // Punch a hole across block boundaries: whole blocks unmapped, partial ones zeroed.
  REQUIRE(r.fs->fallocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 21000, 9000) == 0);
  want.replace(21000, 9000, std::string(9000, '\0'));
  CHECK(read_all(*r.fs, ino, 64 * 4096) == want);
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(st.st_size == 64 * 4096);
  CHECK(st.st_blocks == 63 * 8);  // block 6 (24576..28671) is gone
  CHECK(r.fs->fallocate(ino, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE, 0, 4096) == -EOPNOTSUPP);
  // KEEP_SIZE beyond the end does not change the size.
  REQUIRE(r.fs->fallocate(ino, FALLOC_FL_KEEP_SIZE, 64 * 4096, 4096) == 0);
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(st.st_size == 64 * 4096);
  r.remount();
  CHECK(read_all(*r.fs, ino, 64 * 4096) == want);
}

TEST_CASE("fs core: random writes into a fallocated file convert just their blocks, and the map merges back to one extent") {
  // A model of each block (written or not, and its byte) against the filesystem: the data, the
  // unwritten blocks seen as holes by SEEK_DATA/SEEK_HOLE, fsck, and at the end, every block
  // written in random order, one extent again (no tree block left in st_blocks).
  Rig r(64 << 20);
  const uint64_t ino = r.create(disk::ROOT_INO, "f");
  const uint64_t nblk = 2048;
  REQUIRE(r.fs->fallocate(ino, 0, 0, nblk * 4096) == 0);
  std::vector<int> model(nblk, -1);  // -1: unwritten, else the byte written
  std::vector<uint64_t> order(nblk);
  for (uint64_t i = 0; i < nblk; i++) order[i] = i;
  std::mt19937_64 rng(11);
  std::shuffle(order.begin(), order.end(), rng);
  const auto check_model = [&] {
    for (uint64_t b = 0; b < nblk; b += 37) {  // a sample of the blocks' contents
      std::string got(4096, '\1');
      REQUIRE(r.fs->read(ino, b * 4096, 4096, got.data()) == 4096);
      CHECK(got == std::string(4096, char(model[b] < 0 ? 0 : model[b])));
    }
    for (uint64_t b = 0; b < nblk;) {  // every run of written blocks is data, every other a hole
      const bool written = model[b] >= 0;
      uint64_t e = b;
      while (e < nblk && (model[e] >= 0) == written) e++;
      CHECK(r.fs->lseek(ino, off_t(b * 4096), written ? SEEK_HOLE : SEEK_DATA) ==
            (e == nblk && !written ? -ENXIO : off_t(e * 4096)));
      b = e;
    }
  };
  for (uint64_t k = 0; k < nblk; k++) {
    const uint64_t b = order[k];
    const int byte = int(1 + k % 250);
    // Now and then two blocks at once, across a neighbour that may be either.
    const uint64_t n = (k % 7 == 0 && b + 1 < nblk) ? 2 : 1;
    const std::string data(n * 4096, char(byte));
    REQUIRE(r.fs->write(ino, b * 4096, data.size(), data.data()) == ssize_t(data.size()));
    for (uint64_t i = 0; i < n; i++) model[b + i] = byte;
    if (k % 256 == 0) check_model();
    if (k == nblk / 2) check_fsck_clean(r);  // half converted: a deep, fragmented map
  }
  check_model();
  struct stat st;
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(st.st_blocks == off_t(nblk * 8));  // data only: the map is back inside the inode
  check_fsck_clean(r);
  check_model();
}

TEST_CASE("fs core: a map of thousands of extents grows a deep tree leaf by leaf and shrinks back inline") {
  // 1 KiB blocks (41 extents to a tree block) and the smallest journal (a save may log 16
  // blocks): 1500 single-block extents need a root over index nodes over ~50 leaves, which the
  // journal could not take in one save if every save rewrote the whole tree. Random writes and
  // hole punches against a model of each block, fsck clean on the way, then a truncate frees
  // every tree block.
  MkfsOptions mo;
  mo.block_size = 1024;
  mo.journal_blocks = 64;
  Rig r(64 << 20, mo);
  const uint64_t ino = r.create(disk::ROOT_INO, "f");
  const uint64_t nblk = 6000;
  std::vector<int> model(nblk, 0);  // 0: a hole, else the block's byte
  struct stat st, at{};
  at.st_size = off_t(nblk * 1024);
  REQUIRE(r.fs->setattr(ino, SETATTR_SIZE, at, &st) == 0);
  struct statvfs before;
  REQUIRE(r.fs->statfs(&before) == 0);
  std::mt19937_64 rng(23);
  const auto check_model = [&] {
    std::string got(nblk * 1024, '\1');
    REQUIRE(r.fs->read(ino, 0, got.size(), got.data()) == ssize_t(got.size()));
    for (uint64_t b = 0; b < nblk; b++)
      if (got.compare(b * 1024, 1024, std::string(1024, char(model[b]))) != 0) FAIL("block " << b << " differs");
  };
  for (int k = 0; k < 4000; k++) {
    if (k % 10 == 9) {  // a punch of 1 to 8 blocks (leaves shrink, neighbours fold in)
      const uint64_t b = rng() % nblk, n = std::min<uint64_t>(1 + rng() % 8, nblk - b);
      REQUIRE(r.fs->fallocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, b * 1024, n * 1024) == 0);
      for (uint64_t i = b; i < b + n; i++) model[i] = 0;
    } else {  // one block at an even place: neighbours stay apart, so each is an extent
      const uint64_t b = 2 * (rng() % (nblk / 2));
      const int byte = int(1 + k % 250);
      const std::string data(1024, char(byte));
      REQUIRE(r.fs->write(ino, b * 1024, 1024, data.data()) == 1024);
      model[b] = byte;
    }
    if (k % 1000 == 999) {
      check_model();
      check_fsck_clean(r);
    }
  }
  CHECK((r.fs->superblock().feature_incompat & disk::FEATURE_INCOMPAT_DEEP_EXTENTS) != 0);
  uint64_t data_blocks = 0;
  for (int m : model) data_blocks += m != 0;
  REQUIRE(r.fs->getattr(ino, &st) == 0);
  CHECK(uint64_t(st.st_blocks) > data_blocks * 2 + 40);  // the tree's blocks are counted
  r.remount();
  check_model();
  at.st_size = 0;
  REQUIRE(r.fs->setattr(ino, SETATTR_SIZE, at, &st) == 0);
  CHECK(st.st_blocks == 0);
  check_fsck_clean(r);  // every tree block back in the bitmap
  struct statvfs after;
  REQUIRE(r.fs->statfs(&after) == 0);
  CHECK(after.f_bfree == before.f_bfree);
}

TEST_CASE("fs core: SEEK_DATA and SEEK_HOLE over a sparse file") {
  Rig r;
  const uint64_t ino = r.create(disk::ROOT_INO, "s");
  REQUIRE(r.fs->write(ino, 8192, 100, pattern(100, 1).data()) == 100);
  REQUIRE(r.fs->write(ino, 1 << 20, 100, pattern(100, 1).data()) == 100);
  CHECK(r.fs->lseek(ino, 0, SEEK_DATA) == 8192);
  CHECK(r.fs->lseek(ino, 0, SEEK_HOLE) == 0);
  CHECK(r.fs->lseek(ino, 8192, SEEK_HOLE) == 12288);
  CHECK(r.fs->lseek(ino, 12288, SEEK_DATA) == 1 << 20);
  CHECK(r.fs->lseek(ino, (1 << 20) + 50, SEEK_HOLE) == (1 << 20) + 100);  // the end is a hole
  CHECK(r.fs->lseek(ino, (1 << 20) + 100, SEEK_DATA) == -ENXIO);
}

TEST_CASE("fs core: small extended attributes: create, replace, list, remove, full") {
  Rig r;
  const uint64_t ino = r.create(disk::ROOT_INO, "x");
  CHECK(r.fs->setxattr(ino, "user.a", "1", XATTR_REPLACE) == -ENODATA);
  CHECK(r.fs->setxattr(ino, "user.a", "1", 0) == 0);
  CHECK(r.fs->setxattr(ino, "user.a", "2", XATTR_CREATE) == -EEXIST);
  CHECK(r.fs->setxattr(ino, "user.bb", "value", 0) == 0);
  // More than the inline area and the external block together hold (fs_xattr_test has the rest).
  CHECK(r.fs->setxattr(ino, "user.big", std::string(5000, 'v'), 0) == -ENOSPC);
  r.remount();
  std::string v;
  REQUIRE(r.fs->getxattr(ino, "user.bb", &v) == 0);
  CHECK(v == "value");
  REQUIRE(r.fs->listxattr(ino, &v) == 0);
  CHECK(v == std::string("user.a\0user.bb\0", 15));
  CHECK(r.fs->removexattr(ino, "user.a") == 0);
  CHECK(r.fs->getxattr(ino, "user.a", &v) == -ENODATA);
  CHECK(r.fs->removexattr(ino, "user.a") == -ENODATA);
}

TEST_CASE("fs core: device errors: a truncate or a hole punch whose partial-block write fails changes nothing") {
  // The partial block is zeroed before any block is unmapped: punching first and failing the
  // write left the blocks freed at the next commit while the inode on disk still named them
  // (found by the FUSE fault test: "block 279 is in use but marked free").
  Rig r;
  const uint64_t a = r.create(disk::ROOT_INO, "a");
  const std::string data = pattern(8 * 4096, 5);
  REQUIRE(r.fs->write(a, 0, data.size(), data.data()) == ssize_t(data.size()));
  REQUIRE(r.fs->sync() == 0);
  r.dev.set_fail_writes(true);
  struct stat attr{}, st;
  attr.st_size = 4096 + 100;  // keeps a partial block, whose tail must be zeroed
  CHECK(r.fs->setattr(a, SETATTR_SIZE, attr, &st) == -EIO);
  CHECK(r.fs->fallocate(a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 3 * 4096) == -EIO);
  r.dev.set_fail_writes(false);
  REQUIRE(r.fs->getattr(a, &st) == 0);
  CHECK(st.st_size == off_t(data.size()));
  CHECK(st.st_blocks == 8 * 8);
  CHECK(read_all(*r.fs, a, data.size()) == data);
  REQUIRE(r.fs->sync() == 0);
  check_fsck_clean(r);
  CHECK(read_all(*r.fs, a, data.size()) == data);
}

TEST_CASE("fs core: device errors: a failed data write is EIO with nothing half-done, a failed commit stops all writing") {
  Rig r;
  const uint64_t a = r.create(disk::ROOT_INO, "a");
  REQUIRE(r.fs->write(a, 0, 5, "12345") == 5);
  REQUIRE(r.fs->sync() == 0);
  struct statvfs before;
  REQUIRE(r.fs->statfs(&before) == 0);
  // A data write that fails: EIO, the file is as it was, no blocks stay allocated.
  r.dev.set_fail_writes(true);
  const std::string big = pattern(100000, 3);
  CHECK(r.fs->write(a, 4096, big.size(), big.data()) == -EIO);
  r.dev.set_fail_writes(false);
  struct stat st;
  REQUIRE(r.fs->getattr(a, &st) == 0);
  CHECK(st.st_size == 5);
  CHECK(st.st_blocks == 8);
  REQUIRE(r.fs->sync() == 0);  // the freed blocks return once this commits
  struct statvfs after;
  REQUIRE(r.fs->statfs(&after) == 0);
  CHECK(after.f_bfree == before.f_bfree);
  // A commit that fails: the caller gets EIO, later changes EROFS, reads still work.
  r.create(disk::ROOT_INO, "b");
  r.dev.set_fail_writes(true);
  CHECK(r.fs->sync() == -EIO);
  r.dev.set_fail_writes(false);
  CHECK(r.fs->mknod(disk::ROOT_INO, "c", S_IFREG | 0644, 0, 0, 0, &st) == -EROFS);
  CHECK(r.fs->write(a, 0, 1, "x") == -EROFS);
  CHECK(read_all(*r.fs, a, 10) == "12345");
  CHECK(r.fs->unmount() == -EIO);
  r.fs.reset();
  // The disk is as of the last good commit, and mounts.
  r.mount();
  CHECK(r.lookup(disk::ROOT_INO, "a") == a);
  CHECK(read_all(*r.fs, a, 10) == "12345");
  CHECK(r.fs->write(a, 0, 1, "x") == 1);
}

namespace {
// Writes 1 MiB chunks, then single blocks, until not one block is left.
uint64_t fill_until_enospc(Rig& r, const std::string& name) {
  const uint64_t big = r.create(disk::ROOT_INO, name);
  uint64_t off = 0;
  for (size_t step : {size_t(1) << 20, size_t(4096)}) {
    const std::string chunk = pattern(step, 5);
    ssize_t ret = 0;
    for (; ret >= 0; off += chunk.size()) ret = r.fs->write(big, off, chunk.size(), chunk.data());
    REQUIRE(ret == -ENOSPC);
    off -= chunk.size();
  }
  return big;
}

}  // namespace

TEST_CASE("fs core: thousands of files unlinked while open leave the orphan list in any order, and a crash frees the rest") {
  // The on-disk orphan list is singly linked from the superblock; each inode also knows its
  // predecessor in memory (ext4's s_orphan list), so taking one off the middle is a step, not
  // a walk from the head: releasing 20,000 in the order they were unlinked (each the list's
  // last) was 2 * 10^8 steps. Released in a scattered order, the list must stay whole.
  MkfsOptions mo;
  mo.inodes = 30000;
  Rig r(128 << 20, mo);
  const int n = 20000;
  std::vector<uint64_t> inos;
  for (int i = 0; i < n; i++) {
    const std::string name = "o" + std::to_string(i);
    inos.push_back(r.create(disk::ROOT_INO, name));
    REQUIRE(r.fs->open(inos.back()) == 0);
    REQUIRE(r.fs->unlink(disk::ROOT_INO, name) == 0);
    r.fs->forget(inos.back(), 1);  // the kernel's lookup reference goes; the open file stays
  }
  struct statvfs before;
  REQUIRE(r.fs->statfs(&before) == 0);
  // The first half in unlink order (always the tail), then every third of the rest.
  for (int i = 0; i < n / 2; i++) REQUIRE(r.fs->release(inos[size_t(i)]) == 0);
  int released = n / 2;
  for (int i = n / 2; i < n; i += 3, released++) REQUIRE(r.fs->release(inos[size_t(i)]) == 0);
  struct statvfs mid;
  REQUIRE(r.fs->statfs(&mid) == 0);
  CHECK(mid.f_ffree == before.f_ffree + uint64_t(released));
  // What is left is still one list: a crash now, and the mount frees every one of them.
  REQUIRE(r.fs->sync() == 0);
  r.fs->crash();
  r.fs.reset();
  r.mount();
  CHECK(r.fs->superblock().orphan_head == 0);
  struct statvfs after;
  REQUIRE(r.fs->statfs(&after) == 0);
  CHECK(after.f_ffree == before.f_ffree + uint64_t(n));
  check_fsck_clean(r);
}

TEST_CASE("fs core: a write right after a delete on a full filesystem gets the freed space, no sync between") {
  // The freed blocks wait for the next commit; the allocation forces it (ext4_should_retry_alloc)
  // instead of answering ENOSPC while statfs shows the space free. A journal large enough that
  // its own rule (commit when half full) does not commit first: the rule under test must.
  MkfsOptions mo;
  mo.journal_blocks = 512;
  Rig r(8 << 20, mo);
  const uint64_t big = fill_until_enospc(r, "big");
  REQUIRE(r.fs->unlink(disk::ROOT_INO, "big") == 0);
  r.fs->forget(big, 1);
  const uint64_t again = r.create(disk::ROOT_INO, "again");
  const std::string chunk = pattern(2 << 20, 6);
  CHECK(r.fs->write(again, 0, chunk.size(), chunk.data()) == ssize_t(chunk.size()));
  // The same for fallocate.
  const uint64_t pre = r.create(disk::ROOT_INO, "pre");
  REQUIRE(r.fs->unlink(disk::ROOT_INO, "again") == 0);
  r.fs->forget(again, 1);
  CHECK(r.fs->fallocate(pre, 0, 0, 2 << 20) == 0);
  check_fsck_clean(r);
}

TEST_CASE("fs core: a rename that finds no space for the new name changes nothing") {
  // The new name used to be added after the old one was removed: ENOSPC in between lost both.
  MkfsOptions mo;
  mo.journal_blocks = 64;
  Rig r(8 << 20, mo);
  const uint64_t src = r.create(disk::ROOT_INO, "src");
  REQUIRE(r.fs->write(src, 0, 5, "hello") == 5);
  struct stat st;
  REQUIRE(r.fs->mkdir(disk::ROOT_INO, "d", 0755, 0, 0, &st) == 0);
  const uint64_t d = st.st_ino;
  const std::string stem(240, 'n');
  REQUIRE(r.fs->mknod(d, stem + "0", S_IFREG | 0644, 0, 0, 0, &st) == 0);
  fill_until_enospc(r, "big");
  // Fill d's blocks with long names until a name needs a block that is not there.
  int made = 1, err = 0;
  for (; made < 100000; made++) {
    if ((err = r.fs->mknod(d, stem + std::to_string(made), S_IFREG | 0644, 0, 0, 0, &st))) break;
    r.fs->forget(st.st_ino, 1);
  }
  REQUIRE(err == -ENOSPC);
  struct statvfs sv;
  REQUIRE(r.fs->statfs(&sv) == 0);
  REQUIRE(sv.f_ffree > 0);  // it was the directory block, not an inode, that was missing
  CHECK(r.fs->rename(disk::ROOT_INO, "src", d, stem + "x", 0) == -ENOSPC);
  CHECK(r.lookup(disk::ROOT_INO, "src") == src);
  CHECK(r.lookup(d, stem + "x") == 0);
  // Over an existing name the entry is rewritten in place: that needs no space.
  CHECK(r.fs->rename(disk::ROOT_INO, "src", d, stem + "0", 0) == 0);
  CHECK(r.lookup(d, stem + "0") == src);
  CHECK(r.lookup(disk::ROOT_INO, "src") == 0);
  check_fsck_clean(r);
  CHECK(read_all(*r.fs, r.lookup(d, stem + "0"), 10) == "hello");
}

TEST_CASE("fs core: open with truncate empties the file, updates mtime and ctime, and is journaled") {
  Rig r;
  const uint64_t f = r.create(disk::ROOT_INO, "f");
  const std::string data = pattern(3 * 4096 + 17, 2);
  REQUIRE(r.fs->write(f, 0, data.size(), data.data()) == ssize_t(data.size()));
  struct stat old{}, st;
  old.st_mtim.tv_sec = 1000;
  REQUIRE(r.fs->setattr(f, SETATTR_MTIME, old, &st) == 0);
  REQUIRE(r.fs->open(f, true) == 0);
  REQUIRE(r.fs->getattr(f, &st) == 0);
  CHECK(st.st_size == 0);
  CHECK(st.st_blocks == 0);
  CHECK(st.st_mtim.tv_sec > 1000);
  r.fs->release(f);
  REQUIRE(r.fs->open(f, false) == 0);  // without it nothing changes
  REQUIRE(r.fs->write(f, 0, 2, "hi") == 2);
  REQUIRE(r.fs->open(f, false) == 0);
  CHECK(read_all(*r.fs, f, 100) == "hi");
  r.fs->release(f);
  r.fs->release(f);
  r.remount();
  CHECK(read_all(*r.fs, f, 100) == "hi");
}

TEST_CASE("fs core: set-id bits: an unprivileged write or truncate drops them, chown always, root's write keeps them") {
  Rig r;
  const uint64_t f = r.create(disk::ROOT_INO, "f");
  struct stat a{}, st;
  const auto set_mode = [&](mode_t m) {
    a.st_mode = m;
    REQUIRE(r.fs->setattr(f, SETATTR_MODE, a, &st) == 0);
  };
  const auto mode = [&] {
    REQUIRE(r.fs->getattr(f, &st) == 0);
    return st.st_mode & 07777;
  };
  set_mode(06755);
  REQUIRE(r.fs->write(f, 0, 4096, pattern(4096, 1).data()) == 4096);  // root (fsetid)
  CHECK(mode() == 06755);
  ssize_t n = -1;
  r.fs->write_async(f, Kiocb{.ki_flags = IOCB_KILL_SUIDGID}, 4096, pattern(4096, 2).data(), [&](ssize_t got) { n = got; });
  CHECK(n == 4096);  // an overwrite of written blocks: not the fast path when bits would drop
  CHECK(mode() == 0755);
  set_mode(02745);  // setgid without group exec (mandatory-locking style): stays
  r.fs->write_async(f, Kiocb{.ki_flags = IOCB_KILL_SUIDGID}, 10, "0123456789", [&](ssize_t got) { n = got; });
  CHECK(n == 10);
  CHECK(mode() == 02745);
  set_mode(04755);
  a.st_size = 100;
  REQUIRE(r.fs->setattr(f, SETATTR_SIZE, a, &st, false) == 0);
  CHECK(mode() == 0755);
  set_mode(06755);
  a.st_uid = 0;
  REQUIRE(r.fs->setattr(f, SETATTR_UID, a, &st) == 0);  // even by root, even to the same owner
  CHECK(mode() == 0755);
  // chown and chmod in one call: the mode asked for wins.
  a.st_mode = 04700;
  a.st_uid = 7;
  REQUIRE(r.fs->setattr(f, SETATTR_UID | SETATTR_MODE, a, &st) == 0);
  CHECK(mode() == 04700);
}

TEST_CASE("fs core: fallocate zero range: zeros inside the range, whole blocks unwritten, data outside kept") {
  Rig r;
  const uint64_t f = r.create(disk::ROOT_INO, "f");
  const std::string data = pattern(16 * 4096, 4);
  REQUIRE(r.fs->write(f, 0, data.size(), data.data()) == ssize_t(data.size()));
  const uint64_t off = 1000, len = 5 * 4096;  // partial head, four whole blocks, partial tail
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, len) == 0);
  std::string want = data;
  std::fill(want.begin() + off, want.begin() + off + len, '\0');
  CHECK(read_all(*r.fs, f, data.size()) == want);
  CHECK(r.fs->lseek(f, 4096, SEEK_HOLE) == 4096);  // the whole blocks are unwritten
  CHECK(r.fs->lseek(f, 4096, SEEK_DATA) == 5 * 4096);
  struct stat st;
  REQUIRE(r.fs->getattr(f, &st) == 0);
  CHECK(st.st_size == off_t(data.size()));
  CHECK(st.st_blocks == 16 * 8);  // nothing freed, nothing added
  // Beyond the end, without KEEP_SIZE: the size grows; a range inside one block.
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_ZERO_RANGE, data.size() - 10, 3 * 4096) == 0);
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 9 * 4096 + 5, 7) == 0);
  std::fill(want.end() - 10, want.end(), '\0');
  std::fill(want.begin() + 9 * 4096 + 5, want.begin() + 9 * 4096 + 12, '\0');
  want.resize(data.size() - 10 + 3 * 4096, '\0');
  REQUIRE(r.fs->getattr(f, &st) == 0);
  CHECK(st.st_size == off_t(want.size()));
  CHECK(r.fs->fallocate(f, FALLOC_FL_INSERT_RANGE | FALLOC_FL_KEEP_SIZE, 0, 4096) == -EOPNOTSUPP);
  check_fsck_clean(r);
  CHECK(read_all(*r.fs, f, want.size() + 100) == want);
}

// fallocate's COLLAPSE_RANGE and INSERT_RANGE, as ext4_collapse_range and ext4_insert_range
// (fs/ext4/extents.c) with vfs_fallocate()'s mode rule: block-aligned ranges only, a collapse
// that would reach EOF and an insert at or past it refused, the mappings after the range moved
// (holes and unwritten extents with them, an extent that straddles an insert split), the
// blocks of a collapsed range freed. Inline maps and extent trees alike.
TEST_CASE("fs core: fallocate collapse and insert range: ext4's rules, what follows moves, holes and unwritten blocks with it") {
  Rig r;
  struct stat st;
  const uint64_t f = r.create(disk::ROOT_INO, "f");
  std::string want = pattern(64 * 4096 + 100, 9);  // a partial last block
  REQUIRE(r.fs->write(f, 0, want.size(), want.data()) == ssize_t(want.size()));
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 20 * 4096, 3 * 4096) == 0);
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 40 * 4096, 2 * 4096) == 0);
  std::fill(want.begin() + 20 * 4096, want.begin() + 23 * 4096, '\0');
  std::fill(want.begin() + 40 * 4096, want.begin() + 42 * 4096, '\0');
  const auto blocks = [&] {
    REQUIRE(r.fs->getattr(f, &st) == 0);
    return st.st_blocks / 8;
  };
  REQUIRE(blocks() == 62);
  // The refusals, each before anything changes.
  CHECK(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE, 4096, 4096) == -EOPNOTSUPP);
  CHECK(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE, 4096, 4096) == -EOPNOTSUPP);
  CHECK(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_PUNCH_HOLE, 4096, 4096) == -EOPNOTSUPP);
  CHECK(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 4096 + 512, 4096) == -EINVAL);
  CHECK(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 4096, 4096 + 512) == -EINVAL);
  CHECK(r.fs->fallocate(f, FALLOC_FL_INSERT_RANGE, 512, 4096) == -EINVAL);
  CHECK(r.fs->fallocate(f, FALLOC_FL_INSERT_RANGE, 4096, 512) == -EINVAL);
  CHECK(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 60 * 4096, 5 * 4096) == -EINVAL);  // to EOF
  CHECK(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 0, 70 * 4096) == -EINVAL);         // past it
  CHECK(r.fs->fallocate(f, FALLOC_FL_INSERT_RANGE, 65 * 4096, 4096) == -EINVAL);        // at or past EOF
  CHECK(r.fs->fallocate(f, FALLOC_FL_INSERT_RANGE, 0, (disk::MAX_FILE_BLOCKS - 32) * 4096) == -EFBIG);
  CHECK((read_all(*r.fs, f, want.size() + 10) == want));
  CHECK(blocks() == 62);
  // Collapse four blocks, one of them in the hole: three blocks freed, the rest moved down,
  // the hole and the unwritten blocks with it.
  REQUIRE(r.fs->getattr(f, &st) == 0);
  const struct timespec before = st.st_mtim;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 17 * 4096, 4 * 4096) == 0);
  want.erase(17 * 4096, 4 * 4096);
  CHECK((read_all(*r.fs, f, want.size() + 10) == want));
  CHECK(blocks() == 59);
  REQUIRE(r.fs->getattr(f, &st) == 0);
  CHECK(st.st_size == off_t(want.size()));
  CHECK((st.st_mtim.tv_sec != before.tv_sec || st.st_mtim.tv_nsec != before.tv_nsec));
  CHECK(r.fs->lseek(f, 17 * 4096, SEEK_DATA) == 19 * 4096);       // what is left of the hole
  CHECK(r.fs->lseek(f, 30 * 4096, SEEK_HOLE) == 36 * 4096);       // the unwritten blocks, moved
  // Insert three blocks inside one extent (it splits) and one at the start: holes, nothing allocated.
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_INSERT_RANGE, 5 * 4096, 3 * 4096) == 0);
  want.insert(5 * 4096, std::string(3 * 4096, '\0'));
  REQUIRE(r.fs->fallocate(f, FALLOC_FL_INSERT_RANGE, 0, 4096) == 0);
  want.insert(0, std::string(4096, '\0'));
  CHECK((read_all(*r.fs, f, want.size() + 10) == want));
  CHECK(blocks() == 60);  // no data block added; the split made five extents: a tree block
  CHECK(r.fs->lseek(f, 0, SEEK_DATA) == 4096);
  CHECK(r.fs->lseek(f, 4096, SEEK_HOLE) == 6 * 4096);
  CHECK(r.fs->lseek(f, 6 * 4096, SEEK_DATA) == 9 * 4096);
  // Written into an inserted hole: allocated there, the rest unchanged.
  const std::string fill = pattern(4096, 11);
  REQUIRE(r.fs->write(f, 7 * 4096, fill.size(), fill.data()) == 4096);
  want.replace(7 * 4096, 4096, fill);
  check_fsck_clean(r);
  CHECK((read_all(*r.fs, f, want.size() + 10) == want));
  // An extent tree: a file of 300 one-block extents (another file's blocks between them).
  const uint64_t g = r.create(disk::ROOT_INO, "g"), gap = r.create(disk::ROOT_INO, "gap");
  std::string gwant;
  for (int i = 0; i < 300; i++) {
    const std::string b = pattern(4096, 100 + i);
    REQUIRE(r.fs->write(g, uint64_t(i) * 4096, 4096, b.data()) == 4096);
    REQUIRE(r.fs->write(gap, uint64_t(i) * 4096, 4096, b.data()) == 4096);
    gwant += b;
  }
  CHECK(r.fs->fallocate(g, FALLOC_FL_COLLAPSE_RANGE, 290 * 4096, 10 * 4096) == -EINVAL);  // ends at EOF
  CHECK(r.fs->fallocate(g, FALLOC_FL_INSERT_RANGE, 300 * 4096, 4096) == -EINVAL);         // at EOF
  REQUIRE(r.fs->fallocate(g, FALLOC_FL_COLLAPSE_RANGE, 10 * 4096, 150 * 4096) == 0);
  gwant.erase(10 * 4096, 150 * 4096);
  REQUIRE(r.fs->fallocate(g, FALLOC_FL_INSERT_RANGE, 7 * 4096, 200 * 4096) == 0);
  gwant.insert(7 * 4096, std::string(200 * 4096, '\0'));
  CHECK((read_all(*r.fs, g, gwant.size() + 10) == gwant));
  check_fsck_clean(r);
  CHECK((read_all(*r.fs, g, gwant.size() + 10) == gwant));
  CHECK((read_all(*r.fs, f, want.size() + 10) == want));
}
