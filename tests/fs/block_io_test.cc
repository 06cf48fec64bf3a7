// The fs block I/O helper: sync and batched reads and writes as bios, flush, errors, async
// completion callbacks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "blockcore/brd.h"
#include "fs/block_io.h"
#include "fs/crc32c.h"
#include "fs/io_batch.h"
#include "fs/io_buf.h"

using namespace biofs;

TEST_CASE("crc32c: the standard check value and chaining") {
  CHECK(crc32c(0, "123456789", 9) == 0xE3069283u);
  CHECK(crc32c(crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
  CHECK(crc32c(0, "", 0) == 0u);
}

TEST_CASE("crc32c: the fixed vectors of RFC 3720 (iSCSI), B.4") {
  uint8_t b[32];
  std::memset(b, 0, sizeof(b));
  CHECK(crc32c(0, b, sizeof(b)) == 0x8A9136AAu);
  std::memset(b, 0xFF, sizeof(b));
  CHECK(crc32c(0, b, sizeof(b)) == 0x62A8AB43u);
  for (int i = 0; i < 32; i++) b[i] = uint8_t(i);
  CHECK(crc32c(0, b, sizeof(b)) == 0x46DD794Eu);
  for (int i = 0; i < 32; i++) b[i] = uint8_t(31 - i);
  CHECK(crc32c(0, b, sizeof(b)) == 0x113FDB5Cu);
}

TEST_CASE("crc32c: a checksum continued piece by piece equals one call over the whole") {
  std::vector<uint8_t> data(4096 + 13);
  for (size_t i = 0; i < data.size(); i++) data[i] = uint8_t(i * 131 + (i >> 7));
  const uint32_t whole = crc32c(0, data.data(), data.size());
  CHECK(whole == 0x0624B495u);  // as a bit-at-a-time CRC-32C computes it
  CHECK(crc32c(0, data.data(), 4096) == 0x5F7EBF01u);  // one metadata block's worth
  for (size_t cut : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(63), size_t(4096), data.size()}) {
    CAPTURE(cut);
    CHECK(crc32c(crc32c(0, data.data(), cut), data.data() + cut, data.size() - cut) == whole);
  }
  uint32_t c = 0;  // three-byte pieces: never a whole 8-byte word at a time
  for (size_t at = 0; at < data.size(); at += 3) c = crc32c(c, data.data() + at, std::min<size_t>(3, data.size() - at));
  CHECK(c == whole);
  CHECK(crc32c(whole, "", 0) == whole);  // nothing more changes nothing
}

TEST_CASE("block io: blocks written synchronously read back, unwritten blocks are zero") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(4 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  CHECK(io.nr_blocks() == 1024);
  IoBuf out(3 * 4096), in(3 * 4096);
  for (size_t i = 0; i < out.size(); i++) out.data()[i] = uint8_t(i * 13);
  CHECK(io.write(10, 3, out.data()) == 0);
  CHECK(io.read(10, 3, in.data()) == 0);
  CHECK(std::memcmp(in.data(), out.data(), out.size()) == 0);
  CHECK(io.read(13, 1, in.data()) == 0);
  for (int i = 0; i < 4096; i++) REQUIRE(in.data()[i] == 0);
  CHECK(io.bios >= 3);
}

TEST_CASE("block io: a batch of many bios under one plug, and more than 1 MiB in one call") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(8 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096, BioCache::off);
  REQUIRE(io.init() == 0);
  IoBuf big(3 << 20);
  for (size_t i = 0; i < big.size(); i++) big.data()[i] = uint8_t(i ^ (i >> 12));
  IoBatch b(&io);
  b.write(0, 1, big.data());
  b.write(700, 767, big.data() + 4096);  // crosses several bios
  CHECK(b.wait() == 0);
  IoBuf back(3 << 20);
  CHECK(io.read(700, 767, back.data() + 4096) == 0);
  CHECK(std::memcmp(back.data() + 4096, big.data() + 4096, 767 * 4096) == 0);
}

TEST_CASE("block io: I/O past the end reports -EIO and flush succeeds") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  IoBuf buf(4096);
  CHECK(io.write(256, 1, buf.data()) == -EIO);
  CHECK(io.errors == 1);
  CHECK(io.flush() == 0);
  CHECK(d.flushes() == 1);
  CHECK(io.write(255, 1, buf.data(), REQ_FUA | REQ_PREFLUSH) == 0);
}

TEST_CASE("block io: an async batch calls its callback once with the status") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  IoBuf buf(8192);
  int calls = 0, status = 1;
  {
    IoBatch b(&io);
    b.on_complete([&](int st) { calls++, status = st; });
    b.read(0, 2, buf.data());
    b.submit();
  }
  CHECK(calls == 1);
  CHECK(status == 0);
}

namespace {

// A bio-based device that holds every bio it is given until the test ends it: what was
// submitted, and when, is there to look at.
struct HeldBios {
  BlockDevice bdev;
  std::vector<Bio*> held;
  HeldBios() {
    bdev.capacity = 1 << 20;
    bdev.private_data = this;
    bdev.submit_bio_fn = [](BlockDevice* b, Bio* bio) { static_cast<HeldBios*>(b->private_data)->held.push_back(bio); };
  }
  void end(size_t i, blk_status_t st = BLK_STS_OK) {
    held[i]->bi_status = st;
    bio_endio(held[i]);
  }
};

}  // namespace

TEST_CASE("io batch: each new bio sends the one before, so the submitter holds one bio unsent (blk_next_bio)") {
  HeldBios dev;
  BlockIo io(&dev.bdev, 4096);
  REQUIRE(io.init() == 0);
  IoBuf buf(3 * 4096);
  int calls = 0, status = 1;
  IoBatch b(&io);
  b.on_complete([&](int st) { calls++, status = st; });
  b.read(0, 1, buf.data());
  CHECK(dev.held.empty());  // the first waits for the next, whose parent it becomes
  b.read(10, 1, buf.data() + 4096);
  CHECK(dev.held.size() == 1);
  b.read(20, 1, buf.data() + 8192);
  CHECK(dev.held.size() == 2);
  b.submit();
  REQUIRE(dev.held.size() == 3);
  CHECK(dev.held[0]->bi_iter.bi_sector == 0);
  CHECK(dev.held[2]->bi_iter.bi_sector == 20 * 8);
  CHECK(io.bios.load() == 3);
}

TEST_CASE("io batch: the batch ends once, after its last bio, with the first error any bio saw (bio_chain)") {
  HeldBios dev;
  BlockIo io(&dev.bdev, 4096);
  REQUIRE(io.init() == 0);
  IoBuf buf(3 * 4096);
  int calls = 0, status = 1;
  IoBatch b(&io);
  b.on_complete([&](int st) { calls++, status = st; });
  for (int i = 0; i < 3; i++) b.write(uint64_t(i * 10), 1, buf.data() + i * 4096);
  b.submit();
  REQUIRE(dev.held.size() == 3);
  // The last one submitted ends first, then a middle one fails: still not done.
  dev.end(2);
  dev.end(1, BLK_STS_MEDIUM);
  CHECK(calls == 0);
  dev.end(0);
  CHECK(calls == 1);
  CHECK(status == -EIO);
  CHECK(io.errors.load() == 1);
}

TEST_CASE("io batch: a synchronous batch is waited for whole, and can be used again") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BlockIo io(d.bdev(), 4096);
  REQUIRE(io.init() == 0);
  IoBuf w(4 * 4096), r(4 * 4096);
  for (size_t i = 0; i < w.size(); i++) w.data()[i] = uint8_t(i * 7);
  IoBatch b(&io);
  for (int i = 0; i < 4; i++) b.write(uint64_t(i * 3), 1, w.data() + i * 4096);
  CHECK(b.wait() == 0);
  for (int i = 0; i < 4; i++) b.read(uint64_t(i * 3), 1, r.data() + i * 4096);
  CHECK(b.wait() == 0);
  CHECK(std::memcmp(w.data(), r.data(), w.size()) == 0);
  CHECK(b.wait() == 0);  // nothing built: nothing to wait for
}
