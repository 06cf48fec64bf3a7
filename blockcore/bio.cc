// Counterpart of the life-cycle half of block/bio.c: init, references, adding pages, advancing,
// chaining and completion. Allocation and freeing are in bio_set.cc.
#include "bio.h"

#include <cassert>
#include <algorithm>
#include <cerrno>
#include <climits>

namespace biofs {

int blk_status_to_errno(blk_status_t status) {
  switch (status) {
    case BLK_STS_OK: return 0;
    case BLK_STS_NOTSUPP: return -EOPNOTSUPP;
    case BLK_STS_TIMEOUT: return -ETIMEDOUT;
    case BLK_STS_NOSPC: return -ENOSPC;
    case BLK_STS_TRANSPORT: return -ENOLINK;
    case BLK_STS_TARGET: return -EREMOTEIO;
    case BLK_STS_MEDIUM: return -ENODATA;
    case BLK_STS_RESOURCE: return -ENOMEM;
    case BLK_STS_AGAIN: return -EAGAIN;
    case BLK_STS_INVAL: return -EINVAL;
    default: return -EIO;
  }
}

// errno_to_blk_status() (block/blk-core.c): the status whose errno this is; BLK_STS_IOERR
// for any other errno, as the kernel's walk of blk_errors[] ends.
blk_status_t errno_to_blk_status(int err) {
  static constexpr blk_status_t known[] = {
      BLK_STS_OK,     BLK_STS_NOTSUPP,  BLK_STS_TIMEOUT, BLK_STS_NOSPC, BLK_STS_TRANSPORT,
      BLK_STS_TARGET, BLK_STS_MEDIUM,   BLK_STS_RESOURCE, BLK_STS_AGAIN, BLK_STS_INVAL,
  };
  for (blk_status_t st : known)
    if (blk_status_to_errno(st) == err) return st;
  return BLK_STS_IOERR;
}

const char* blk_status_name(blk_status_t status) {
  switch (status) {
    case BLK_STS_OK: return "ok";
    case BLK_STS_NOTSUPP: return "operation not supported";
    case BLK_STS_TIMEOUT: return "timeout";
    case BLK_STS_NOSPC: return "critical space allocation";
    case BLK_STS_TRANSPORT: return "recoverable transport";
    case BLK_STS_TARGET: return "critical target";
    case BLK_STS_MEDIUM: return "critical medium";
    case BLK_STS_RESOURCE: return "resource";
    case BLK_STS_AGAIN: return "nonblocking retry";
    case BLK_STS_INVAL: return "invalid";
    default: return "I/O";
  }
}

void bio_reset(Bio* bio, BlockDevice* bdev, blk_opf_t opf) {
  BioSet* pool = bio->bi_pool;
  BioAllocCache* cache = bio->bi_cache;
  const blk_opf_t keep = bio->bi_opf & REQ_ALLOC_CACHE;  // how the bio was allocated
  bio_init(bio, bdev, bio->bi_io_vec, bio->bi_max_vecs, (opf & ~REQ_ALLOC_CACHE) | keep);
  bio->bi_pool = pool;
  bio->bi_cache = cache;
}

void bio_get(Bio* bio) {
  bio_set_flag(bio, BIO_REFFED);
  bio->bi_cnt.fetch_add(1, std::memory_order_relaxed);
}

// bvec_try_merge_page(): the new range starts where the last vec ends.
static bool bvec_try_merge(BioVec& last, uint8_t* page, uint32_t off) {
  return last.bv_page + last.bv_offset + last.bv_len == page + off;
}

uint32_t bio_add_page(Bio* bio, uint8_t* page, uint32_t len, uint32_t off) {
  if (bio_flagged(bio, BIO_CLONED) || len == 0) return 0;
  if (bio->bi_iter.bi_size > UINT_MAX - len) return 0;
  if (bio->bi_vcnt > 0 && bvec_try_merge(bio->bi_io_vec[bio->bi_vcnt - 1], page, off)) {
    bio->bi_io_vec[bio->bi_vcnt - 1].bv_len += len;
    bio->bi_iter.bi_size += len;
    return len;
  }
  if (bio->bi_vcnt >= bio->bi_max_vecs) return 0;
  bio->bi_io_vec[bio->bi_vcnt++] = BioVec{page, len, off};
  bio->bi_iter.bi_size += len;
  return len;
}

uint32_t bio_add_virt(Bio* bio, void* addr, uint32_t len) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  uint8_t* page = reinterpret_cast<uint8_t*>(a & ~uintptr_t(PAGE_SIZE - 1));
  // One vec covers the whole contiguous range (a multi-page bvec), as bio_add_virt_nofail().
  return bio_add_page(bio, page, len, uint32_t(a & (PAGE_SIZE - 1)));
}

void bio_advance(Bio* bio, uint32_t bytes) {
  bio->bi_iter.bi_sector += bytes >> SECTOR_SHIFT;
  if (bio_no_advance_iter(bio)) {
    bio->bi_iter.bi_size -= std::min(bytes, bio->bi_iter.bi_size);
    return;
  }
  const bool ok = bvec_iter_advance(bio->bi_io_vec, bio->bi_iter, bytes);
  assert(ok && "bio_advance past the end of the bio");
  (void)ok;
}

void bio_inc_remaining(Bio* bio) {
  // Set once: a later split's chaining must not write bi_flags while an earlier piece's
  // completion reads them on another thread.
  if (!bio_flagged(bio, BIO_CHAIN)) bio_set_flag(bio, BIO_CHAIN);
  bio->bi_remaining.fetch_add(1, std::memory_order_relaxed);
}

static void bio_chain_endio(Bio*) {
  assert(false && "bio_chain_endio is a marker, bio_endio handles chained bios");
}

void bio_chain(Bio* bio, Bio* parent) {
  assert(!bio->bi_private && !bio->bi_end_io);
  bio->bi_private = parent;
  bio->bi_end_io = bio_chain_endio;
  bio_inc_remaining(parent);
}

// True once every chained child and the bio itself have ended.
static bool bio_remaining_done(Bio* bio) {
  if (!bio_flagged(bio, BIO_CHAIN)) return true;
  if (bio->bi_remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    bio_clear_flag(bio, BIO_CHAIN);
    return true;
  }
  return false;
}

void bio_endio(Bio* bio) {
  for (;;) {
    if (!bio_remaining_done(bio)) return;
    if (bio->bi_end_io != bio_chain_endio) break;
    // __bio_chain_endio(): the parent keeps the first error any child reports. Children may
    // end on different threads at once, so the first one wins by compare-and-swap.
    Bio* parent = static_cast<Bio*>(bio->bi_private);
    if (bio->bi_status != BLK_STS_OK) {
      blk_status_t expected = BLK_STS_OK;
      std::atomic_ref<blk_status_t>(parent->bi_status)
          .compare_exchange_strong(expected, bio->bi_status, std::memory_order_relaxed);
    }
    bio_put(bio);
    bio = parent;
  }
  if (bio->bi_end_io) bio->bi_end_io(bio);
}

}  // namespace biofs
