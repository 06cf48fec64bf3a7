// Counterpart of include/linux/sbitmap.h and lib/sbitmap.c: the scalable bitmap blk-mq takes its
// tags from (Sbitmap, struct sbitmap) and the queue that adds waiting for a free bit and batched
// wake-ups (SbitmapQueue, struct sbitmap_queue).
//
// The rules (mainline Linux v6.18 behaviour unless a point says otherwise):
//  1. A map of `depth` bits is cut into words of 1 << shift bits (at most BITS_PER_LONG). Small
//     maps get narrower words so that they spread over at least four cache lines
//     (sbitmap_calculate_shift). Each word sits on its own cache line, and its `cleared` mask on
//     the next one. The last word may be short: no bit >= depth is ever handed out.
//  2. A set bit in `word` is allocated. sbitmap_deferred_clear_bit() (what sbitmap_queue_clear()
//     uses while nobody waits) sets the bit in `cleared` instead of touching `word`; a get that
//     finds a word full first folds `cleared` back into `word` (sbitmap_deferred_clear) and
//     looks again. A batch get folds every word it visits before looking at it (rule 4).
//  3. A get starts at the caller's allocation hint ("per-CPU", see below): without round_robin
//     the hint picks the first word, searched from bit 0, and moves only when the bit it named
//     was the one taken; with round_robin the hint is a bit and always moves past the last bit
//     handed out. A full map resets the hint to 0. A free puts the freed bit into the hint of
//     the "CPU" that allocated it (sbitmap_update_cpu_hint).
//  4. sbitmap_queue_get_batch() is mainline v6.18's __sbitmap_queue_get_batch(). Starting at the
//     hint's word it visits each word once: it first folds the word's `cleared` into `word`
//     (sbitmap_deferred_clear(map, 0, 0, 0), on every word visited, whether or not it is full),
//     reads the word, passes over it if it holds map_depth - 1 set bits (v6.18's "full" test,
//     which also passes over a word whose only free bit is its last), and otherwise puts the
//     window of nr_tags bits at the word's first free bit. A window that does not fit before the
//     word's end means the next word; so nr_tags larger than a word's bits never gets a batch:
//     0, and blk-mq falls back to a single tag. The window is fixed once per word: a failed
//     compare-and-swap is retried on the same window with the value it found
//     (sbitmap_batch_take_window), so bits taken meanwhile are simply not obtained. The returned
//     mask (relative to *offset) says which bits the caller got and may have holes; if it is
//     empty the next word is tried. This "fewer than asked" result is what "blk-mq: retry
//     batch allocation of tags" (2025) is about: tag_batch=retain and loop. (The clamp of
//     nr_tags to a word's bits that biofs once had is tag_batch=clamp, in blk-mq.)
//  5. sbitmap_queue_clear_batch() frees straight into `word`, one atomic per word touched (up
//     to eight words per call; a batch spread wider costs one more atomic per extra group).
//  6. Waiting: a caller that found the map full queues itself on one of SBQ_WAIT_QUEUES wait
//     queues (sbitmap_prepare_to_wait), tries once more, and sleeps. Frees count completions
//     while anyone waits, and every wake_batch completions wake wake_batch waiters, rotating
//     over the queues (sbitmap_queue_wake_up: the kernel's completion_cnt/wakeup_cnt rule that
//     replaced the per-queue wait_cnt in 6.2). wake_batch = clamp(min(depth,
//     min_shallow_depth) / SBQ_WAIT_QUEUES, 1, SBQ_WAKE_BATCH). Where we differ: one call that
//     brings several batches due fires them all (the kernel fires one per call), a wait that
//     times out passes on a wake it received, and growing the map wakes everyone.
//
// What "per-CPU" means here: a "CPU" is a slot, one of SBITMAP_NR_CPUS, that a thread claims
// the first time it touches any sbitmap and gives back when it exits; sbitmap_current_cpu()
// returns it. Each map keeps one cache line per slot holding that slot's allocation hint and
// its counters. Why per-thread slots rather than sched_getcpu()/rseq: the hint's job is to
// spread concurrent allocators over different words and to keep one allocator's tags together,
// which is about who allocates, not where it runs; a slot costs one TLS read, needs no syscall
// and no rseq registration, and lets the counters be single-writer (a relaxed load and store,
// no locked instruction). The price: a thread that migrates keeps its hint (the kernel's would
// change with the CPU), and past 64 live threads slots are shared — harmless for hints, which
// the kernel also writes racily, but then the shared slots' counters may lose increments.
//
// Get and free paths take no lock, allocate nothing and make no syscall. Waiting uses one
// mutex per wait queue and a condition variable per waiter, touched only when the map is full.
//
// One place where we differ for a reason: the kernel's fold (xchg `cleared` to 0, then clear
// those bits in `word`) has a window in which the bits are in neither place, and a get that
// looks then fails although they are free; a waiter could go to sleep on that. The kernel
// closed it with a per-word spinlock. We stay lock-free: whoever makes bits free in `word` while
// someone waits counts them as completions — the get that folded them, or, for a free made
// while someone waits, the freer itself, which then puts its bit straight into `word` (taking
// it back out of `cleared` unless a fold already has). Each free is counted once, and a waiter
// that looked inside the window is still woken. A get that does not wait may still fail inside
// the window, as it could in the kernel before the lock.
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace biofs {

inline constexpr unsigned SBITMAP_BITS_PER_WORD = 64;  // BITS_PER_LONG
inline constexpr unsigned SBITMAP_NR_CPUS = 64;        // allocation hint slots per map
inline constexpr unsigned SBQ_WAIT_QUEUES = 8;
inline constexpr unsigned SBQ_WAKE_BATCH = 8;
static_assert(sizeof(unsigned long) * 8 == SBITMAP_BITS_PER_WORD, "an sbitmap word is a long");

// struct sbitmap_word: the allocated bits, and on their own line the bits freed but not yet
// folded back. (The kernel's swap_lock has no counterpart: see the header comment.)
struct alignas(64) SbitmapWord {
  std::atomic<unsigned long> word{0};
  alignas(64) std::atomic<unsigned long> cleared{0};
};

// A counter with one writer (the slot's thread): a relaxed load and store, readable anywhere.
struct SbitmapCounter {
  std::atomic<uint64_t> v{0};
  void add(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

// One "CPU" of a map: the kernel's per-CPU alloc_hint, plus what the tools print.
struct alignas(64) SbitmapCpu {
  std::atomic<unsigned> alloc_hint{0};
  SbitmapCounter gets;          // single-bit get calls (sbitmap_get, _shallow, sbitmap_queue_get)
  SbitmapCounter get_failed;    // of those, the ones that found no free bit
  SbitmapCounter batch_gets;    // sbitmap_queue_get_batch calls
  SbitmapCounter batch_tags;    // bits those calls obtained
  SbitmapCounter batch_failed;  // batch calls that obtained nothing
  SbitmapCounter folds;         // `cleared` masks folded back into `word`
  SbitmapCounter batch_frees;   // sbitmap_queue_clear_batch calls: one wake-up call each
  SbitmapCounter batch_freed;   // bits those calls freed
};

struct SbitmapStats {
  uint64_t gets = 0, get_failed = 0;
  uint64_t batch_gets = 0, batch_tags = 0, batch_failed = 0;
  uint64_t folds = 0;
  uint64_t batch_frees = 0, batch_freed = 0;  // sbitmap_queue_clear_batch calls (one wake-up each), bits
  uint64_t waits = 0;          // times a caller went to sleep waiting for a bit
  uint64_t wait_timeouts = 0;  // sbitmap_queue_get_wait calls that gave up
  uint64_t wake_batches = 0;   // batches of wake_batch wake-ups fired

  uint64_t alloc_calls() const { return gets + batch_gets; }
  uint64_t tags_obtained() const { return gets - get_failed + batch_tags; }
  // Tags per allocation call: 1.0 without batching, up to the batch size with it.
  double tags_per_call() const { return alloc_calls() ? double(tags_obtained()) / double(alloc_calls()) : 0.0; }
};

// struct sbitmap. Fields are public, as in the kernel; change them only through the functions.
struct Sbitmap {
  Sbitmap() = default;  // empty until sbitmap_init_node()
  Sbitmap(const Sbitmap&) = delete;
  Sbitmap& operator=(const Sbitmap&) = delete;

  std::atomic<unsigned> depth{0};  // bits in use; sbitmap_resize() changes it
  unsigned shift = 0;              // log2(bits per word)
  unsigned map_capacity = 0;       // words allocated: depth can grow up to map_capacity << shift
  bool round_robin = false;
  std::unique_ptr<SbitmapWord[]> map;
  std::unique_ptr<SbitmapCpu[]> cpu;  // SBITMAP_NR_CPUS slots: alloc_hint and counters
};

// Words in use for a depth (sb->map_nr), and how many bits word `index` has (__map_depth).
inline unsigned sbitmap_map_nr(const Sbitmap* sb, unsigned depth) {
  return (depth + (1u << sb->shift) - 1) >> sb->shift;
}
inline unsigned sbitmap_map_nr(const Sbitmap* sb) { return sbitmap_map_nr(sb, sb->depth.load(std::memory_order_relaxed)); }
inline unsigned sbitmap_word_depth(const Sbitmap* sb, unsigned depth, unsigned index) {
  return index + 1 == sbitmap_map_nr(sb, depth) ? depth - (index << sb->shift) : 1u << sb->shift;
}
inline unsigned SB_NR_TO_INDEX(const Sbitmap* sb, unsigned bitnr) { return bitnr >> sb->shift; }
inline unsigned SB_NR_TO_BIT(const Sbitmap* sb, unsigned bitnr) { return bitnr & ((1u << sb->shift) - 1); }

// The kernel's default word width for a depth: 64 bits, halved while the map would use fewer
// than four words (maps under 4 bits keep 64).
int sbitmap_calculate_shift(unsigned depth);
// sbitmap_init_node(): sets up an empty map of `depth` bits. shift < 0 picks
// sbitmap_calculate_shift(depth). Hints start spread over the map (the kernel picks them at
// random); round_robin maps start every hint at 0. 0, or -EINVAL for words wider than
// BITS_PER_LONG (shift above 6), as the kernel's.
int sbitmap_init_node(Sbitmap* sb, unsigned depth, int shift = -1, bool round_robin = false);

// This thread's slot ("smp_processor_id()"): claimed on first use, below SBITMAP_NR_CPUS.
unsigned sbitmap_current_cpu();

// A free bit, now set, or -1 if none was found.
int sbitmap_get(Sbitmap* sb);
// As sbitmap_get, using at most shallow_depth bits of the whole map, spread over the words in
// proportion to their size (the kernel's rule since 6.17). -1 on round_robin maps.
int sbitmap_get_shallow(Sbitmap* sb, unsigned shallow_depth);
// Marks a bit allocated / frees it at once in `word` / frees it through `cleared`.
void sbitmap_set_bit(Sbitmap* sb, unsigned bitnr);
void sbitmap_clear_bit(Sbitmap* sb, unsigned bitnr);
void sbitmap_deferred_clear_bit(Sbitmap* sb, unsigned bitnr);
// The bit is set in `word` (it may be freed already through `cleared`), as the kernel's.
bool sbitmap_test_bit(const Sbitmap* sb, unsigned bitnr);
// Bits allocated and not freed (set in `word`, not in `cleared`), below depth.
unsigned sbitmap_weight(const Sbitmap* sb);
bool sbitmap_any_bit_set(const Sbitmap* sb);
// Folds every word's `cleared`, then sets the depth. Bits at or above a smaller depth that are
// still held stay valid and may be freed later. 0, or -EINVAL (nothing changed) for a depth
// above map_capacity << shift (the kernel's callers never ask for one; here it is checked).
int sbitmap_resize(Sbitmap* sb, unsigned depth);
// Calls fn(bitnr) for each allocated, unfreed bit below depth until fn returns false.
template <typename Fn>
void sbitmap_for_each_set(const Sbitmap* sb, Fn fn) {
  const unsigned depth = sb->depth.load(std::memory_order_relaxed);
  for (unsigned i = 0, n = sbitmap_map_nr(sb, depth); i < n; i++) {
    const unsigned wd = sbitmap_word_depth(sb, depth, i);
    unsigned long set = sb->map[i].word.load(std::memory_order_relaxed) &
                        ~sb->map[i].cleared.load(std::memory_order_relaxed);
    if (wd < SBITMAP_BITS_PER_WORD) set &= (1UL << wd) - 1;
    for (; set; set &= set - 1)
      if (!fn((i << sb->shift) + unsigned(std::countr_zero(set)))) return;
  }
}
// The counters of every slot, summed (the wait counters stay 0: they belong to the queue).
SbitmapStats sbitmap_stats(const Sbitmap* sb);

struct SbitmapQueue;
struct SbqWaitState;

// struct sbq_wait with its wait_queue_entry: lives on the waiter's stack for one wait loop.
struct SbqWait {
  SbitmapQueue* sbq = nullptr;     // set while counted in sbq->ws_active
  SbqWaitState* ws = nullptr;      // the queue it is on while queued
  SbqWait* next = nullptr;         // queue links, guarded by ws->lock
  SbqWait* prev = nullptr;
  bool queued = false;             // guarded by ws->lock
  bool woken = false;              // guarded by ws->lock: a waker took it off the queue
  std::condition_variable cv;
};

// struct sbq_wait_state: one wait queue.
struct alignas(64) SbqWaitState {
  std::mutex lock;
  SbqWait* head = nullptr;  // FIFO, guarded by lock
  SbqWait* tail = nullptr;
};

// struct sbitmap_queue.
struct SbitmapQueue {
  SbitmapQueue() = default;  // empty until sbitmap_queue_init_node()
  SbitmapQueue(const SbitmapQueue&) = delete;
  SbitmapQueue& operator=(const SbitmapQueue&) = delete;

  Sbitmap sb;
  // Read on every free.
  alignas(64) std::atomic<int> ws_active{0};  // waiters between prepare_to_wait and finish_wait
  std::atomic<unsigned> wake_batch{0};
  std::atomic<unsigned> min_shallow_depth{~0u};
  // Written only while someone waits.
  alignas(64) std::atomic<unsigned> completion_cnt{0};
  std::atomic<unsigned> wakeup_cnt{0};
  std::atomic<unsigned> wake_index{0};
  std::atomic<unsigned> wait_index{0};  // the queue sbitmap_queue_get_wait sleeps on next
  std::atomic<uint64_t> waits{0}, wait_timeouts{0}, wake_batches{0};
  SbqWaitState ws[SBQ_WAIT_QUEUES];
};

// sbitmap_queue_init_node(): sbitmap_init_node() and the wake batch. 0 or its -EINVAL.
int sbitmap_queue_init_node(SbitmapQueue* sbq, unsigned depth, int shift = -1, bool round_robin = false);
// __sbitmap_queue_get() (a leading "__" is reserved in C++): a free bit, or -1.
int sbitmap_queue_get_bit(SbitmapQueue* sbq);
// sbitmap_queue_get(): the same, and *cpu = the caller's slot, to hand to sbitmap_queue_clear.
int sbitmap_queue_get(SbitmapQueue* sbq, unsigned* cpu);
// sbitmap_queue_get_shallow(): shallow_depth should be >= min_shallow_depth.
int sbitmap_queue_get_shallow(SbitmapQueue* sbq, unsigned shallow_depth);
// __sbitmap_queue_get_batch() (v6.18): up to nr_tags bits from one word, rule 4. Bit i of the
// result set means tag *offset + i is now the caller's. 0: no word had a free run start where
// the whole window fits (always so when nr_tags exceeds the word's bits), or a round_robin map,
// which never batches.
unsigned long sbitmap_queue_get_batch(SbitmapQueue* sbq, int nr_tags, unsigned* offset);
// The compare-and-swap step of one word's batch attempt (rule 4): sets the window of nr_tags
// bits at bit nr of `word`, starting from `val`, the value the caller read when it chose nr;
// a failed CAS retries the same window. Returns the bits obtained, shifted down by nr.
// Exposed so that a test can hand it a stale `val`.
unsigned long sbitmap_batch_take_window(std::atomic<unsigned long>& word, unsigned long val, unsigned nr,
                                        unsigned nr_tags);
// Frees bit nr through `cleared`, wakes waiters by rule 6, and makes nr the hint of `cpu`.
void sbitmap_queue_clear(SbitmapQueue* sbq, unsigned nr, unsigned cpu);
// Frees tags[i] - offset for every i, straight into `word` (rule 5), then wakes as above.
void sbitmap_queue_clear_batch(SbitmapQueue* sbq, int offset, const int* tags, int nr_tags);
// Changes the depth and wake_batch; a larger depth wakes every waiter. 0, or sbitmap_resize()'s
// -EINVAL (nothing changed).
int sbitmap_queue_resize(SbitmapQueue* sbq, unsigned depth);
void sbitmap_queue_min_shallow_depth(SbitmapQueue* sbq, unsigned min_shallow_depth);
// Counts nr completions if anyone waits, and wakes wake_batch waiters per wake_batch counted.
void sbitmap_queue_wake_up(SbitmapQueue* sbq, int nr);
void sbitmap_queue_wake_all(SbitmapQueue* sbq);
SbitmapStats sbitmap_queue_stats(const SbitmapQueue* sbq);

// The wait loop's pieces, as blk_mq_get_tag() uses them:
//   ws = sbq_wait_ptr(sbq, &idx);
//   for (;;) { sbitmap_prepare_to_wait(sbq, ws, &w); try get -> break;
//              sbitmap_wait_sleep(ws, &w, deadline); sbitmap_finish_wait(sbq, ws, &w);
//              try get -> return; ws = sbq_wait_ptr(sbq, &idx); }
//   sbitmap_finish_wait(sbq, ws, &w);
// The queue to wait on next: *wait_index, which moves on.
SbqWaitState* sbq_wait_ptr(SbitmapQueue* sbq, std::atomic<unsigned>* wait_index);
// Queues wait on ws (leaving any other queue it is still on) and counts it in ws_active
// once per wait loop; the caller must try to get after it, and end the loop with finish_wait.
void sbitmap_prepare_to_wait(SbitmapQueue* sbq, SbqWaitState* ws, SbqWait* wait);
// Sleeps until a waker took wait off its queue or until deadline; true if woken.
bool sbitmap_wait_sleep(SbqWaitState* ws, SbqWait* wait,
                        std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
// Takes wait off ws if still queued and stops counting it. wait->woken then tells whether a
// waker had picked it.
void sbitmap_finish_wait(SbitmapQueue* sbq, SbqWaitState* ws, SbqWait* wait);
// blk_mq_get_tag()'s loop: a free bit, waiting for one up to timeout; -1 if none came. A wake
// that reached a caller who then gives up is passed on to the next waiter.
int sbitmap_queue_get_wait(SbitmapQueue* sbq, unsigned* cpu,
                           std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max());

}  // namespace biofs
