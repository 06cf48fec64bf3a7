// brd: data kept across bios, zeros for never-written sectors, bounds, flush, discard.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>

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
  BrdDevice d(1 << 20);
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  alignas(4096) static uint8_t buf[8192];
  std::memset(buf, 0xAA, sizeof(buf));
  CHECK(rw(d, bs, REQ_OP_READ, 100, buf, 8192) == BLK_STS_OK);
  for (uint8_t b : buf) REQUIRE(b == 0);
  CHECK(d.pages_allocated() == 0);
}

TEST_CASE("brd: a write is read back, including across page boundaries at odd sectors") {
  BrdDevice d(1 << 20);
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
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
  BrdDevice d(64 * 1024);
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  alignas(512) static uint8_t buf[1024] = {};
  CHECK(rw(d, bs, REQ_OP_WRITE, 127, buf, 1024) == BLK_STS_IOERR);
  CHECK(rw(d, bs, REQ_OP_WRITE, 126, buf, 1024) == BLK_STS_OK);
}

TEST_CASE("brd: flush completes and is counted, a 4096-byte device rejects bad sizes") {
  BrdDevice d(1 << 20, 4096);
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  CHECK(rw(d, bs, REQ_OP_FLUSH | REQ_PREFLUSH, 0, nullptr, 0) == BLK_STS_OK);
  CHECK(d.flushes() == 1);
  CHECK_THROWS_AS(BrdDevice(1 << 20, 1000), std::invalid_argument);
  CHECK_THROWS_AS(BrdDevice(100, 512), std::invalid_argument);
}

TEST_CASE("brd: discard drops whole pages and zeroes partial ones") {
  BrdDevice d(1 << 20);
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
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
