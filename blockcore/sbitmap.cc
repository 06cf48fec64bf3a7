// Counterpart of lib/sbitmap.c: getting and freeing bits, the deferred clear, batch get and
// free, and sbitmap_queue's waiting and batched wake-ups. The rules are in sbitmap.h.
//
// Memory ordering, in one place:
//  - A get sets its bit with an acquire read-modify-write; a free is a release (seq_cst) one,
//    in `cleared` or in `word`, and a fold moves `cleared` into `word` with acq_rel/seq_cst
//    operations. So whatever the holder of a tag did happens before the next holder gets it.
//  - No lost wake-ups: a free is a seq_cst RMW followed by a seq_cst load of ws_active; a waiter
//    raises ws_active (seq_cst) and issues a seq_cst fence before its last try. Either the
//    freer sees the waiter (and counts the completion) or the waiter's try sees the free.
//    A fold is a free from the waiter's point of view and does the same (sbitmap.h).
//    Weaker orders elsewhere are commented where they are used.
#include "sbitmap.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>

namespace biofs {

namespace {

constexpr unsigned long low_bits(unsigned n) { return n >= SBITMAP_BITS_PER_WORD ? ~0UL : (1UL << n) - 1; }

// ---- "CPU" slots: which line of a map's per-CPU array a thread uses ----------------------

static_assert(SBITMAP_NR_CPUS == 64, "the slot claim mask is one 64-bit word");
std::atomic<uint64_t> g_cpu_claimed{0};
std::atomic<unsigned> g_cpu_shared_next{0};
// This thread's slot + 1; 0 until its first use. constinit and trivial: no TLS init guard.
constinit thread_local unsigned tls_cpu = 0;

// Gives the slot back when the thread exits.
struct CpuSlotRelease {
  unsigned slot = SBITMAP_NR_CPUS;
  ~CpuSlotRelease() {
    if (slot < SBITMAP_NR_CPUS) g_cpu_claimed.fetch_and(~(uint64_t(1) << slot), std::memory_order_release);
  }
};
thread_local CpuSlotRelease tls_cpu_release;

[[gnu::noinline, gnu::cold]] unsigned claim_cpu_slot() {
  uint64_t claimed = g_cpu_claimed.load(std::memory_order_relaxed);
  unsigned slot;
  for (;;) {
    if (claimed == ~uint64_t(0)) {  // more than SBITMAP_NR_CPUS live threads: share
      slot = g_cpu_shared_next.fetch_add(1, std::memory_order_relaxed) % SBITMAP_NR_CPUS;
      break;
    }
    slot = unsigned(std::countr_one(claimed));
    // acquire: the slot's counters, last written by its previous owner, are ours now.
    if (g_cpu_claimed.compare_exchange_weak(claimed, claimed | (uint64_t(1) << slot), std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
      tls_cpu_release.slot = slot;
      break;
    }
  }
  tls_cpu = slot + 1;
  return slot;
}

// Where slot `cpu` starts allocating in a map of `depth` bits: the golden-ratio sequence, so
// that slots claimed one after another start in different words. (The kernel picks at random.)
unsigned spread_hint(unsigned cpu, unsigned depth) {
  return unsigned((uint64_t(cpu * 0x9E3779B9u) * depth) >> 32);
}

// ---- allocation hint ---------------------------------------------------------------------

// update_alloc_hint_before_get()
unsigned hint_before_get(SbitmapCpu& me, unsigned cpu, unsigned depth) {
  unsigned hint = me.alloc_hint.load(std::memory_order_relaxed);
  if (hint >= depth) [[unlikely]] {
    hint = depth ? spread_hint(cpu, depth) : 0;
    me.alloc_hint.store(hint, std::memory_order_relaxed);
  }
  return hint;
}

// update_alloc_hint_after_get(): a full map resets the hint; otherwise it moves only when the
// hinted bit was the one taken (always, for round_robin).
void hint_after_get(const Sbitmap* sb, SbitmapCpu& me, unsigned depth, unsigned hint, long nr) {
  if (nr < 0) {
    me.alloc_hint.store(0, std::memory_order_relaxed);
  } else if (unsigned(nr) == hint || sb->round_robin) {
    unsigned next = unsigned(nr) + 1;
    if (next >= depth - 1) next = 0;
    me.alloc_hint.store(next, std::memory_order_relaxed);
  }
}

// sbitmap_update_cpu_hint(): a freed tag becomes the allocating CPU's next start.
void update_cpu_hint(Sbitmap* sb, unsigned cpu, unsigned tag) {
  if (!sb->round_robin && tag < sb->depth.load(std::memory_order_relaxed))
    sb->cpu[cpu % SBITMAP_NR_CPUS].alloc_hint.store(tag, std::memory_order_relaxed);
}

// ---- words -------------------------------------------------------------------------------

// What a get learned on the way: folds it did and how many bits they freed.
struct GetCtx {
  unsigned folds = 0;
  unsigned freed = 0;
};

// The fold of sbitmap_deferred_clear(): moves `cleared` into `word`. True if it moved bits.
bool fold_cleared(SbitmapWord& w, GetCtx& ctx) {
  if (!w.cleared.load(std::memory_order_relaxed)) return false;
  // acquire: pairs with the frees' release; the word RMW then passes it on to the next getter
  // and is seq_cst for the wake-up handshake (the caller tells waiters what it freed).
  const unsigned long mask = w.cleared.exchange(0, std::memory_order_acq_rel);
  if (!mask) return false;
  w.word.fetch_and(~mask, std::memory_order_seq_cst);
  ctx.folds++;
  ctx.freed += unsigned(std::popcount(mask));
  return true;
}

// sbitmap_deferred_clear(): true if the caller should look at the word again — bits were
// folded, or nothing was to fold but the range it searches ([hint, depth), or all of
// [0, depth) with wrap) has a free bit after all.
bool deferred_clear(SbitmapWord& w, unsigned depth, unsigned hint, bool wrap, GetCtx& ctx) {
  if (fold_cleared(w, ctx)) return true;
  if (!depth) return false;
  unsigned long mask = low_bits(depth);
  if (!wrap && hint) mask &= ~low_bits(hint);
  return (w.word.load(std::memory_order_relaxed) & mask) != mask;
}

// __sbitmap_get_word(): sets and returns a zero bit of the word in [hint, depth), then in
// [0, hint) if wrap; -1 if there is none. A lost race retries with the value the RMW returned.
int get_word(std::atomic<unsigned long>& word, unsigned depth, unsigned hint, bool wrap) {
  const unsigned long in_depth = low_bits(depth);
  unsigned long from = hint < depth ? ~low_bits(hint) : 0;
  unsigned long val = word.load(std::memory_order_relaxed);
  for (;;) {
    unsigned long free = ~val & in_depth & from;
    if (!free) {
      if (!wrap || from == ~0UL) return -1;
      from = ~0UL;  // wrap once: the whole word from now on
      free = ~val & in_depth;
      if (!free) return -1;
    }
    const unsigned nr = unsigned(std::countr_zero(free));
    const unsigned long bit = 1UL << nr;
    val = word.fetch_or(bit, std::memory_order_acquire);
    if (!(val & bit)) return int(nr);
  }
}

// sbitmap_find_bit_in_word()
int find_bit_in_word(SbitmapWord& w, unsigned depth, unsigned hint, bool wrap, GetCtx& ctx) {
  for (;;) {
    const int nr = get_word(w.word, depth, hint, wrap);
    if (nr >= 0) return nr;
    if (!deferred_clear(w, depth, hint, wrap, ctx)) return -1;
  }
}

// __map_depth_with_shallow(): word `index`'s share of shallow_depth. Our split is exact: the
// shares are differences of floor(shallow * bit / depth) at word boundaries, so they add up
// to shallow_depth.
unsigned shallow_word_depth(const Sbitmap* sb, unsigned depth, unsigned index, unsigned shallow) {
  const unsigned wd = sbitmap_word_depth(sb, depth, index);
  if (shallow >= depth) return wd;
  const uint64_t start = uint64_t(index) << sb->shift;
  return unsigned((start + wd) * shallow / depth - start * shallow / depth);
}

// sbitmap_get() / sbitmap_get_shallow() for slot `cpu`; shallow >= depth means no limit.
int get_bit(Sbitmap* sb, unsigned cpu, unsigned shallow, GetCtx& ctx) {
  SbitmapCpu& me = sb->cpu[cpu];
  const unsigned depth = sb->depth.load(std::memory_order_acquire);
  const unsigned hint = hint_before_get(me, cpu, depth);
  const unsigned map_nr = sbitmap_map_nr(sb, depth);
  const bool limited = shallow < depth;
  int nr = -1;
  if (map_nr) {
    const unsigned start = SB_NR_TO_INDEX(sb, hint);
    // Without round_robin the hint only picks the word; a shallow get starts at its bit.
    const unsigned start_bit = (sb->round_robin || limited) ? SB_NR_TO_BIT(sb, hint) : 0;
    const bool wrap = !sb->round_robin;
    unsigned index = start, bit_hint = start_bit;
    for (unsigned i = 0; i < map_nr; i++) {
      const unsigned wd = limited ? shallow_word_depth(sb, depth, index, shallow) : sbitmap_word_depth(sb, depth, index);
      const int bit = find_bit_in_word(sb->map[index], wd, bit_hint, wrap, ctx);
      if (bit >= 0) {
        nr = int(index << sb->shift) + bit;
        break;
      }
      bit_hint = 0;
      if (++index >= map_nr) index = 0;
    }
    // round_robin starts inside a word and does not wrap in it; look below the start once more
    // so that -1 always means every bit was seen taken.
    if (nr < 0 && !wrap && start_bit) {
      const int bit = find_bit_in_word(sb->map[start], sbitmap_word_depth(sb, depth, start), 0, false, ctx);
      if (bit >= 0) nr = int(start << sb->shift) + bit;
    }
  }
  hint_after_get(sb, me, depth, hint, nr);
  me.gets.add();
  if (nr < 0) me.get_failed.add();
  if (ctx.folds) me.folds.add(ctx.folds);
  return nr;
}

unsigned calc_wake_batch(unsigned depth, unsigned min_shallow_depth) {
  return std::clamp(std::min(depth, min_shallow_depth) / SBQ_WAIT_QUEUES, 1u, SBQ_WAKE_BATCH);
}

// ---- wait queues -------------------------------------------------------------------------

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BIOFS_SBITMAP_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define BIOFS_SBITMAP_TSAN 1
#endif

// sbitmap_prepare_to_wait()'s seq_cst fence. TSan does not model fences (GCC says so with
// -Wtsan); under it a seq_cst read-modify-write stands in, a full barrier on the x86 machines
// the TSan configuration runs on.
void waiter_fence([[maybe_unused]] SbitmapQueue* sbq) {
#ifdef BIOFS_SBITMAP_TSAN
  sbq->ws_active.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

void ws_append(SbqWaitState* ws, SbqWait* w) {
  w->next = nullptr;
  w->prev = ws->tail;
  if (ws->tail)
    ws->tail->next = w;
  else
    ws->head = w;
  ws->tail = w;
}

void ws_unlink(SbqWaitState* ws, SbqWait* w) {
  if (w->prev)
    w->prev->next = w->next;
  else
    ws->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    ws->tail = w->prev;
  w->next = w->prev = nullptr;
}

// wake_up_nr() with autoremove: takes up to nr waiters off the queue, oldest first, and
// wakes them. Notifies under the lock: a waiter cannot leave (and destroy its entry) before
// it has the lock back.
unsigned ws_wake_up(SbqWaitState* ws, unsigned nr) {
  std::lock_guard guard(ws->lock);
  unsigned woken = 0;
  while (woken < nr && ws->head) {
    SbqWait* w = ws->head;
    ws_unlink(ws, w);
    w->queued = false;
    w->woken = true;
    w->cv.notify_one();
    woken++;
  }
  return woken;
}

// __sbitmap_queue_wake_up(): wakes nr waiters, starting at wake_index and going round the
// queues; the index moves past each queue looked at, so the next batch starts further on.
void wake_up_nr(SbitmapQueue* sbq, unsigned nr) {
  const unsigned start = sbq->wake_index.load(std::memory_order_relaxed) % SBQ_WAIT_QUEUES;
  unsigned index = start;
  for (unsigned i = 0; i < SBQ_WAIT_QUEUES && nr; i++) {
    SbqWaitState* ws = &sbq->ws[index];
    index = (index + 1) % SBQ_WAIT_QUEUES;
    nr -= ws_wake_up(ws, nr);
  }
  if (index != start) sbq->wake_index.store(index, std::memory_order_relaxed);
}

// The counting half of sbitmap_queue_wake_up(), for a caller that saw ws_active set: whoever
// brings the completions wake_batch past the wake-ups fires a batch. The kernel fires at most
// one per call; a batch free may owe several, so keep going while they are due.
void count_completions(SbitmapQueue* sbq, unsigned nr) {
  const unsigned wake_batch = sbq->wake_batch.load(std::memory_order_relaxed);
  sbq->completion_cnt.fetch_add(nr, std::memory_order_relaxed);
  unsigned wakeups = sbq->wakeup_cnt.load(std::memory_order_relaxed);
  for (;;) {
    const int due = int(sbq->completion_cnt.load(std::memory_order_relaxed) - wakeups);
    if (due < int(wake_batch)) return;
    if (sbq->wakeup_cnt.compare_exchange_weak(wakeups, wakeups + wake_batch, std::memory_order_relaxed)) {
      wakeups += wake_batch;
      sbq->wake_batches.fetch_add(1, std::memory_order_relaxed);
      wake_up_nr(sbq, wake_batch);
    }
  }
}

}  // namespace

// ---- Sbitmap -----------------------------------------------------------------------------

int sbitmap_calculate_shift(unsigned depth) {
  unsigned bits_per_word = SBITMAP_BITS_PER_WORD;
  if (depth >= 4)
    while (4 * bits_per_word > depth) bits_per_word >>= 1;
  return std::countr_zero(bits_per_word);
}

unsigned sbitmap_current_cpu() {
  const unsigned cpu = tls_cpu;
  if (cpu) [[likely]]
    return cpu - 1;
  return claim_cpu_slot();
}

int sbitmap_init_node(Sbitmap* sb, unsigned depth, int shift, bool round_robin) {
  if (shift < 0) shift = sbitmap_calculate_shift(depth);
  if (shift > 6) return -EINVAL;  // words wider than BITS_PER_LONG
  sb->depth.store(depth, std::memory_order_relaxed);
  sb->round_robin = round_robin;
  sb->shift = unsigned(shift);
  sb->map_capacity = sbitmap_map_nr(sb, depth);
  sb->map = std::make_unique<SbitmapWord[]>(std::max(sb->map_capacity, 1u));
  sb->cpu = std::make_unique<SbitmapCpu[]>(SBITMAP_NR_CPUS);
  if (!round_robin)
    for (unsigned i = 0; i < SBITMAP_NR_CPUS; i++)
      sb->cpu[i].alloc_hint.store(spread_hint(i, depth), std::memory_order_relaxed);
  return 0;
}

int sbitmap_get(Sbitmap* sb) {
  GetCtx ctx;
  return get_bit(sb, sbitmap_current_cpu(), ~0u, ctx);
}

int sbitmap_get_shallow(Sbitmap* sb, unsigned shallow_depth) {
  if (sb->round_robin) return -1;
  GetCtx ctx;
  return get_bit(sb, sbitmap_current_cpu(), shallow_depth, ctx);
}

void sbitmap_set_bit(Sbitmap* sb, unsigned bitnr) {
  sb->map[SB_NR_TO_INDEX(sb, bitnr)].word.fetch_or(1UL << SB_NR_TO_BIT(sb, bitnr), std::memory_order_acquire);
}

void sbitmap_clear_bit(Sbitmap* sb, unsigned bitnr) {
  sb->map[SB_NR_TO_INDEX(sb, bitnr)].word.fetch_and(~(1UL << SB_NR_TO_BIT(sb, bitnr)), std::memory_order_seq_cst);
}

void sbitmap_deferred_clear_bit(Sbitmap* sb, unsigned bitnr) {
  sb->map[SB_NR_TO_INDEX(sb, bitnr)].cleared.fetch_or(1UL << SB_NR_TO_BIT(sb, bitnr), std::memory_order_seq_cst);
}

bool sbitmap_test_bit(const Sbitmap* sb, unsigned bitnr) {
  return sb->map[SB_NR_TO_INDEX(sb, bitnr)].word.load(std::memory_order_relaxed) & (1UL << SB_NR_TO_BIT(sb, bitnr));
}

unsigned sbitmap_weight(const Sbitmap* sb) {
  unsigned weight = 0;
  sbitmap_for_each_set(sb, [&](unsigned) {
    weight++;
    return true;
  });
  return weight;
}

bool sbitmap_any_bit_set(const Sbitmap* sb) {
  bool any = false;
  sbitmap_for_each_set(sb, [&](unsigned) {
    any = true;
    return false;
  });
  return any;
}

namespace {
unsigned resize(Sbitmap* sb, unsigned depth) {  // the caller checked depth against the capacity
  GetCtx ctx;
  for (unsigned i = 0; i < sb->map_capacity; i++) fold_cleared(sb->map[i], ctx);
  sb->depth.store(depth, std::memory_order_release);
  return ctx.freed;
}
}  // namespace

static bool resize_fits(const Sbitmap* sb, unsigned depth) { return depth <= (sb->map_capacity << sb->shift); }

int sbitmap_resize(Sbitmap* sb, unsigned depth) {
  if (!resize_fits(sb, depth)) return -EINVAL;
  resize(sb, depth);
  return 0;
}

SbitmapStats sbitmap_stats(const Sbitmap* sb) {
  SbitmapStats s;
  for (unsigned i = 0; i < SBITMAP_NR_CPUS; i++) {
    const SbitmapCpu& c = sb->cpu[i];
    s.gets += c.gets.get();
    s.get_failed += c.get_failed.get();
    s.batch_gets += c.batch_gets.get();
    s.batch_tags += c.batch_tags.get();
    s.batch_failed += c.batch_failed.get();
    s.folds += c.folds.get();
    s.batch_frees += c.batch_frees.get();
    s.batch_freed += c.batch_freed.get();
  }
  return s;
}

// ---- SbitmapQueue ------------------------------------------------------------------------

int sbitmap_queue_init_node(SbitmapQueue* sbq, unsigned depth, int shift, bool round_robin) {
  if (int ret = sbitmap_init_node(&sbq->sb, depth, shift, round_robin); ret) return ret;
  sbq->wake_batch.store(calc_wake_batch(depth, ~0u), std::memory_order_relaxed);
  return 0;
}

int sbitmap_queue_get(SbitmapQueue* sbq, unsigned* cpu) {
  const unsigned c = sbitmap_current_cpu();
  *cpu = c;
  GetCtx ctx;
  const int nr = get_bit(&sbq->sb, c, ~0u, ctx);
  if (ctx.freed) [[unlikely]]
    sbitmap_queue_wake_up(sbq, int(ctx.freed));
  return nr;
}

int sbitmap_queue_get_bit(SbitmapQueue* sbq) {
  unsigned cpu;
  return sbitmap_queue_get(sbq, &cpu);
}

int sbitmap_queue_get_shallow(SbitmapQueue* sbq, unsigned shallow_depth) {
  assert(shallow_depth >= sbq->min_shallow_depth.load(std::memory_order_relaxed));
  if (sbq->sb.round_robin) return -1;
  GetCtx ctx;
  const int nr = get_bit(&sbq->sb, sbitmap_current_cpu(), shallow_depth, ctx);
  if (ctx.freed) [[unlikely]]
    sbitmap_queue_wake_up(sbq, int(ctx.freed));
  return nr;
}

unsigned long sbitmap_batch_take_window(std::atomic<unsigned long>& word, unsigned long val, unsigned nr,
                                        unsigned nr_tags) {
  // v6.18 __sbitmap_queue_get_batch(): the window (get_mask) is fixed before the
  // compare-and-swap; a failed CAS retries the same window with the value it found, so bits
  // taken meanwhile are simply not obtained. (low_bits: the kernel's (1UL << nr_tags) - 1 is
  // undefined for nr_tags == BITS_PER_LONG; blk-mq never asks for more than 32.)
  const unsigned long window = low_bits(nr_tags) << nr;
  while (!word.compare_exchange_weak(val, val | window, std::memory_order_acquire, std::memory_order_relaxed)) {
  }
  return (window & ~val) >> nr;
}

unsigned long sbitmap_queue_get_batch(SbitmapQueue* sbq, int nr_tags, unsigned* offset) {
  Sbitmap* sb = &sbq->sb;
  const unsigned c = sbitmap_current_cpu();
  SbitmapCpu& me = sb->cpu[c];
  const unsigned depth = sb->depth.load(std::memory_order_acquire);
  const unsigned map_nr = sbitmap_map_nr(sb, depth);
  GetCtx ctx;
  unsigned long got = 0;
  if (!sb->round_robin && nr_tags > 0 && map_nr) {
    const unsigned hint = hint_before_get(me, c, depth);
    unsigned index = SB_NR_TO_INDEX(sb, hint);
    // v6.18 __sbitmap_queue_get_batch(), one attempt per word starting at the hint's word:
    for (unsigned i = 0; i < map_nr; i++, index = index + 1 >= map_nr ? 0 : index + 1) {
      SbitmapWord& w = sb->map[index];
      const unsigned map_depth = sbitmap_word_depth(sb, depth, index);
      // sbitmap_deferred_clear(map, 0, 0, 0): fold `cleared` first, on every word visited.
      fold_cleared(w, ctx);
      const unsigned long val = w.word.load(std::memory_order_relaxed);
      // v6.18's "word full" test compares with map_depth - 1 ones: a word whose only free bit
      // is its last is passed over (this matters only for nr_tags == 1, which blk-mq never asks).
      if (val == low_bits(map_depth - 1)) continue;
      // find_first_zero_bit(): the window starts at the word's first free bit, and the whole
      // window must fit in the word. So nr_tags over the word's bits never fits: no batch (0).
      const unsigned long free = ~val & low_bits(map_depth);
      const unsigned nr = free ? unsigned(std::countr_zero(free)) : map_depth;
      if (uint64_t(nr) + unsigned(nr_tags) > map_depth) continue;
      got = sbitmap_batch_take_window(w.word, val, nr, unsigned(nr_tags));
      if (got) {
        *offset = (index << sb->shift) + nr;
        hint_after_get(sb, me, depth, hint, long(*offset) + nr_tags - 1);
        break;
      }
    }
  }
  me.batch_gets.add();
  if (got)
    me.batch_tags.add(unsigned(std::popcount(got)));
  else
    me.batch_failed.add();
  if (ctx.folds) me.folds.add(ctx.folds);
  if (ctx.freed) [[unlikely]]
    sbitmap_queue_wake_up(sbq, int(ctx.freed));
  return got;
}

void sbitmap_queue_clear(SbitmapQueue* sbq, unsigned nr, unsigned cpu) {
  Sbitmap* sb = &sbq->sb;
  SbitmapWord& w = sb->map[SB_NR_TO_INDEX(sb, nr)];
  const unsigned long bit = 1UL << SB_NR_TO_BIT(sb, nr);
  // sbitmap_deferred_clear_bit(). seq_cst: a release, and ordered before the ws_active read.
  w.cleared.fetch_or(bit, std::memory_order_seq_cst);
  if (sbq->ws_active.load(std::memory_order_seq_cst)) [[unlikely]] {
    // Someone waits: the bit goes straight to `word` and counts as a completion, unless a
    // fold took it first (the fold counts it then). Each free is counted once.
    if (w.cleared.fetch_and(~bit, std::memory_order_acq_rel) & bit) {
      w.word.fetch_and(~bit, std::memory_order_seq_cst);
      count_completions(sbq, 1);
    }
  }
  update_cpu_hint(sb, cpu, nr);
}

void sbitmap_queue_clear_batch(SbitmapQueue* sbq, int offset, const int* tags, int nr_tags) {
  if (nr_tags <= 0) return;
  Sbitmap* sb = &sbq->sb;
  constexpr unsigned kMaxWords = 8;
  struct {
    unsigned index;
    unsigned long mask;
  } pending[kMaxWords];
  unsigned n = 0;
  auto flush = [&] {
    for (unsigned i = 0; i < n; i++) sb->map[pending[i].index].word.fetch_and(~pending[i].mask, std::memory_order_seq_cst);
    n = 0;
  };
  for (int i = 0; i < nr_tags; i++) {
    const unsigned tag = unsigned(tags[i] - offset);
    const unsigned index = SB_NR_TO_INDEX(sb, tag);
    unsigned j = 0;
    while (j < n && pending[j].index != index) j++;
    if (j == n) {
      if (n == kMaxWords) flush();
      j = n++;
      pending[j] = {index, 0};
    }
    pending[j].mask |= 1UL << SB_NR_TO_BIT(sb, tag);
  }
  flush();
  sbitmap_queue_wake_up(sbq, nr_tags);  // one wake-up call per batch, as v6.18's
  const unsigned cpu = sbitmap_current_cpu();
  SbitmapCpu& me = sb->cpu[cpu];
  me.batch_frees.add();
  me.batch_freed.add(unsigned(nr_tags));
  update_cpu_hint(sb, cpu, unsigned(tags[nr_tags - 1] - offset));
}

void sbitmap_queue_wake_up(SbitmapQueue* sbq, int nr) {
  if (nr <= 0) return;
  // The freer's half of the handshake: this seq_cst load follows the free's seq_cst RMW.
  if (!sbq->ws_active.load(std::memory_order_seq_cst)) return;
  count_completions(sbq, unsigned(nr));
}

void sbitmap_queue_wake_all(SbitmapQueue* sbq) {
  for (unsigned i = 0; i < SBQ_WAIT_QUEUES; i++) ws_wake_up(&sbq->ws[i], ~0u);
}

int sbitmap_queue_resize(SbitmapQueue* sbq, unsigned depth) {
  if (!resize_fits(&sbq->sb, depth)) return -EINVAL;
  const unsigned old_depth = sbq->sb.depth.load(std::memory_order_relaxed);
  sbq->wake_batch.store(calc_wake_batch(depth, sbq->min_shallow_depth.load(std::memory_order_relaxed)),
                        std::memory_order_relaxed);
  const unsigned freed = resize(&sbq->sb, depth);
  if (depth > old_depth)
    sbitmap_queue_wake_all(sbq);  // new bits came without completions to count
  else if (freed)
    sbitmap_queue_wake_up(sbq, int(freed));
  return 0;
}

void sbitmap_queue_min_shallow_depth(SbitmapQueue* sbq, unsigned min_shallow_depth) {
  sbq->min_shallow_depth.store(min_shallow_depth, std::memory_order_relaxed);
  sbq->wake_batch.store(calc_wake_batch(sbq->sb.depth.load(std::memory_order_relaxed), min_shallow_depth),
                        std::memory_order_relaxed);
}

SbitmapStats sbitmap_queue_stats(const SbitmapQueue* sbq) {
  SbitmapStats s = sbitmap_stats(&sbq->sb);
  s.waits = sbq->waits.load(std::memory_order_relaxed);
  s.wait_timeouts = sbq->wait_timeouts.load(std::memory_order_relaxed);
  s.wake_batches = sbq->wake_batches.load(std::memory_order_relaxed);
  return s;
}

// ---- waiting -----------------------------------------------------------------------------

SbqWaitState* sbq_wait_ptr(SbitmapQueue* sbq, std::atomic<unsigned>* wait_index) {
  return &sbq->ws[wait_index->fetch_add(1, std::memory_order_relaxed) % SBQ_WAIT_QUEUES];
}

void sbitmap_prepare_to_wait(SbitmapQueue* sbq, SbqWaitState* ws, SbqWait* wait) {
  if (wait->ws && wait->ws != ws) {  // still on another queue: leave it first
    std::lock_guard guard(wait->ws->lock);
    if (wait->queued) {
      ws_unlink(wait->ws, wait);
      wait->queued = false;
    }
  }
  {
    std::lock_guard guard(ws->lock);
    if (!wait->queued) {
      ws_append(ws, wait);
      wait->queued = true;
      wait->woken = false;
    }
    wait->ws = ws;
  }
  if (!wait->sbq) {
    wait->sbq = sbq;
    sbq->ws_active.fetch_add(1, std::memory_order_seq_cst);
  }
  // The waiter's half of the handshake: the caller's next try comes after this fence.
  waiter_fence(sbq);
}

bool sbitmap_wait_sleep(SbqWaitState* ws, SbqWait* wait, std::chrono::steady_clock::time_point deadline) {
  if (wait->ws) ws = wait->ws;
  if (wait->sbq) wait->sbq->waits.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock guard(ws->lock);
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    wait->cv.wait(guard, [&] { return wait->woken; });
    return true;
  }
  return wait->cv.wait_until(guard, deadline, [&] { return wait->woken; });
}

void sbitmap_finish_wait(SbitmapQueue* sbq, SbqWaitState* ws, SbqWait* wait) {
  if (wait->ws) ws = wait->ws;
  {
    std::lock_guard guard(ws->lock);
    if (wait->queued) {
      ws_unlink(ws, wait);
      wait->queued = false;
    }
  }
  if (wait->sbq) {
    sbq->ws_active.fetch_sub(1, std::memory_order_seq_cst);
    wait->sbq = nullptr;
  }
}

int sbitmap_queue_get_wait(SbitmapQueue* sbq, unsigned* cpu, std::chrono::nanoseconds timeout) {
  int nr = sbitmap_queue_get(sbq, cpu);
  if (nr >= 0) return nr;
  using clock = std::chrono::steady_clock;
  const clock::time_point now = clock::now();
  const clock::time_point deadline =
      timeout >= clock::time_point::max() - now ? clock::time_point::max() : now + std::chrono::duration_cast<clock::duration>(timeout);
  SbqWait wait;
  SbqWaitState* ws = sbq_wait_ptr(sbq, &sbq->wait_index);
  for (;;) {
    sbitmap_prepare_to_wait(sbq, ws, &wait);
    nr = sbitmap_queue_get(sbq, cpu);
    if (nr >= 0) break;
    const bool woken = sbitmap_wait_sleep(ws, &wait, deadline);
    sbitmap_finish_wait(sbq, ws, &wait);
    nr = sbitmap_queue_get(sbq, cpu);
    if (nr >= 0) return nr;
    if (!woken) {
      sbq->wait_timeouts.fetch_add(1, std::memory_order_relaxed);
      // A wake that reached us between the timeout and finish_wait must not be lost.
      if (wait.woken) wake_up_nr(sbq, 1);
      return -1;
    }
    ws = sbq_wait_ptr(sbq, &sbq->wait_index);
  }
  sbitmap_finish_wait(sbq, ws, &wait);
  return nr;
}

}  // namespace biofs
