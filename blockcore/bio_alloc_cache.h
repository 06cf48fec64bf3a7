// Counterpart of struct bio_alloc_cache and its helpers in block/bio.c: the per-CPU bio cache.
//
// What "per-CPU" means here: one cache per (bio set, thread) — a "cache domain". The kernel
// disables preemption to own its CPU's list; a thread owns its list outright, so the hit path
// needs no atomic read-modify-write, no lock and no syscall, and is exact for pinned threads
// (the way the daemon and the benchmarks run). blockcore/README.md weighs the alternatives.
//
// The kernel's two lists map onto two here:
//   free_list        the owner's list (the kernel's task-context list): only the owner touches it.
//   free_list_remote puts from any other thread (the kernel's IRQ list, free_list_irq): a
//                    lock-free stack. The owner takes the whole stack with one exchange when its
//                    own list is empty and the stack holds ALLOC_CACHE_THRESHOLD or more.
// Which domain a put goes to (the putting CPU's, as v6.18; or with BIOSET_CACHE_HOME the one in
// bi_cache that allocated the bio) is bio_set.h's rule 4.
#pragma once

#include <atomic>
#include <cstdint>

namespace biofs {

struct Bio;

// The kernel's bounds: a cache holds at most ALLOC_CACHE_MAX bios (both lists together), and
// the remote list is spliced in only once it holds ALLOC_CACHE_THRESHOLD.
inline constexpr unsigned ALLOC_CACHE_MAX = 256;
inline constexpr unsigned ALLOC_CACHE_THRESHOLD = 16;

// A counter with one writer: a relaxed load and store (no locked instruction), readable
// from any thread.
struct OwnerCounter {
  std::atomic<uint64_t> v{0};
  void add(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

struct BioCacheCounters {
  uint64_t alloc_hits = 0;     // allocations served from the cache
  uint64_t alloc_misses = 0;   // cache-eligible allocations that went to the mempool
  uint64_t put_local = 0;      // puts by the owner into its own list
  uint64_t put_remote = 0;     // puts by other threads that reached the remote list
  uint64_t put_full = 0;       // owner puts that found the cache full (went to the mempool)
  uint64_t splices = 0;        // remote list taken over by the owner
  uint64_t pruned = 0;         // bios given back to the mempool when a domain was trimmed or ended
  uint64_t cached = 0;         // bios in the cache now (both lists)

  BioCacheCounters& operator+=(const BioCacheCounters& o);
};

// The remote list head packs the stack's top (a user-space pointer: 48 bits) and its length
// (16 high bits), so a push and the owner's take-all are each one atomic operation and the
// owner learns exactly how many bios it took.
inline constexpr unsigned REMOTE_COUNT_SHIFT = 48;
inline constexpr uintptr_t REMOTE_PTR_MASK = (uintptr_t(1) << REMOTE_COUNT_SHIFT) - 1;
inline constexpr uintptr_t REMOTE_CLOSED = 1;  // the owner is gone: push to the mempool instead

struct alignas(64) BioAllocCache {
  // ---- owner's line ----
  Bio* free_list = nullptr;
  std::atomic<unsigned> nr{0};                // bios on free_list (read by remote putters)
  std::atomic<const void*> owner{nullptr};    // the owning thread's token; null once it exited
  // No counter for local puts: the hot path stays one counter lighter, and the count follows
  // from the others (see counters()).
  OwnerCounter alloc_hits, alloc_misses, put_full, splices, pruned;
  OwnerCounter remote_received;                // bios taken off the remote list, spliced or pruned
  // The trim handshake (BioSet::trim_idle_caches): the owner sets `busy` around every use of
  // its lists and backs off while `claimed`; a trimmer claims, runs membarrier(), and takes the
  // lists only if the owner is not busy. Plain stores and loads on the owner's side.
  std::atomic<uint8_t> busy{0};
  std::atomic<uint8_t> claimed{0};
  uint64_t trim_seen = 0;                      // the trimmer's last activity snapshot (global lock)
  // ---- remote putters' line ----
  alignas(64) std::atomic<uintptr_t> free_list_remote{0};

  static unsigned remote_count(uintptr_t head) { return unsigned(head >> REMOTE_COUNT_SHIFT); }
  static Bio* remote_top(uintptr_t head) {
    return head == REMOTE_CLOSED ? nullptr : reinterpret_cast<Bio*>(head & REMOTE_PTR_MASK);
  }
  BioCacheCounters counters() const;
};

// The calling thread's token: unique among live threads.
const void* current_thread_token();

}  // namespace biofs
