// Counterpart of include/linux/bvec.h: reading a bvec table through a BvecIter, as multi-page
// bvecs (mp_bvec_*) or as single-page segments (bvec_*), and advancing the iterator.
#pragma once

#include <algorithm>
#include <cassert>

#include "blk_types.h"

namespace biofs {

// The multi-page bvec the iterator points at, clipped to the bytes left in the iterator.
inline BioVec mp_bvec_iter_bvec(const BioVec* table, const BvecIter& iter) {
  const BioVec& bv = table[iter.bi_idx];
  return BioVec{bv.bv_page, std::min(iter.bi_size, bv.bv_len - iter.bi_bvec_done),
                bv.bv_offset + iter.bi_bvec_done};
}

// The single-page segment the iterator points at: never crosses a PAGE_SIZE boundary.
inline BioVec bvec_iter_bvec(const BioVec* table, const BvecIter& iter) {
  const BioVec mp = mp_bvec_iter_bvec(table, iter);
  const uint32_t page_off = mp.bv_offset % PAGE_SIZE;
  return BioVec{mp.bv_page + (mp.bv_offset / PAGE_SIZE) * PAGE_SIZE,
                std::min(mp.bv_len, PAGE_SIZE - page_off), page_off};
}

// Address of the first byte a bvec names.
inline uint8_t* bvec_virt(const BioVec& bv) { return bv.bv_page + bv.bv_offset; }

// Moves the iterator forward by `bytes`. Returns false (and leaves the iterator empty) if
// asked to move past its end, which is a caller bug the kernel WARNs about.
inline bool bvec_iter_advance(const BioVec* table, BvecIter& iter, uint32_t bytes) {
  if (bytes > iter.bi_size) {
    iter.bi_size = 0;
    return false;
  }
  iter.bi_size -= bytes;
  bytes += iter.bi_bvec_done;
  uint32_t idx = iter.bi_idx;
  while (bytes && bytes >= table[idx].bv_len) {
    bytes -= table[idx].bv_len;
    idx++;
  }
  iter.bi_idx = idx;
  iter.bi_bvec_done = bytes;
  return true;
}

// Cheaper advance for a step known to stay within the current bvec (the per-segment loops).
inline void bvec_iter_advance_single(const BioVec* table, BvecIter& iter, uint32_t bytes) {
  const uint32_t done = iter.bi_bvec_done + bytes;
  assert(done <= table[iter.bi_idx].bv_len && bytes <= iter.bi_size);
  if (done == table[iter.bi_idx].bv_len) {
    iter.bi_bvec_done = 0;
    iter.bi_idx++;
  } else {
    iter.bi_bvec_done = done;
  }
  iter.bi_size -= bytes;
}

// for_each_bvec / __bio_for_each_segment: calls fn(BioVec) for every single-page segment.
template <typename Fn>
inline void for_each_segment(const BioVec* table, BvecIter iter, Fn&& fn) {
  while (iter.bi_size) {
    const BioVec seg = bvec_iter_bvec(table, iter);
    fn(seg);
    bvec_iter_advance_single(table, iter, seg.bv_len);
  }
}

// __bio_for_each_bvec: calls fn(BioVec) for every multi-page bvec.
template <typename Fn>
inline void for_each_mp_bvec(const BioVec* table, BvecIter iter, Fn&& fn) {
  while (iter.bi_size) {
    const BioVec bv = mp_bvec_iter_bvec(table, iter);
    fn(bv);
    bvec_iter_advance_single(table, iter, bv.bv_len);
  }
}

}  // namespace biofs
