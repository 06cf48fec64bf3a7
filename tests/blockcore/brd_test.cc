// brd: data kept across bios, zeros for never-written sectors, bounds, flush, discard.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <string>

#include "blockcore/brd.h"

using namespace biofs;

namespace {

struct Wait {
  std::atomic<int> done{0};
  blk_status_t status = BLK_STS_OK;
};
void end_io(Bio* bio) {
  auto* w = static_cast<Wait*>(bio->bi_private);
  w->status = bio->bi_status;
  bio_put(bio);
  w->done = 1;
}

blk_status_t rw(BrdDevice& d, BioSet& bs, blk_opf_t op, sector_t sector, void* buf, uint32_t len) {
  Wait w;
  Bio* bio = bio_alloc_bioset(d.bdev(), 4, op, GFP_KERNEL, &bs);
  if (len) REQUIRE(bio_add_virt(bio, buf, len) == len);
  bio->bi_iter.bi_sector = sector;
  bio->bi_end_io = end_io;
  bio->bi_private = &w;
  submit_bio(bio);
  REQUIRE(w.done == 1);  // brd completes inline
  return w.status;
}

}  // namespace

TEST_CASE("brd: never-written sectors read as zeros and allocate nothing") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t buf[8192];
  std::memset(buf, 0xAA, sizeof(buf));
  CHECK(rw(d, bs, REQ_OP_READ, 100, buf, 8192) == BLK_STS_OK);
  for (uint8_t b : buf) REQUIRE(b == 0);
  CHECK(d.pages_allocated() == 0);
}

TEST_CASE("brd: a write is read back, including across page boundaries at odd sectors") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t out[3 * 4096], in[3 * 4096];
  for (size_t i = 0; i < sizeof(out); i++) out[i] = uint8_t(i * 7 + 3);
  CHECK(rw(d, bs, REQ_OP_WRITE, 7, out, sizeof(out)) == BLK_STS_OK);  // starts mid-page
  CHECK(rw(d, bs, REQ_OP_READ, 7, in, sizeof(in)) == BLK_STS_OK);
  CHECK(std::memcmp(out, in, sizeof(out)) == 0);
  // The sectors just before and after stay zero.
  alignas(512) uint8_t edge[512];  // the queue's dma_alignment: 512
  CHECK(rw(d, bs, REQ_OP_READ, 6, edge, 512) == BLK_STS_OK);
  for (uint8_t b : edge) REQUIRE(b == 0);
  CHECK(rw(d, bs, REQ_OP_READ, 7 + 24, edge, 512) == BLK_STS_OK);
  for (uint8_t b : edge) REQUIRE(b == 0);
  uint8_t direct[16];
  d.peek(7 * 512, direct, 16);
  CHECK(std::memcmp(direct, out, 16) == 0);
}

TEST_CASE("brd: I/O past the end fails with an I/O error") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(64 * 1024, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  alignas(512) static uint8_t buf[1024] = {};
  CHECK(rw(d, bs, REQ_OP_WRITE, 127, buf, 1024) == BLK_STS_IOERR);
  CHECK(rw(d, bs, REQ_OP_WRITE, 126, buf, 1024) == BLK_STS_OK);
}

TEST_CASE("brd: flush completes and is counted, a 4096-byte device rejects bad sizes") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, 4096, Toggles{}, 1, 128, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  CHECK(rw(d, bs, REQ_OP_FLUSH | REQ_PREFLUSH, 0, nullptr, 0) == BLK_STS_OK);
  CHECK(d.flushes() == 1);
}

TEST_CASE("brd: create refuses a bad block size, a size below one block and a queue setting, in one line each") {
  std::unique_ptr<BrdDevice> d;
  auto refused = [&](uint64_t bytes, unsigned lbs, unsigned queues, unsigned qd) {
    const Status s = BrdDevice::create(bytes, lbs, Toggles{}, queues, qd, &d);
    CHECK_FALSE(d);
    CHECK(s.code() == Status::Code::invalid_argument);
    return s.message();
  };
  for (unsigned lbs : {1000u, 256u, 8192u, 0u})
    CHECK(refused(1 << 20, lbs, 1, 128) ==
          "brd: logical block size " + std::to_string(lbs) + " is not a power of two from 512 to 4096");
  CHECK(refused(100, 512, 1, 128) == "brd: size is smaller than one logical block");
  CHECK(refused(4095, 4096, 1, 128) == "brd: size is smaller than one logical block");
  CHECK(refused(1 << 20, 512, 1, 0) == "qd=0: expected 1..65536");
  CHECK(refused(1 << 20, 512, 1, 65537) == "qd=65537: expected 1..65536");
  CHECK(refused(1 << 20, 512, 0, 128) == "queues=0: expected 1..256");
  CHECK(refused(1 << 20, 512, 257, 128) == "queues=257: expected 1..256");
  // The bounds themselves are accepted.
  for (unsigned lbs : {512u, 4096u}) {
    CAPTURE(lbs);
    REQUIRE(BrdDevice::create(lbs, lbs, Toggles{}, 256, 1, &d).ok());
    CHECK(d->bytes() == lbs);
    CHECK(d->queue()->nr_hw_queues() == 256);
    REQUIRE(BrdDevice::create(lbs, lbs, Toggles{}, 1, 65536, &d).ok());
    CHECK(d->queue()->queue_depth() == 65536);
  }
}

TEST_CASE("brd: discard drops whole pages and zeroes partial ones") {
  std::unique_ptr<BrdDevice> d_owner;
  REQUIRE(BrdDevice::create(1 << 20, &d_owner).ok());
  BrdDevice& d = *d_owner;
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  alignas(4096) static uint8_t out[8192];
  std::memset(out, 0x5A, sizeof(out));
  CHECK(rw(d, bs, REQ_OP_WRITE, 0, out, sizeof(out)) == BLK_STS_OK);
  Wait w;
  Bio* bio = bio_alloc_bioset(d.bdev(), 0, REQ_OP_DISCARD, GFP_KERNEL, &bs);
  bio->bi_iter.bi_sector = 4;  // the second half of page 0 and all of page 1
  bio->bi_iter.bi_size = 4096 + 2048;
  bio->bi_end_io = end_io;
  bio->bi_private = &w;
  submit_bio(bio);
  CHECK(w.status == BLK_STS_OK);
  CHECK(d.pages_allocated() == 1);
  uint8_t in[8192];
  d.peek(0, in, sizeof(in));
  for (int i = 0; i < 2048; i++) REQUIRE(in[i] == 0x5A);
  for (int i = 2048; i < 8192; i++) REQUIRE(in[i] == 0);
}
