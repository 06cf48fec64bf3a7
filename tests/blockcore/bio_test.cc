// Tests for bio.h: adding pages, references, advance, endio and chaining.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "blockcore/bio_set.h"

using namespace biofs;

namespace {
alignas(PAGE_SIZE) uint8_t buf[8 * PAGE_SIZE];

bool fail_always(void*) { return true; }

struct EndCount {
  int calls = 0;
  blk_status_t status = BLK_STS_OK;
};
void count_end(Bio* bio) {
  auto* e = static_cast<EndCount*>(bio->bi_private);
  e->calls++;
  e->status = bio->bi_status;
}
}  // namespace

TEST_CASE("bio_add_page merges contiguous memory and takes new vecs otherwise") {
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  Bio* bio = bio_alloc_bioset(nullptr, 2, REQ_OP_WRITE, GFP_KERNEL, &bs);
  REQUIRE(bio);
  CHECK(bio->bi_io_vec == bio->bi_inline_vecs);
  CHECK(bio->bi_max_vecs == BIO_INLINE_VECS);
  CHECK(bio_add_page(bio, buf, 100, 0) == 100);
  CHECK(bio_add_page(bio, buf, 200, 100) == 200);  // contiguous: merged
  CHECK(bio->bi_vcnt == 1);
  CHECK(bio->bi_io_vec[0].bv_len == 300);
  // Non-contiguous pieces fill the remaining inline vecs, then the bio is full.
  CHECK(bio_add_page(bio, buf + 2 * PAGE_SIZE, 10, 0) == 10);
  CHECK(bio_add_page(bio, buf + 4 * PAGE_SIZE, 10, 0) == 10);
  CHECK(bio_add_page(bio, buf + 6 * PAGE_SIZE, 10, 0) == 10);
  CHECK(bio->bi_vcnt == 4);
  CHECK(bio_add_page(bio, buf + 7 * PAGE_SIZE, 10, 0) == 0);
  CHECK(bio->bi_iter.bi_size == 330);
  bio_put(bio);
}

TEST_CASE("bio_add_virt takes an unaligned buffer as one multi-page vec") {
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  Bio* bio = bio_alloc_bioset(nullptr, 1, REQ_OP_READ, GFP_KERNEL, &bs);
  CHECK(bio_add_virt(bio, buf + 100, 3 * PAGE_SIZE) == 3 * PAGE_SIZE);
  REQUIRE(bio->bi_vcnt == 1);
  CHECK(bio->bi_io_vec[0].bv_page == buf);
  CHECK(bio->bi_io_vec[0].bv_offset == 100);
  int segments = 0;
  bio_for_each_segment(bio, [&](const BioVec&) { segments++; });
  CHECK(segments == 4);  // 3 pages of data starting 100 bytes in touch 4 pages
  bio_put(bio);
}

TEST_CASE("large bios get a bvec table from the set's pool in the kernel's sizes") {
  BioSet bs(2, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  Bio* bio = bio_alloc_bioset(nullptr, 20, REQ_OP_WRITE, GFP_KERNEL, &bs);
  REQUIRE(bio);
  CHECK(bio->bi_io_vec != bio->bi_inline_vecs);
  CHECK(bio->bi_max_vecs == 64);  // rounded up to the next biovec slab
  for (int i = 0; i < 64; i++) CHECK(bio_add_page(bio, buf + (i % 2) * 4 * PAGE_SIZE, 8, 0) == 8);
  CHECK(bio->bi_vcnt == 64);
  bio_put(bio);
  Bio* max = bio_alloc_bioset(nullptr, 200, REQ_OP_WRITE, GFP_KERNEL, &bs);
  CHECK(max->bi_max_vecs == BIO_MAX_VECS);
  bio_put(max);
}

TEST_CASE("with the allocator failing, a small bvec table falls back to the BIO_MAX_VECS reserve") {
  BioSet bs(2, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  bs.allocator().set_fail_hook(fail_always, nullptr);
  Bio* bio = bio_alloc_bioset(nullptr, 20, REQ_OP_WRITE, GFP_KERNEL, &bs);
  REQUIRE(bio);
  CHECK(bio->bi_max_vecs == BIO_MAX_VECS);
  CHECK(bio_alloc_bioset(nullptr, 20, REQ_OP_WRITE, GFP_NOWAIT, &bs) == nullptr);  // vecs: nowait
  bio_put(bio);
  bs.allocator().set_fail_hook(nullptr, nullptr);
}

TEST_CASE("bio_get keeps the bio alive until the last bio_put") {
  // One-element reserve and a failing allocator: the only bio there is comes from the reserve,
  // so a second allocation succeeds only once the first bio has really been freed.
  BioSet bs(1, 0, 0);
  REQUIRE(bs.init() == 0);
  bs.allocator().set_fail_hook(fail_always, nullptr);
  Bio* bio = bio_alloc_bioset(nullptr, 0, REQ_OP_READ, GFP_NOWAIT, &bs);
  REQUIRE(bio);
  bio_get(bio);
  CHECK(bio_flagged(bio, BIO_REFFED));
  bio_put(bio);
  CHECK(bio_alloc_bioset(nullptr, 0, REQ_OP_READ, GFP_NOWAIT, &bs) == nullptr);
  bio_put(bio);
  Bio* again = bio_alloc_bioset(nullptr, 0, REQ_OP_READ, GFP_NOWAIT, &bs);
  CHECK(again == bio);
  bio_put(again);
  bs.allocator().set_fail_hook(nullptr, nullptr);
}

TEST_CASE("bio_advance moves sector and iterator while no-data ops only count bytes") {
  BioSet bs(2, 0, 0);
  REQUIRE(bs.init() == 0);
  Bio* bio = bio_alloc_bioset(nullptr, 2, REQ_OP_READ, GFP_KERNEL, &bs);
  bio_add_page(bio, buf, PAGE_SIZE, 0);
  bio_add_page(bio, buf + 2 * PAGE_SIZE, PAGE_SIZE, 0);
  bio->bi_iter.bi_sector = 100;
  bio_advance(bio, 5120);
  CHECK(bio->bi_iter.bi_sector == 110);
  CHECK(bio->bi_iter.bi_idx == 1);
  CHECK(bio->bi_iter.bi_bvec_done == 1024);
  CHECK(bio->bi_iter.bi_size == 3072);
  bio_put(bio);

  Bio* discard = bio_alloc_bioset(nullptr, 0, REQ_OP_DISCARD, GFP_KERNEL, &bs);
  discard->bi_iter.bi_size = 1 << 20;
  bio_advance(discard, 4096);
  CHECK(discard->bi_iter.bi_size == (1 << 20) - 4096);
  CHECK(discard->bi_iter.bi_sector == 8);
  bio_put(discard);
}

TEST_CASE("bio_endio calls bi_end_io once with the bio's status") {
  BioSet bs(2, 0, 0);
  REQUIRE(bs.init() == 0);
  EndCount e;
  Bio* bio = bio_alloc_bioset(nullptr, 0, REQ_OP_WRITE, GFP_KERNEL, &bs);
  bio->bi_end_io = count_end;
  bio->bi_private = &e;
  bio_io_error(bio);
  CHECK(e.calls == 1);
  CHECK(e.status == BLK_STS_IOERR);
  CHECK(blk_status_to_errno(e.status) == -EIO);
  bio_put(bio);
}

TEST_CASE("a chained parent completes once, after every child, with the first error") {
  BioSet bs(8, 0, 0);
  REQUIRE(bs.init() == 0);
  EndCount e;
  Bio* parent = bio_alloc_bioset(nullptr, 0, REQ_OP_WRITE, GFP_KERNEL, &bs);
  parent->bi_end_io = count_end;
  parent->bi_private = &e;
  Bio* child[3];
  for (Bio*& c : child) {
    c = bio_alloc_bioset(nullptr, 0, REQ_OP_WRITE, GFP_KERNEL, &bs);
    bio_chain(c, parent);
  }
  CHECK(bio_flagged(parent, BIO_CHAIN));
  bio_endio(parent);  // the parent's own completion comes first here
  CHECK(e.calls == 0);
  child[2]->bi_status = BLK_STS_TIMEOUT;
  bio_endio(child[2]);
  child[0]->bi_status = BLK_STS_IOERR;
  bio_endio(child[0]);
  CHECK(e.calls == 0);
  bio_endio(child[1]);  // children are put by bio_endio
  CHECK(e.calls == 1);
  CHECK(e.status == BLK_STS_TIMEOUT);  // the first error seen, not the last
  CHECK_FALSE(bio_flagged(parent, BIO_CHAIN));
  bio_put(parent);
}

// One round of a chain ended from several threads: 64 children (child_status(i) set on each)
// chained to a fresh parent are ended by 4 threads while end_parent ends the parent here.
// Returns how the parent's end_io saw it.
template <typename ChildStatus, typename EndParent>
EndCount end_chain_from_threads(BioSet& bs, blk_opf_t op, ChildStatus child_status, EndParent end_parent) {
  constexpr int kChildren = 64;
  EndCount e;
  Bio* parent = bio_alloc_bioset(nullptr, 0, op, GFP_KERNEL, &bs);
  parent->bi_end_io = count_end;
  parent->bi_private = &e;
  std::vector<Bio*> children;
  for (int i = 0; i < kChildren; i++) {
    Bio* c = bio_alloc_bioset(nullptr, 0, op, GFP_KERNEL, &bs);
    bio_chain(c, parent);
    c->bi_status = child_status(i);
    children.push_back(c);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&, t] {
      for (int i = t; i < kChildren; i += 4) bio_endio(children[i]);
    });
  end_parent(parent);
  for (auto& t : threads) t.join();
  bio_put(parent);
  return e;
}

TEST_CASE("a chain ended from many threads at once completes the parent exactly once") {
  BioSet bs(4, 0, 0);
  REQUIRE(bs.init() == 0);
  for (int round = 0; round < 50; round++) {
    const EndCount e = end_chain_from_threads(
        bs, REQ_OP_READ, [](int i) { return i % 7 == 3 ? BLK_STS_MEDIUM : BLK_STS_OK; },
        [](Bio* parent) { bio_endio(parent); });
    CHECK(e.calls == 1);
    CHECK(e.status == BLK_STS_MEDIUM);
  }
}

TEST_CASE("a parent ending with its own error while its children end with theirs on other threads keeps its own") {
  // blk_update_request() overwrites the parent's status; __bio_chain_endio() writes a child's
  // only into a status still OK. Whatever the order, the parent's own error is the one left.
  // Under ThreadSanitizer this is also the check that both writes are atomic.
  BioSet bs(4, 0, 0);
  REQUIRE(bs.init() == 0);
  for (int round = 0; round < 50; round++) {
    const EndCount e = end_chain_from_threads(
        bs, REQ_OP_WRITE, [](int) { return BLK_STS_MEDIUM; },
        [](Bio* parent) {
          bio_set_status(parent, BLK_STS_TIMEOUT);
          bio_endio(parent);
        });
    CHECK(e.calls == 1);
    CHECK(e.status == BLK_STS_TIMEOUT);
  }
}

TEST_CASE("v6.18 __bio_clone: a clone copies bi_ioprio and bi_iter, shares bi_io_vec, is BIO_CLONED and owns no vecs") {
  BioSet bs(4, 0, BIOSET_NEED_BVECS);
  REQUIRE(bs.init() == 0);
  Bio* src = bio_alloc_bioset(nullptr, 2, REQ_OP_WRITE | REQ_FUA, GFP_KERNEL, &bs);
  REQUIRE(src);
  REQUIRE(bio_add_page(src, buf, PAGE_SIZE, 0) == PAGE_SIZE);
  REQUIRE(bio_add_page(src, buf + 2 * PAGE_SIZE, PAGE_SIZE, 0) == PAGE_SIZE);
  src->bi_iter.bi_sector = 77;
  src->bi_ioprio = 3;
  bio_advance(src, 512);  // a partly consumed first vec: the clone starts where src is
  Bio* clone = bio_alloc_clone(nullptr, src, GFP_KERNEL, &bs);
  REQUIRE(clone);
  CHECK(bio_flagged(clone, BIO_CLONED));
  CHECK(clone->bi_ioprio == 3);
  CHECK(clone->bi_iter.bi_sector == src->bi_iter.bi_sector);
  CHECK(clone->bi_iter.bi_size == src->bi_iter.bi_size);
  CHECK(clone->bi_iter.bi_idx == src->bi_iter.bi_idx);
  CHECK(clone->bi_iter.bi_bvec_done == 512);
  CHECK(clone->bi_io_vec == src->bi_io_vec);
  CHECK(clone->bi_vcnt == 0);  // bio_alloc_bioset(bdev, 0, ...): the table is src's
  CHECK((clone->bi_opf & (REQ_OP_MASK | REQ_FUA)) == (REQ_OP_WRITE | REQ_FUA));
  bio_put(clone);
  bio_put(src);
}
