// Tests for bvec.h: iterator advance and segment iteration over multi-page bvecs.
#include <doctest/doctest.h>

#include <vector>

#include "blockcore/bvec.h"

using namespace biofs;

namespace {
alignas(PAGE_SIZE) uint8_t buf[4 * PAGE_SIZE];
}

TEST_CASE("bvec_iter_advance moves across vecs and tracks the offset inside one") {
  BioVec table[3] = {{buf, 1000, 0}, {buf + PAGE_SIZE, 500, 0}, {buf + 2 * PAGE_SIZE, 2000, 100}};
  BvecIter it{.bi_sector = 0, .bi_size = 3500};
  CHECK(bvec_iter_advance(table, it, 999));
  CHECK(it.bi_idx == 0);
  CHECK(it.bi_bvec_done == 999);
  CHECK(it.bi_size == 2501);
  CHECK(bvec_iter_advance(table, it, 1));  // exactly the end of vec 0
  CHECK(it.bi_idx == 1);
  CHECK(it.bi_bvec_done == 0);
  CHECK(bvec_iter_advance(table, it, 700));  // 500 of vec 1, 200 into vec 2
  CHECK(it.bi_idx == 2);
  CHECK(it.bi_bvec_done == 200);
  const BioVec cur = mp_bvec_iter_bvec(table, it);
  CHECK(cur.bv_offset == 300);
  CHECK(cur.bv_len == 1800);
  CHECK_FALSE(bvec_iter_advance(table, it, 1801));  // past the end: refused
  CHECK(it.bi_size == 0);
}

TEST_CASE("single-page segments of a multi-page bvec never cross a page") {
  BioVec table[1] = {{buf, 6000, 3000}};  // bytes 3000..8999 of buf: pages 0, 1, 2
  BvecIter it{.bi_size = 6000};
  std::vector<BioVec> segs;
  for_each_segment(table, it, [&](const BioVec& s) { segs.push_back(s); });
  REQUIRE(segs.size() == 3);
  CHECK(segs[0].bv_page == buf);
  CHECK(segs[0].bv_offset == 3000);
  CHECK(segs[0].bv_len == PAGE_SIZE - 3000);
  CHECK(segs[1].bv_page == buf + PAGE_SIZE);
  CHECK(segs[1].bv_offset == 0);
  CHECK(segs[1].bv_len == PAGE_SIZE);
  CHECK(segs[2].bv_page == buf + 2 * PAGE_SIZE);
  CHECK(segs[2].bv_len == 6000 - (PAGE_SIZE - 3000) - PAGE_SIZE);
  unsigned mp = 0;
  for_each_mp_bvec(table, it, [&](const BioVec& bv) {
    mp++;
    CHECK(bv.bv_len == 6000);
  });
  CHECK(mp == 1);
}

TEST_CASE("segment iteration honours a partial iterator (as a clone or split sees it)") {
  BioVec table[2] = {{buf, PAGE_SIZE, 0}, {buf + PAGE_SIZE, PAGE_SIZE, 0}};
  BvecIter it{.bi_size = 2 * PAGE_SIZE};
  bvec_iter_advance(table, it, 512);
  it.bi_size = PAGE_SIZE;  // the window 512 .. 4096+512
  uint32_t total = 0;
  std::vector<uint8_t*> starts;
  for_each_segment(table, it, [&](const BioVec& s) {
    total += s.bv_len;
    starts.push_back(bvec_virt(s));
  });
  CHECK(total == PAGE_SIZE);
  REQUIRE(starts.size() == 2);
  CHECK(starts[0] == buf + 512);
  CHECK(starts[1] == buf + PAGE_SIZE);
}
