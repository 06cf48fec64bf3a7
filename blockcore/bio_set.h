// Counterpart of struct bio_set and the allocation half of block/bio.c: bioset_init/exit,
// bio_alloc_bioset, bio_alloc_clone, bvec_alloc/bvec_free and the per-CPU cache's rules.
//
// The rules (the review of "block: enable per-cpu bio cache by default", 2025, and kernel
// v6.19 behaviour):
//  1. Every set created with BIOSET_PERCPU_CACHE uses its cache for every bio with
//     nr_vecs <= BIO_INLINE_VECS; callers need not ask for it.
//  2. REQ_ALLOC_CACHE is set exactly on such cache-eligible allocations, hit or miss (a bio made
//     on a miss joins the cache when put), and cleared on every other allocation — set inside
//     the eligible branch, never set blindly and cleared later.
//  3. An allocation made while the mempool is not saturated (its reserve is in use) loses the
//     flag, so its final put refills the reserve instead of a cache (kernel commit 759aa12f19155,
//     "bio: don't rob starving biosets of bios"). A bio without the flag goes back to the
//     mempool on its final put; a flagged one goes to its cache domain unless that is full.
//  4. v6.18 bio_put_percpu_cache(): a put goes to the cache of the CPU it runs on, not to the
//     allocating one's. Here: a thread with a domain in the set puts onto its own list (the
//     kernel's task-context put); any other thread (a device's completion thread: the kernel's
//     hardirq put) pushes onto the remote list (free_list_irq) of the domain last seen running
//     on its CPU (sched_getcpu), or frees the bio when no domain ran there. The owner splices
//     the remote list in; see bio_alloc_cache.h. BIOSET_CACHE_HOME keeps biofs's earlier form,
//     where every put returns the bio to the domain that allocated it (`bio_cache=home`).
//  5. A thread that exits gives its cached bios back to the mempool; bioset teardown frees all.
//  6. bio_alloc_clone shares the source's bvec table and iterator and gets REQ_ALLOC_CACHE by
//     rules 1-3 for its own set, never from the source.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "allocator.h"
#include "bio.h"
#include "bio_alloc_cache.h"
#include "mempool.h"
#include "toggles.h"

namespace biofs {

enum bioset_flags : unsigned {
  BIOSET_NEED_BVECS = 1u << 0,      // bios may carry more than BIO_INLINE_VECS vecs
  BIOSET_PERCPU_CACHE = 1u << 2,    // keep a per-CPU (per-thread) bio cache
  BIOSET_TRIM_IDLE = 1u << 3,       // with the cache: blockcore's trimmer empties idle domains (bio_cache_trim.h)
  BIOSET_CACHE_HOME = 1u << 4,      // with the cache: a put returns the bio to its allocating domain (rule 4)
};

struct BioSetStats {
  BioCacheCounters total;                  // all cache domains together
  std::vector<BioCacheCounters> domains;   // one entry per cache domain, live or ended
  uint64_t reserve_allocs = 0;             // bios the mempool served from its reserve
  uint64_t reserve_waits = 0;              // times an allocation waited for the reserve
  uint64_t remote_put_full = 0;            // remote puts that found the domain full or gone, or
                                           // (kernel form) no domain on the putting CPU
};

// Sets with a per-CPU cache that may exist at once (each thread keeps a slot per set).
inline constexpr int BIOSET_MAX_CACHED_SETS = 64;

class BioSet {
 public:
  // pool_size is the reserve (min_nr) of both the bio and the bvec mempool; front_pad bytes
  // precede each bio for the caller's own structure (container_of style). Nothing is allocated
  // until init().
  BioSet(unsigned pool_size, unsigned front_pad, unsigned flags,
         AllocatorKind allocator = Allocator::default_kind());
  // bioset_init(), once, before the first bio: fills the mempools' reserves and takes a per-CPU
  // cache slot (BIOSET_PERCPU_CACHE). 0; -ENOMEM when a reserve cannot be filled, as the
  // kernel's; -ENOSPC when all BIOSET_MAX_CACHED_SETS cache slots are taken (a limit of biofs's
  // per-thread slots, not the kernel's). bioset_init_error() says which in one line.
  int init();
  ~BioSet();  // bioset_exit(): frees every cached bio. Every bio must have been put.
  BioSet(const BioSet&) = delete;
  BioSet& operator=(const BioSet&) = delete;

  // Whether allocations use the cache now (rule 1): the set has one and its mode is not off.
  bool has_cache() const { return cache_mode() != BioCache::off; }
  bool puts_home() const { return cache_mode() == BioCache::home; }  // rule 4's earlier form
  BioCache cache_mode() const { return cache_mode_.load(std::memory_order_relaxed); }
  // The `bio_cache` toggle, live: the next allocation takes the new mode. A bio allocated from
  // the cache still goes back to one when put (rule 2: its flag decides), and the idle-domain
  // trimmer gives what an unused cache holds back to the mempool. Only a set made with
  // BIOSET_PERCPU_CACHE has a cache to switch on: false for any other mode on one without.
  bool set_cache_mode(BioCache mode);
  bool has_cache_slot() const { return cache_slot_ >= 0; }
  unsigned front_pad() const { return front_pad_; }
  Allocator& allocator() { return allocator_; }
  Mempool& bio_pool() { return bio_pool_; }
  BioSetStats stats() const;
  // Bytes one bio occupies in the set (front pad, bio, inline vecs): the unit of the cache's
  // worst-case footprint, ALLOC_CACHE_MAX * bio_alloc_size() per domain.
  size_t bio_alloc_size() const { return bio_pool_.elem_size(); }

  // The calling thread's cache domain for this set (created on first use). Set must have a cache.
  BioAllocCache* this_thread_cache();
  // Gives every bio in the calling thread's domain back to the mempool (e.g. when a thread
  // goes idle; the kernel does this when a CPU goes offline).
  void prune_this_thread_cache();
  // From any thread: empties every cache domain whose owner has allocated nothing since the
  // previous call (so a thread that stopped issuing I/O does not hold its bios forever; call
  // it periodically). Never waits for an owner: a domain whose owner is inside its lists is
  // left for the next call. Needs membarrier(2) (MEMBARRIER_CMD_PRIVATE_EXPEDITED); without
  // it nothing is trimmed. Returns the bios given back to the mempool.
  uint64_t trim_idle_caches();

  // The caller's structure in front of a bio, and back (container_of for front_pad users).
  void* front_of(Bio* bio) const { return reinterpret_cast<uint8_t*>(bio) - front_pad_; }

 private:
  friend struct ThreadCacheExit;
  friend struct BioSetInternals;  // blk.h: for blockcore's own files
  Bio* bio_from_element(void* p) const {
    return reinterpret_cast<Bio*>(static_cast<uint8_t*>(p) + front_pad_);
  }
  BioVec* bvec_alloc(uint16_t* nr_vecs, gfp_t gfp);
  void bvec_free(BioVec* table, uint16_t nr_vecs);
  bool bvec_pool_ready() const { return bvec_pool_ != nullptr; }
  void count_remote_put_full() { remote_put_full_.fetch_add(1, std::memory_order_relaxed); }
  BioAllocCache* attach_this_thread();
  void detach(BioAllocCache* cache);  // the owner thread exited: empty and close the domain
  // The calling thread's domain if it has one in this set, else nullptr (never attaches).
  BioAllocCache* this_thread_cache_if_any() const;
  // The CPU -> domain map the kernel form's puts from other threads follow: a domain is noted on
  // the CPU it runs on whenever its own list runs dry (so also at its first allocation).
  void note_cpu(BioAllocCache* cache);
  BioAllocCache* cache_of_this_cpu() const;

  Allocator allocator_;
  const unsigned front_pad_;
  const unsigned flags_;
  Mempool bio_pool_;
  std::unique_ptr<Mempool> bvec_pool_;  // BIO_MAX_VECS tables; only with BIOSET_NEED_BVECS
  int cache_slot_ = -1;                 // index into each thread's cache slots, -1: no cache
  std::atomic<BioCache> cache_mode_{BioCache::off};  // in cache_slot_'s padding: the layout is the one before it
  uint64_t cache_gen_ = 0;              // unique per set: tells a slot's owner set apart
  std::vector<std::unique_ptr<BioAllocCache>> caches_;  // guarded by the global cache lock
  std::unique_ptr<std::atomic<BioAllocCache*>[]> cpu_caches_;  // one per configured CPU
  unsigned nr_cpus_ = 0;
  // Written by putting threads: its own line, away from what every allocation reads above.
  alignas(64) std::atomic<uint64_t> remote_put_full_{0};
};

// The one line for BioSet::init()'s error.
std::string bioset_init_error(int err);

// bio_alloc_bioset(): a bio with room for nr_vecs vecs (0 for clones), or nullptr only with
// GFP_NOWAIT when memory and the reserve are both exhausted.
Bio* bio_alloc_bioset(BlockDevice* bdev, uint16_t nr_vecs, blk_opf_t opf, gfp_t gfp, BioSet* bs);
// bio_alloc_clone(): a bio sharing src's bvec table, with src's iterator and op, marked
// BIO_CLONED. bi_vcnt of a clone is 0 and means nothing: walk it with its iterator.
Bio* bio_alloc_clone(BlockDevice* bdev, Bio* src, gfp_t gfp, BioSet* bs);

}  // namespace biofs
