// blockcore's private header, as the kernel keeps block/blk.h: what blockcore's own files
// share and its users (fs, nvme, devices, tools) must not call. Nothing outside blockcore/
// includes it.
#pragma once

#include "bio_set.h"
#include "blk_mq.h"

namespace biofs {

// The bio set's element layout and bvec pools (bvec_alloc/bvec_free are in block/blk.h too).
struct BioSetInternals {
  static Bio* bio_from_element(const BioSet* bs, void* p) { return bs->bio_from_element(p); }
  static BioVec* bvec_alloc(BioSet* bs, uint16_t* nr_vecs, gfp_t gfp) { return bs->bvec_alloc(nr_vecs, gfp); }
  static void bvec_free(BioSet* bs, BioVec* table, uint16_t nr_vecs) { bs->bvec_free(table, nr_vecs); }
  static bool bvec_pool_ready(const BioSet* bs) { return bs->bvec_pool_ready(); }
  static void count_remote_put_full(BioSet* bs) { bs->count_remote_put_full(); }
  static BioAllocCache* this_thread_cache_if_any(const BioSet* bs) { return bs->this_thread_cache_if_any(); }
  static void note_cpu(BioSet* bs, BioAllocCache* cache) { bs->note_cpu(cache); }
  static BioAllocCache* cache_of_this_cpu(const BioSet* bs) { return bs->cache_of_this_cpu(); }
};
inline Bio* bio_from_element(const BioSet* bs, void* p) { return BioSetInternals::bio_from_element(bs, p); }
inline BioVec* bvec_alloc(BioSet* bs, uint16_t* nr_vecs, gfp_t gfp) {
  return BioSetInternals::bvec_alloc(bs, nr_vecs, gfp);
}
inline void bvec_free(BioSet* bs, BioVec* table, uint16_t nr_vecs) { BioSetInternals::bvec_free(bs, table, nr_vecs); }
inline bool bvec_pool_ready(const BioSet* bs) { return BioSetInternals::bvec_pool_ready(bs); }
inline void count_remote_put_full(BioSet* bs) { BioSetInternals::count_remote_put_full(bs); }

// blk_mq_submit_bio() under an explicit plug; nullptr sends the bio's request to the driver at
// once. blk-flush issues a held write this way from the pre-flush's completion, which may run
// inside a plug flush (an inline completion) where joining the plug would strand the request.
void blk_mq_submit_bio_plug(Bio* bio, BlkPlug* plug);

}  // namespace biofs
