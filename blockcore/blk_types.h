// Counterpart of include/linux/blk_types.h and include/linux/bvec.h (the types only):
// the bio_vec, the bvec iterator, request flags, bio flags and block status codes.
#pragma once

#include <cstdint>

namespace biofs {

using sector_t = uint64_t;
inline constexpr unsigned SECTOR_SHIFT = 9;
inline constexpr unsigned SECTOR_SIZE = 1u << SECTOR_SHIFT;

// A "page" is a PAGE_SIZE-aligned piece of the daemon's memory; a bvec names a byte range in
// one or more physically (here: virtually) contiguous pages, as in the kernel.
inline constexpr unsigned PAGE_SHIFT = 12;
inline constexpr unsigned PAGE_SIZE = 1u << PAGE_SHIFT;

// The kernel's sizes: bios with at most BIO_INLINE_VECS vecs carry them inline and are the
// ones the per-CPU cache holds; BIO_MAX_VECS is the largest bvec table a bio set hands out.
inline constexpr unsigned BIO_INLINE_VECS = 4;
inline constexpr unsigned BIO_MAX_VECS = 256;

struct BioVec {  // struct bio_vec
  uint8_t* bv_page;    // PAGE_SIZE-aligned base of the first page
  uint32_t bv_len;     // bytes in this vec (may span pages: a multi-page bvec)
  uint32_t bv_offset;  // byte offset of the data inside bv_page
};

struct BvecIter {  // struct bvec_iter
  sector_t bi_sector = 0;     // device address in 512-byte sectors
  uint32_t bi_size = 0;       // residual I/O count in bytes
  uint32_t bi_idx = 0;        // current index into the bvec table
  uint32_t bi_bvec_done = 0;  // bytes completed in the current bvec
};

// blk_status_t: the block layer's own error codes (a few of the kernel's), mapped to errno by
// blk_status_to_errno().
using blk_status_t = uint8_t;
inline constexpr blk_status_t BLK_STS_OK = 0;
inline constexpr blk_status_t BLK_STS_NOTSUPP = 1;
inline constexpr blk_status_t BLK_STS_TIMEOUT = 2;
inline constexpr blk_status_t BLK_STS_NOSPC = 3;
inline constexpr blk_status_t BLK_STS_TRANSPORT = 4;
inline constexpr blk_status_t BLK_STS_TARGET = 5;
inline constexpr blk_status_t BLK_STS_MEDIUM = 7;
inline constexpr blk_status_t BLK_STS_RESOURCE = 9;
inline constexpr blk_status_t BLK_STS_IOERR = 10;
inline constexpr blk_status_t BLK_STS_AGAIN = 12;
// Invalid size or alignment (-EINVAL): a bvec below the queue's dma_alignment, a split that
// would be empty. 19 as in v6.18 (18 is unused there since the atomic-write series; a later
// fix renumbers it to 18).
inline constexpr blk_status_t BLK_STS_INVAL = 19;
int blk_status_to_errno(blk_status_t status);  // 0 or a negative errno
blk_status_t errno_to_blk_status(int err);     // BLK_STS_IOERR for an errno with no status
const char* blk_status_name(blk_status_t status);

// include/linux/err.h: an errno carried in a pointer, as bio_split() returns it.
inline constexpr long MAX_ERRNO = 4095;
template <typename T>
inline T* ERR_PTR(long err) { return reinterpret_cast<T*>(static_cast<intptr_t>(err)); }
inline bool IS_ERR(const void* p) { return reinterpret_cast<uintptr_t>(p) >= uintptr_t(-MAX_ERRNO); }
inline long PTR_ERR(const void* p) { return long(reinterpret_cast<intptr_t>(p)); }

// bi_opf: the operation in the low bits, flags above (as REQ_OP_BITS / __REQ_* in the kernel).
using blk_opf_t = uint32_t;
inline constexpr unsigned REQ_OP_BITS = 8;
inline constexpr blk_opf_t REQ_OP_MASK = (1u << REQ_OP_BITS) - 1;
enum req_op : blk_opf_t {
  REQ_OP_READ = 0,
  REQ_OP_WRITE = 1,
  REQ_OP_FLUSH = 2,
  REQ_OP_DISCARD = 3,
  REQ_OP_WRITE_ZEROES = 9,
};
inline constexpr blk_opf_t REQ_FAILFAST = 1u << (REQ_OP_BITS + 0);
inline constexpr blk_opf_t REQ_SYNC = 1u << (REQ_OP_BITS + 1);
inline constexpr blk_opf_t REQ_META = 1u << (REQ_OP_BITS + 2);
inline constexpr blk_opf_t REQ_FUA = 1u << (REQ_OP_BITS + 3);
inline constexpr blk_opf_t REQ_PREFLUSH = 1u << (REQ_OP_BITS + 4);
inline constexpr blk_opf_t REQ_NOWAIT = 1u << (REQ_OP_BITS + 5);
inline constexpr blk_opf_t REQ_POLLED = 1u << (REQ_OP_BITS + 6);
// The bio was allocated as cache-eligible: its final put returns it to a per-CPU (here:
// per-thread) bio cache instead of the mempool. See bio_set.h for the rules.
inline constexpr blk_opf_t REQ_ALLOC_CACHE = 1u << (REQ_OP_BITS + 7);
// v6.18 __REQ_NOMERGE: never merge a bio into this request nor this bio into one. Set on the
// front piece of every split (bio_submit_split) and on a request a merge failed a limit for
// (req_set_nomerge).
inline constexpr blk_opf_t REQ_NOMERGE = 1u << (REQ_OP_BITS + 8);
// REQ_FAILFAST_MASK: biofs has one failfast bit where the kernel has three (DEV, TRANSPORT, DRIVER).
inline constexpr blk_opf_t REQ_FAILFAST_MASK = REQ_FAILFAST;
// REQ_NOMERGE_FLAGS (include/linux/blk_types.h, v6.18): a bio or request with any of these
// never merges.
inline constexpr blk_opf_t REQ_NOMERGE_FLAGS = REQ_NOMERGE | REQ_PREFLUSH | REQ_FUA;

inline constexpr req_op bio_op_of(blk_opf_t opf) { return static_cast<req_op>(opf & REQ_OP_MASK); }
inline constexpr bool op_is_write(blk_opf_t opf) { return (opf & 1u) != 0; }
// op_is_flush(): the operation asks for a cache flush before (REQ_PREFLUSH) or durability of
// (REQ_FUA) its data.
inline constexpr bool op_is_flush(blk_opf_t opf) { return (opf & (REQ_FUA | REQ_PREFLUSH)) != 0; }

// bi_flags bits (enum BIO_* in the kernel).
enum : uint16_t {
  BIO_CLONED = 0,   // shares another bio's bvec table: bi_vcnt means nothing
  BIO_CHAIN = 1,    // __bi_remaining counts chained children
  BIO_REFFED = 2,   // bio_get() was called: bio_put() must drop __bi_cnt
  BIO_QUIET = 3,
  BIO_STAGE_TRACED = 4,  // biofs: a sampled stage trace follows this bio (stage_clock.h)
};

// Allocation context (gfp_t): may the allocation wait for the mempool reserve to refill?
enum gfp_t : unsigned {
  GFP_KERNEL = 0,  // may wait: never fails while some bio will eventually be put
  GFP_NOWAIT = 1,  // never waits: may return nullptr
};

}  // namespace biofs
