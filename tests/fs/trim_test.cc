// FITRIM on the filesystem core over brd (whose discard drops pages: they read back as zeros),
// against fs/trim.h's rules from ext4_trim_fs(): free runs inside the range discarded and
// counted, runs shorter than minlen kept, blocks freed by the running transaction kept until it
// commits, ext4's refusals of a range, and a trim racing writers that allocate.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "blockcore/brd.h"
#include "tests/blockcore/test_brd.h"
#include "fs/file.h"
#include "fs/filesystem.h"
#include "fs/io_buf.h"
#include "fs/mkfs.h"
#include "fs/trim.h"

using namespace biofs;

namespace {

constexpr uint32_t kBs = 4096;

struct Rig {
  std::unique_ptr<BrdDevice> dev_owner = test::make_test_brd(32 << 20);
  BrdDevice& dev = *dev_owner;
  BlockIo io{dev.bdev(), kBs};
  std::unique_ptr<Filesystem> fs;

  explicit Rig(bool read_only = false) {
    REQUIRE(io.init() == 0);
    REQUIRE(make_filesystem(io, MkfsOptions{}).message() == "");
    mount(read_only);
  }
  void mount(bool read_only = false) {
    MountOptions o;
    o.commit_interval_s = 0;
    o.read_only = read_only;
    fs.reset();
    const Status st = Filesystem::mount(io, o, &fs);
    REQUIRE_MESSAGE(st.ok(), st.message());
  }
  // A file of `blocks` blocks, each starting with "<tag> <index>", committed.
  uint64_t make(const std::string& name, const std::string& tag, unsigned blocks) {
    struct stat st;
    REQUIRE(fs->mknod(1, name, S_IFREG | 0644, 0, 0, 0, &st) == 0);
    std::string data(size_t(blocks) * kBs, 'x');
    for (unsigned i = 0; i < blocks; i++) {
      const std::string mark = tag + " " + std::to_string(i);
      std::memcpy(&data[size_t(i) * kBs], mark.data(), mark.size());
    }
    REQUIRE(fs->write(st.st_ino, 0, data.size(), data.data()) == ssize_t(data.size()));
    REQUIRE(fs->fsync(st.st_ino, false) == 0);
    return st.st_ino;
  }
  // How many device blocks start with `tag` followed by a space: the file's blocks still there.
  unsigned blocks_on_device(const std::string& tag) {
    IoBuf b(kBs);
    unsigned n = 0;
    for (uint64_t blk = 0; blk < io.nr_blocks(); blk++) {
      REQUIRE(io.read(blk, 1, b.data()) == 0);
      n += std::memcmp(b.data(), (tag + " ").data(), tag.size() + 1) == 0;
    }
    return n;
  }
  // unlink, and the kernel's forget of the lookup mknod counted: the inode and its blocks go.
  void remove(const std::string& name) {
    struct stat st;
    if (fs->lookup(1, name, &st) != 0) return;
    REQUIRE(fs->unlink(1, name) == 0);
    fs->forget(st.st_ino, 2);  // mknod's lookup and this one
  }
  int trim(uint64_t start, uint64_t len, uint64_t minlen, uint64_t* trimmed) {
    return fs->trim(TrimRange{start, len, minlen}, trimmed);
  }
};

}  // namespace

TEST_CASE("trim: the free space is discarded and counted, what files hold is kept, fsck stays clean") {
  Rig r;
  r.make("kept", "KEPT", 40);
  r.make("gone", "GONE", 60);
  r.remove("gone");
  REQUIRE(r.fs->sync() == 0);  // the free is committed: the blocks may go
  REQUIRE(r.blocks_on_device("GONE") == 60);
  struct statvfs v;
  REQUIRE(r.fs->statfs(&v) == 0);
  uint64_t trimmed = 0;
  REQUIRE(r.trim(0, UINT64_MAX, 0, &trimmed) == 0);
  CHECK(r.blocks_on_device("GONE") == 0);
  CHECK(r.blocks_on_device("KEPT") == 40);
  // Every free block of the data area, and nothing else (the blocks before it are metadata).
  CHECK(trimmed == uint64_t(v.f_bfree) * kBs);
  REQUIRE(r.fs->unmount() == 0);
  r.mount();
  struct stat st;
  REQUIRE(r.fs->lookup(1, "kept", &st) == 0);
  std::string back(40 * kBs, '\0');
  CHECK(r.fs->read(st.st_ino, 0, back.size(), back.data()) == ssize_t(back.size()));
  CHECK(back.compare(0, 6, "KEPT 0") == 0);
  CHECK(back.compare(39 * kBs, 7, "KEPT 39") == 0);
}

TEST_CASE("trim: blocks freed by the running transaction stay until it commits, so a crash gets the data back") {
  Rig r;
  const uint64_t ino = r.make("f", "FILE", 30);
  struct stat zero {}, out;
  REQUIRE(r.fs->setattr(ino, SETATTR_SIZE, zero, &out) == 0);  // truncated, not committed
  uint64_t trimmed = 0;
  REQUIRE(r.trim(0, UINT64_MAX, 0, &trimmed) == 0);
  CHECK(r.blocks_on_device("FILE") == 30);
  r.fs->crash();
  r.mount();
  struct stat st;
  REQUIRE(r.fs->lookup(1, "f", &st) == 0);
  std::string back(30 * kBs, '\0');
  REQUIRE(r.fs->read(st.st_ino, 0, back.size(), back.data()) == ssize_t(back.size()));
  CHECK(back.compare(29 * kBs, 7, "FILE 29") == 0);
}

TEST_CASE("trim: runs shorter than minlen and runs outside the range are kept") {
  Rig r;
  // a b c d, one after another; b (1 block) and d's tail region freed: b is a 1-block hole.
  r.make("a", "AAAA", 8);
  r.make("b", "BBBB", 1);
  r.make("c", "CCCC", 8);
  r.remove("b");
  REQUIRE(r.fs->sync() == 0);
  uint64_t trimmed = 0;
  REQUIRE(r.trim(0, UINT64_MAX, 2 * kBs, &trimmed) == 0);
  CHECK(r.blocks_on_device("BBBB") == 1);  // a run of one block, minlen two
  CHECK(trimmed > 0);                     // the free space after c
  // A range that ends before the hole leaves it too; one that covers it takes it.
  r.make("e", "EEEE", 4);
  r.remove("e");
  REQUIRE(r.fs->sync() == 0);
  REQUIRE(r.trim(0, kBs, 0, &trimmed) == 0);  // block 0: the superblock, never free
  CHECK(trimmed == 0);
  CHECK(r.blocks_on_device("EEEE") == 4);
  REQUIRE(r.trim(0, UINT64_MAX, 0, &trimmed) == 0);
  CHECK(r.blocks_on_device("BBBB") == 0);
  CHECK(r.blocks_on_device("EEEE") == 0);
}

TEST_CASE("trim: ext4's refusals: a start past the end, a length under a block, minlen over a group, a read-only mount") {
  Rig r;
  uint64_t t;
  const uint64_t size = r.io.nr_blocks() * kBs;
  CHECK(r.trim(size, UINT64_MAX, 0, &t) == -EINVAL);
  CHECK(r.trim(size - kBs, UINT64_MAX, 0, &t) == 0);  // the last block: inside
  CHECK(r.trim(UINT64_MAX, 1 << 20, 0, &t) == -EINVAL);
  CHECK(r.trim(0, kBs - 1, 0, &t) == -EINVAL);
  CHECK(r.trim(0, kBs, 0, &t) == 0);
  const uint64_t group = uint64_t(disk::bitmap_bits_per_block(kBs)) * kBs;
  CHECK(r.trim(0, UINT64_MAX, group + kBs, &t) == -EINVAL);
  CHECK(r.trim(0, UINT64_MAX, group, &t) == 0);
  CHECK(r.trim(10 << 20, UINT64_MAX, 0, &t) == 0);  // start + len wraps past 2^64: to the end
  CHECK(t > 0);
  REQUIRE(r.fs->unmount() == 0);
  r.mount(true);
  CHECK(r.trim(0, UINT64_MAX, 0, &t) == -EROFS);
}

// generic/038's race: files made, written and deleted while trims run. Every file's data is
// intact at the end, and fsck has nothing to say.
TEST_CASE("trim: concurrent trims and writers that allocate lose nothing") {
  Rig r;
  std::atomic<bool> stop{false};
  std::atomic<int> trims{0};
  std::thread trimmer([&] {
    while (!stop.load()) {
      uint64_t t;
      CHECK(r.trim(0, UINT64_MAX, 0, &t) == 0);
      trims++;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; w++) {
    writers.emplace_back([&r, w] {
      for (int round = 0; round < 30; round++) {
        const std::string name = "w" + std::to_string(w) + "-" + std::to_string(round % 3);
        r.remove(name);  // the previous use of the name, if any
        const std::string tag = "W" + std::to_string(w) + "R" + std::to_string(round);
        r.make(name, tag, 16);
        if (round % 5 == 0) REQUIRE(r.fs->sync() == 0);  // commits free what was unlinked
      }
    });
  }
  for (auto& t : writers) t.join();
  stop = true;
  trimmer.join();
  CHECK(trims.load() > 0);
  for (int w = 0; w < 4; w++) {
    for (int k = 0; k < 3; k++) {
      const int round = 27 + k;  // the last round to use name k
      struct stat st;
      const std::string name = "w" + std::to_string(w) + "-" + std::to_string(round % 3);
      REQUIRE(r.fs->lookup(1, name, &st) == 0);
      std::string back(16 * kBs, '\0');
      REQUIRE(r.fs->read(st.st_ino, 0, back.size(), back.data()) == ssize_t(back.size()));
      const std::string tag = "W" + std::to_string(w) + "R" + std::to_string(round);
      for (unsigned i = 0; i < 16; i++) {
        const std::string mark = tag + " " + std::to_string(i);
        CHECK(back.compare(size_t(i) * kBs, mark.size(), mark) == 0);
      }
    }
  }
}
