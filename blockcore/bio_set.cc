// Counterpart of the allocation half of block/bio.c: bioset_init/exit, bio_alloc_bioset,
// bio_alloc_percpu_cache, bio_put_percpu_cache, bio_alloc_clone, bvec_alloc and bio_free.
#include "bio_set.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>

#include "bio_cache_trim.h"
#include "blk.h"
#include "blk_mq.h"
#include "schedule.h"
#include "stage_clock.h"

namespace biofs {

namespace {

// Each thread has one slot per live cached bio set. A slot names its set by generation (never
// reused), so a slot left behind by a destroyed set can never be mistaken for a new one.
constexpr int kMaxCachedSets = BIOSET_MAX_CACHED_SETS;
struct ThreadCacheSlot {
  uint64_t gen;
  BioAllocCache* cache;
};
// Trivially constructed and destroyed, so reaching it costs no TLS init guard on the hot path.
constinit thread_local ThreadCacheSlot tls_slots[kMaxCachedSets] = {};

// Cold-path state: attaching and detaching domains, set creation and teardown, statistics.
std::mutex g_cache_lock;
struct SlotOwner {
  uint64_t gen;
  BioSet* set;
};
SlotOwner g_slot_owner[kMaxCachedSets];  // guarded by g_cache_lock
uint64_t g_next_gen = 1;                 // guarded by g_cache_lock

}  // namespace

const void* current_thread_token() { return &tls_slots[0]; }

BioCacheCounters& BioCacheCounters::operator+=(const BioCacheCounters& o) {
  alloc_hits += o.alloc_hits;
  alloc_misses += o.alloc_misses;
  put_local += o.put_local;
  put_remote += o.put_remote;
  put_full += o.put_full;
  splices += o.splices;
  pruned += o.pruned;
  cached += o.cached;
  return *this;
}

BioCacheCounters BioAllocCache::counters() const {
  const uintptr_t head = free_list_remote.load(std::memory_order_relaxed);
  const unsigned on_remote = remote_count(head);
  BioCacheCounters c;
  c.alloc_hits = alloc_hits.get();
  c.alloc_misses = alloc_misses.get();
  c.put_remote = remote_received.get() + on_remote;
  c.put_full = put_full.get();
  c.splices = splices.get();
  c.pruned = pruned.get();
  const uint64_t on_main = nr.load(std::memory_order_relaxed);
  c.cached = on_main + on_remote;
  // The owner's list gains by local puts and splices and loses by hits and pruning, so
  // put_local = nr + hits + pruned - remote_received (clamped: the reads are not one snapshot).
  const uint64_t in = on_main + c.alloc_hits + c.pruned, spliced_or_pruned = remote_received.get();
  c.put_local = in > spliced_or_pruned ? in - spliced_or_pruned : 0;
  return c;
}

// Runs when a thread that used a cache exits: rule 5, its bios go back to the mempools.
struct ThreadCacheExit {
  ~ThreadCacheExit() {
    std::lock_guard guard(g_cache_lock);
    for (int i = 0; i < kMaxCachedSets; i++) {
      ThreadCacheSlot& slot = tls_slots[i];
      if (slot.cache && g_slot_owner[i].gen == slot.gen) g_slot_owner[i].set->detach(slot.cache);
      slot = ThreadCacheSlot{};
    }
  }
};
thread_local ThreadCacheExit tls_cache_exit;

static void bio_free(Bio* bio);

// mempool_alloc() as a submitter meets it: when the allocator and the reserve are both dry, the
// caller sleeps through schedule(), which flushes its plug first: the bios we wait for may be
// sitting in that very plug.
static void* pool_alloc(Mempool& pool, gfp_t gfp) {
  void* p = pool.alloc(GFP_NOWAIT);
  if (p || gfp == GFP_NOWAIT) [[likely]]
    return p;
  schedule([&] { p = pool.alloc(gfp); });
  return p;
}

// Frees a whole list linked by bi_next; returns how many.
static uint64_t bio_free_list(Bio* bio) {
  uint64_t n = 0;
  while (bio) {
    Bio* next = bio->bi_next;
    bio_free(bio);
    bio = next;
    n++;
  }
  return n;
}

// Frees all a cache holds, its own list and the remote one, and leaves the remote list set to
// `remote_state` (0: open; REMOTE_CLOSED: the owner has gone). Returns how many.
static uint64_t bio_alloc_cache_empty(BioAllocCache* cache, uintptr_t remote_state = 0) {
  const uint64_t n = bio_free_list(cache->free_list);
  cache->free_list = nullptr;
  cache->nr.store(0, std::memory_order_relaxed);
  const uintptr_t head = cache->free_list_remote.exchange(remote_state, std::memory_order_acquire);
  const uint64_t remote = bio_free_list(BioAllocCache::remote_top(head));
  cache->remote_received.add(remote);
  cache->pruned.add(n + remote);
  return n + remote;
}

BioSet::BioSet(unsigned pool_size, unsigned front_pad, unsigned flags, AllocatorKind allocator)
    : allocator_(allocator),
      front_pad_((front_pad + 63) & ~63u),  // keeps the bio's first line a real cache line
      flags_(flags),
      bio_pool_(pool_size, front_pad_ + sizeof(Bio), allocator_) {
  if (flags_ & BIOSET_NEED_BVECS)
    bvec_pool_ = std::make_unique<Mempool>(pool_size, BIO_MAX_VECS * sizeof(BioVec), allocator_);
}

int BioSet::init() {
  if (int ret = bio_pool_.init(); ret) return ret;
  if (bvec_pool_)
    if (int ret = bvec_pool_->init(); ret) return ret;
  if (flags_ & BIOSET_PERCPU_CACHE) {
    const long cpus = sysconf(_SC_NPROCESSORS_CONF);
    nr_cpus_ = cpus > 0 ? unsigned(cpus) : 1;
    cpu_caches_ = std::make_unique<std::atomic<BioAllocCache*>[]>(nr_cpus_);
    std::lock_guard guard(g_cache_lock);
    for (int i = 0; i < kMaxCachedSets; i++) {
      if (g_slot_owner[i].set == nullptr) {
        cache_slot_ = i;
        cache_gen_ = g_next_gen++;
        g_slot_owner[i] = SlotOwner{cache_gen_, this};
        break;
      }
    }
    if (cache_slot_ < 0) return -ENOSPC;
    cache_mode_.store(flags_ & BIOSET_CACHE_HOME ? BioCache::home : BioCache::on, std::memory_order_relaxed);
  }
  if ((flags_ & BIOSET_TRIM_IDLE) && has_cache_slot()) bio_cache_trim_register(this);
  return 0;
}

std::string bioset_init_error(int err) {
  if (err == -ENOSPC)
    return "biofs: more than " + std::to_string(BIOSET_MAX_CACHED_SETS) + " bio sets with a per-CPU cache at once";
  return std::string("biofs: a bio set's reserve: ") + std::strerror(-err);
}

bool BioSet::set_cache_mode(BioCache mode) {
  if (!has_cache_slot()) return mode == BioCache::off;
  cache_mode_.store(mode, std::memory_order_relaxed);
  return true;
}

BioSet::~BioSet() {
  if (cache_slot_ < 0) return;
  if (flags_ & BIOSET_TRIM_IDLE) bio_cache_trim_unregister(this);  // before the domains go
  std::lock_guard guard(g_cache_lock);
  g_slot_owner[cache_slot_] = SlotOwner{};
  for (auto& cache : caches_) {
    bio_free_list(cache->free_list);
    bio_free_list(BioAllocCache::remote_top(cache->free_list_remote.exchange(REMOTE_CLOSED)));
    cache->free_list = nullptr;
  }
}

[[gnu::noinline]] BioAllocCache* BioSet::attach_this_thread() {
  (void)&tls_cache_exit;  // first use in this thread registers the exit hook
  std::lock_guard guard(g_cache_lock);
  BioAllocCache* cache = nullptr;
  for (auto& c : caches_) {  // adopt a domain whose thread has exited
    if (c->owner.load(std::memory_order_relaxed) == nullptr) {
      cache = c.get();
      break;
    }
  }
  if (!cache) cache = caches_.emplace_back(std::make_unique<BioAllocCache>()).get();
  cache->owner.store(current_thread_token(), std::memory_order_relaxed);
  cache->free_list_remote.store(0, std::memory_order_release);  // reopen for remote puts
  tls_slots[cache_slot_] = ThreadCacheSlot{cache_gen_, cache};
  return cache;
}

void BioSet::detach(BioAllocCache* cache) {
  cache->owner.store(nullptr, std::memory_order_relaxed);
  for (unsigned cpu = 0; cpu < nr_cpus_; cpu++) {  // no CPU's puts go to an ended domain
    BioAllocCache* expected = cache;
    cpu_caches_[cpu].compare_exchange_strong(expected, nullptr, std::memory_order_relaxed);
  }
  bio_alloc_cache_empty(cache, REMOTE_CLOSED);
}

BioAllocCache* BioSet::this_thread_cache_if_any() const {
  const ThreadCacheSlot& slot = tls_slots[cache_slot_];
  return slot.gen == cache_gen_ ? slot.cache : nullptr;
}

// sched_getcpu() reads the CPU number rseq keeps in the thread (glibc 2.35+): no syscall.
void BioSet::note_cpu(BioAllocCache* cache) {
  const int cpu = sched_getcpu();
  if (cpu < 0 || unsigned(cpu) >= nr_cpus_) return;
  // Release: a putter that finds the domain here also sees it constructed (its acquire below).
  if (cpu_caches_[cpu].load(std::memory_order_relaxed) != cache)
    cpu_caches_[cpu].store(cache, std::memory_order_release);
}

BioAllocCache* BioSet::cache_of_this_cpu() const {
  const int cpu = sched_getcpu();
  if (cpu < 0 || unsigned(cpu) >= nr_cpus_) return nullptr;
  return cpu_caches_[cpu].load(std::memory_order_acquire);
}

BioAllocCache* BioSet::this_thread_cache() {
  const ThreadCacheSlot& slot = tls_slots[cache_slot_];
  if (slot.gen == cache_gen_) [[likely]]
    return slot.cache;
  return attach_this_thread();
}

// The owner's half of the trim handshake: announce, then make sure no trimmer holds the lists.
// No read-modify-write and no fence instruction on this path: the trimmer's membarrier() makes
// either the owner's `busy` visible to it or its `claimed` visible to the owner.
static inline bool cache_enter(BioAllocCache* cache) {
  cache->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (cache->claimed.load(std::memory_order_acquire)) [[unlikely]] {
    cache->busy.store(0, std::memory_order_release);
    return false;
  }
  return true;
}
static inline void cache_exit(BioAllocCache* cache) { cache->busy.store(0, std::memory_order_release); }

// membarrier(2): registered once per process; false where the kernel or a seccomp filter says no.
static bool membarrier_ready() {
  static const bool ok = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  return ok;
}

uint64_t BioSet::trim_idle_caches() {
  if (!has_cache_slot() || !membarrier_ready()) return 0;  // also a cache switched off: it empties
  std::lock_guard guard(g_cache_lock);
  uint64_t freed = 0;
  for (auto& c : caches_) {
    BioAllocCache* cache = c.get();
    if (!cache->owner.load(std::memory_order_relaxed)) continue;  // ended: already emptied
    const uint64_t activity = cache->alloc_hits.get() + cache->alloc_misses.get();
    const bool idle = activity == cache->trim_seen;
    cache->trim_seen = activity;
    const uintptr_t remote_head = cache->free_list_remote.load(std::memory_order_relaxed);
    if (!idle || (cache->nr.load(std::memory_order_relaxed) == 0 && BioAllocCache::remote_count(remote_head) == 0))
      continue;
    cache->claimed.store(1, std::memory_order_relaxed);
    // Every running thread of the process passes a full barrier: the owner either is seen busy
    // here or sees the claim before it touches its lists again.
    const bool fenced = syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (!fenced || cache->busy.load(std::memory_order_acquire)) {
      cache->claimed.store(0, std::memory_order_release);
      continue;
    }
    freed += bio_alloc_cache_empty(cache);
    cache->claimed.store(0, std::memory_order_release);
  }
  return freed;
}

// bio_alloc_irq_cache_splice(): the owner takes the whole remote list in one exchange.
static void bio_alloc_cache_splice(BioAllocCache* cache) {
  const uintptr_t head = cache->free_list_remote.exchange(0, std::memory_order_acquire);
  const unsigned n = BioAllocCache::remote_count(head);
  cache->free_list = BioAllocCache::remote_top(head);  // the owner's list is empty here
  cache->nr.store(cache->nr.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  cache->remote_received.add(n);
  cache->splices.add();
}

void BioSet::prune_this_thread_cache() {
  if (!has_cache_slot()) return;
  BioAllocCache* cache = this_thread_cache();
  if (!cache_enter(cache)) return;  // a trimmer is emptying it right now
  bio_alloc_cache_empty(cache);
  cache_exit(cache);
}

BioSetStats BioSet::stats() const {
  BioSetStats s;
  {
    std::lock_guard guard(g_cache_lock);
    for (const auto& cache : caches_) {
      s.domains.push_back(cache->counters());
      s.total += s.domains.back();
    }
  }
  s.reserve_allocs = bio_pool_.reserve_allocs();
  s.reserve_waits = bio_pool_.waits();
  s.remote_put_full = remote_put_full_.load(std::memory_order_relaxed);
  return s;
}

// bvec_alloc(): tables come in the kernel's biovec slab sizes; all but the largest are tried
// on the allocator alone and fall back to a BIO_MAX_VECS table from the mempool.
BioVec* BioSet::bvec_alloc(uint16_t* nr_vecs, gfp_t gfp) {
  static constexpr uint16_t kSizes[] = {16, 64, 128, BIO_MAX_VECS};
  uint16_t size = BIO_MAX_VECS;
  for (uint16_t s : kSizes) {
    if (*nr_vecs <= s) {
      size = s;
      break;
    }
  }
  *nr_vecs = size;
  if (size < BIO_MAX_VECS) {
    if (void* p = allocator_.alloc(size * sizeof(BioVec))) return static_cast<BioVec*>(p);
    if (gfp == GFP_NOWAIT) return nullptr;
    *nr_vecs = BIO_MAX_VECS;
  }
  return static_cast<BioVec*>(pool_alloc(*bvec_pool_, gfp));
}

void BioSet::bvec_free(BioVec* table, uint16_t nr_vecs) {
  if (nr_vecs == BIO_MAX_VECS)
    bvec_pool_->free(table);
  else
    allocator_.free(table);
}

// bio_free(): back to the mempool (and its bvec table, unless inline or shared by a clone).
static void bio_free(Bio* bio) {
  BioSet* bs = bio->bi_pool;
  assert(bs && "bio_put on a bio that was not allocated from a bio set");
  if (bio->bi_max_vecs > BIO_INLINE_VECS) bvec_free(bs, bio->bi_io_vec, bio->bi_max_vecs);
  bs->bio_pool().free(bs->front_of(bio));
}

// A put from a thread that does not own the domain: push onto its remote list, unless the
// domain is full or its owner has gone, in which case the bio goes back to the mempool.
static void bio_put_remote(BioAllocCache* cache, Bio* bio) {
  const uintptr_t self = reinterpret_cast<uintptr_t>(bio);
  bio->bi_bdev = nullptr;  // as on the owner's list (bio_put_percpu_cache)
  uintptr_t head = cache->free_list_remote.load(std::memory_order_relaxed);
  for (;;) {
    const unsigned count = BioAllocCache::remote_count(head);
    if (head == REMOTE_CLOSED || (self & ~REMOTE_PTR_MASK) ||
        count + cache->nr.load(std::memory_order_relaxed) >= ALLOC_CACHE_MAX) [[unlikely]] {
      count_remote_put_full(bio->bi_pool);
      bio_free(bio);
      return;
    }
    bio->bi_next = BioAllocCache::remote_top(head);
    const uintptr_t next = (uintptr_t(count + 1) << REMOTE_COUNT_SHIFT) | self;
    if (cache->free_list_remote.compare_exchange_weak(head, next, std::memory_order_release,
                                                      std::memory_order_relaxed))
      return;
  }
}

// The owner's put onto its own list (the kernel's task-context put): plain loads and stores.
static void bio_put_own_cache(BioAllocCache* cache, Bio* bio) {
  if (!cache_enter(cache)) [[unlikely]] {  // being trimmed: this one goes to the mempool
    bio_free(bio);
    return;
  }
  const unsigned nr = cache->nr.load(std::memory_order_relaxed);
  const unsigned remote = BioAllocCache::remote_count(cache->free_list_remote.load(std::memory_order_relaxed));
  if (nr + remote >= ALLOC_CACHE_MAX) [[unlikely]] {
    cache->put_full.add();
    cache_exit(cache);
    bio_free(bio);
    return;
  }
  bio->bi_next = cache->free_list;
  // Kernel commit "block: clear bio->bi_bdev when putting a bio back in the cache": a cached
  // bio names no device, so nothing polls or submits a bio that was already put.
  bio->bi_bdev = nullptr;
  cache->free_list = bio;
  cache->nr.store(nr + 1, std::memory_order_relaxed);
  cache_exit(cache);
}

// A put by a thread other than the allocating one (`own`: the putter's domain in the set, or
// nullptr). v6.18: into the cache of the CPU the put runs on: a thread with a domain puts onto
// its own list; another thread (a completion thread: the kernel's hardirq put) pushes onto the
// remote (IRQ) list of the domain last seen on its CPU, and frees the bio when there is none.
// With BIOSET_CACHE_HOME the bio goes back to the remote list of the domain that allocated it.
[[gnu::noinline]] static void bio_put_percpu_cache_other(Bio* bio, BioAllocCache* own) {
  BioSet* bs = bio->bi_pool;
  if (bs->puts_home()) {
    bio_put_remote(bio->bi_cache, bio);
    return;
  }
  if (own) {
    bio_put_own_cache(own, bio);
    return;
  }
  if (BioAllocCache* cpu_cache = BioSetInternals::cache_of_this_cpu(bs)) {
    bio_put_remote(cpu_cache, bio);
    return;
  }
  count_remote_put_full(bs);
  bio_free(bio);
}

// bio_put_percpu_cache(). The allocating thread's put is the same in both forms: onto its own
// list (its domain is the putting CPU's cache). The test reads only the thread's slot and the
// bio, never the domain's owner line, which another thread may be writing.
static inline void bio_put_percpu_cache(Bio* bio) {
  BioAllocCache* own = BioSetInternals::this_thread_cache_if_any(bio->bi_pool);
  if (own == bio->bi_cache) [[likely]] {
    bio_put_own_cache(own, bio);
    return;
  }
  bio_put_percpu_cache_other(bio, own);
}

void bio_put(Bio* bio) {
  if (bio->bi_flags & ((1u << BIO_REFFED) | (1u << BIO_STAGE_TRACED))) [[unlikely]] {
    if (bio_flagged(bio, BIO_REFFED)) {
      assert(bio->bi_cnt.load(std::memory_order_relaxed) > 0);
      if (bio->bi_cnt.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    }
    if (bio_flagged(bio, BIO_STAGE_TRACED)) stage_bio_put_slow(bio);
  }
  if (bio->bi_opf & REQ_ALLOC_CACHE)
    bio_put_percpu_cache(bio);
  else
    bio_free(bio);
}

// The owner's list is empty: splice the remote list in if enough has gathered there. Notes the
// domain on the CPU it runs on, so other threads' puts there come back to it.
[[gnu::noinline]] static Bio* bio_alloc_cache_refill(BioSet* bs, BioAllocCache* cache) {
  BioSetInternals::note_cpu(bs, cache);
  const uintptr_t head = cache->free_list_remote.load(std::memory_order_relaxed);
  if (BioAllocCache::remote_count(head) >= ALLOC_CACHE_THRESHOLD) bio_alloc_cache_splice(cache);
  if (!cache->free_list) cache->alloc_misses.add();
  return cache->free_list;
}

// bio_alloc_percpu_cache(): a bio from the owner's list, or nullptr on a miss.
static inline Bio* bio_alloc_percpu_cache(BioSet* bs, BioAllocCache* cache) {
  if (!cache_enter(cache)) [[unlikely]] {  // being trimmed: a miss, from the mempool
    cache->alloc_misses.add();
    return nullptr;
  }
  Bio* bio = cache->free_list;
  if (!bio) [[unlikely]] {
    bio = bio_alloc_cache_refill(bs, cache);
    if (!bio) {
      cache_exit(cache);
      return nullptr;
    }
  }
  cache->free_list = bio->bi_next;
  cache->nr.store(cache->nr.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  cache->alloc_hits.add();
  cache_exit(cache);
  return bio;
}

// The mempool half of bio_alloc_bioset(): cache misses and every bio that is not eligible.
[[gnu::noinline]] static Bio* bio_alloc_from_pool(BlockDevice* bdev, uint16_t nr_vecs, blk_opf_t opf,
                                                  gfp_t gfp, BioSet* bs, BioAllocCache* cache) {
  void* p = pool_alloc(bs->bio_pool(), gfp);
  if (!p) [[unlikely]]
    return nullptr;
  // Rule 3: while the reserve is in use, give this bio back to the mempool, not to a cache.
  if (!bs->bio_pool().is_saturated()) [[unlikely]]
    opf &= ~REQ_ALLOC_CACHE;

  Bio* bio = bio_from_element(bs, p);
  if (nr_vecs > BIO_INLINE_VECS) {
    BioVec* table = bvec_alloc(bs, &nr_vecs, gfp);
    if (!table) {
      bs->bio_pool().free(p);
      return nullptr;
    }
    bio_init(bio, bdev, table, nr_vecs, opf);
  } else if (nr_vecs) {
    bio_init(bio, bdev, bio->bi_inline_vecs, BIO_INLINE_VECS, opf);
  } else {
    bio_init(bio, bdev, nullptr, 0, opf);
  }
  bio->bi_pool = bs;
  bio->bi_cache = cache;
  return bio;
}

// The allocation's stage stamp (stage_clock.h), flagging the bio a bio-started trace follows.
static inline void stage_bio_allocated(Stage stage, Bio* bio) {
  if (tls_stage.on & TRACE_BIO) [[unlikely]]
    if (stage_bio_allocated_slow(stage, bio)) bio_set_flag(bio, BIO_STAGE_TRACED);
}

Bio* bio_alloc_bioset(BlockDevice* bdev, uint16_t nr_vecs, blk_opf_t opf, gfp_t gfp, BioSet* bs) {
  assert((nr_vecs <= BIO_INLINE_VECS || bvec_pool_ready(bs)) && "set lacks BIOSET_NEED_BVECS");
  stage_bio_alloc_begin();
  if (bs->has_cache() && nr_vecs <= BIO_INLINE_VECS) {
    // Rule 2: the flag is set here, in the eligible branch, for a hit and a miss alike.
    opf |= REQ_ALLOC_CACHE;
    BioAllocCache* cache = bs->this_thread_cache();
    if (Bio* bio = bio_alloc_percpu_cache(bs, cache)) [[likely]] {
      bio_init(bio, bdev, nr_vecs ? bio->bi_inline_vecs : nullptr, nr_vecs ? BIO_INLINE_VECS : 0, opf);
      bio->bi_pool = bs;
      bio->bi_cache = cache;
      stage_bio_allocated(STAGE_BIO_ALLOC_HIT, bio);
      return bio;
    }
    // No cached bio: the one made below keeps the flag and joins the cache when put.
    Bio* bio = bio_alloc_from_pool(bdev, nr_vecs, opf, gfp, bs, cache);
    stage_bio_allocated(STAGE_BIO_ALLOC_MISS, bio);
    return bio;
  }
  opf &= ~REQ_ALLOC_CACHE;
  Bio* bio = bio_alloc_from_pool(bdev, nr_vecs, opf, gfp, bs, nullptr);
  stage_bio_allocated(STAGE_BIO_ALLOC_MISS, bio);
  return bio;
}

Bio* bio_alloc_clone(BlockDevice* bdev, Bio* src, gfp_t gfp, BioSet* bs) {
  // src->bi_opf may carry REQ_ALLOC_CACHE; bio_alloc_bioset decides the clone's own (rule 6).
  Bio* bio = bio_alloc_bioset(bdev, 0, src->bi_opf, gfp, bs);
  if (!bio) return nullptr;
  bio_set_flag(bio, BIO_CLONED);  // __bio_clone()
  blk_stat_count_clone();
  bio->bi_ioprio = src->bi_ioprio;
  bio->bi_iter = src->bi_iter;
  bio->bi_io_vec = src->bi_io_vec;
  return bio;
}

}  // namespace biofs
