// The on-disk format: mkfs geometry, superblock round trip and its checksum, block and inode
// checksums, refusing an existing filesystem, a too-small device.
#include <doctest/doctest.h>

#include <uuid/uuid.h>

#include <cstring>

#include "blockcore/brd.h"
#include "fs/io_buf.h"
#include "fs/mkfs.h"

using namespace biofs;
using namespace biofs::disk;

TEST_CASE("format: mkfs writes a superblock that reads back and checks") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(64 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  MkfsOptions o;
  o.label = "test-label";
  SuperBlock made;
  REQUIRE(make_filesystem(io, o, &made).message() == "");
  SuperBlock sb;
  CHECK(read_superblock(io, &sb) == "");
  CHECK(std::memcmp(&sb, &made, sizeof(sb)) == 0);
  CHECK(sb.block_size == 4096);
  CHECK(sb.block_count == 16384);
  CHECK(std::string(sb.label) == "test-label");
  CHECK(sb.data_start < sb.block_count);
  // The backup is identical.
  SuperBlock backup;
  d.peek(sb.backup_sb_block * 4096, &backup, sizeof(backup));
  CHECK(std::memcmp(&backup, &sb, sizeof(sb)) == 0);
  // The bitmaps and the journal superblock carry valid checksums.
  IoBuf blk(4096);
  REQUIRE(io.read(sb.block_bitmap_start, 1, blk.data()) == 0);
  CHECK(block_crc_ok(blk.data(), 4096));
  REQUIRE(io.read(sb.journal_start, 1, blk.data()) == 0);
  CHECK(block_crc_ok(blk.data(), 4096));
  REQUIRE(io.read(sb.inode_table_start, 1, blk.data()) == 0);
  const Inode* root = reinterpret_cast<const Inode*>(blk.data());
  CHECK(inode_crc(ROOT_INO, *root) == root->checksum);
  CHECK(inode_crc(2, *root) != root->checksum);  // seeded with the inode number
}

// The UUID is libuuid's (uuid_generate, as mke2fs): a random RFC 4122 UUID, version 4, variant
// 10xx, different for each filesystem, and shared by the journal superblock.
TEST_CASE("format: each filesystem gets its own random RFC 4122 UUID") {
  SuperBlock sbs[2];
  for (SuperBlock& sb : sbs) {
    std::unique_ptr<BrdDevice> d_owner;
    REQUIRE(BrdDevice::create(64 << 20, &d_owner).ok());
    BrdDevice& d = *d_owner;
    BlockIo io(d.bdev(), 4096);
    REQUIRE(io.init() == 0);
    REQUIRE(make_filesystem(io, MkfsOptions{}, &sb).message() == "");
    CHECK(uuid_is_null(sb.uuid) == 0);
    CHECK(uuid_type(sb.uuid) == UUID_TYPE_DCE_RANDOM);  // version 4
    CHECK(uuid_variant(sb.uuid) == UUID_VARIANT_DCE);    // RFC 4122
    IoBuf blk(4096);
    REQUIRE(io.read(sb.journal_start, 1, blk.data()) == 0);
    CHECK(std::memcmp(reinterpret_cast<const JournalSuper*>(blk.data())->uuid, sb.uuid, 16) == 0);
  }
  CHECK(uuid_compare(sbs[0].uuid, sbs[1].uuid) != 0);
}

TEST_CASE("format: a corrupted superblock is detected and the backup is used") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(16 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  REQUIRE(make_filesystem(io, MkfsOptions{}).message() == "");
  const uint8_t junk = 0x77;
  d.poke(100, &junk, 1);  // inside the superblock's fields
  SuperBlock sb;
  CHECK(read_superblock(io, &sb, false) == "superblock checksum mismatch");
  CHECK(read_superblock(io, &sb, true) == "");
  CHECK(sb.magic == SB_MAGIC);
  // Both damaged: refused.
  d.poke(sb.backup_sb_block * 4096 + 100, &junk, 1);
  CHECK(read_superblock(io, &sb, true) == "superblock checksum mismatch");
}

TEST_CASE("format: a flipped bit in a metadata block fails its checksum") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(16 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  SuperBlock sb;
  REQUIRE(make_filesystem(io, MkfsOptions{}, &sb).message() == "");
  IoBuf blk(4096);
  REQUIRE(io.read(sb.block_bitmap_start, 1, blk.data()) == 0);
  REQUIRE(block_crc_ok(blk.data(), 4096));
  blk.data()[2000] ^= 0x10;
  CHECK_FALSE(block_crc_ok(blk.data(), 4096));
}

TEST_CASE("format: mkfs refuses an existing filesystem without force, and a tiny device") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(16 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  REQUIRE(make_filesystem(io, MkfsOptions{}).message() == "");
  CHECK(make_filesystem(io, MkfsOptions{}).message() == "device already holds a biofs filesystem (use -f to overwrite it)");
  MkfsOptions f;
  f.force = true;
  f.block_size = 1024;
  CHECK(make_filesystem(io, f).message() == "");
  SuperBlock sb;
  CHECK(read_superblock(io, &sb) == "");
  CHECK(sb.block_size == 1024);

  std::unique_ptr<BrdDevice> tiny_owner;
  REQUIRE(BrdDevice::create(64 << 10, &tiny_owner).ok());
  BrdDevice& tiny = *tiny_owner;
  BlockIo tio(tiny.bdev(), 4096);
  REQUIRE(tio.init() == 0);
  const std::string why = make_filesystem(tio, MkfsOptions{}).message();
  CHECK(why.rfind("device too small", 0) == 0);
  MkfsOptions bad;
  bad.block_size = 3000;
  bad.force = true;
  CHECK(make_filesystem(io, bad).message().find("not a power of two") != std::string::npos);
}

TEST_CASE("format: a superblock larger than the device is a truncated image") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(16 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  SuperBlock sb;
  REQUIRE(make_filesystem(io, MkfsOptions{}, &sb).message() == "");
  CHECK(check_superblock(sb, 8 << 20).find("truncated") != std::string::npos);
  CHECK(check_superblock(sb, 16 << 20) == "");
}
