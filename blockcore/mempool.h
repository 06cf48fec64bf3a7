// Counterpart of mm/mempool.c: an allocator with a reserve of min_nr elements that guarantees
// forward progress. alloc() asks the allocator first and takes from the reserve only when that
// fails; with GFP_KERNEL it then waits for an element to come back rather than fail. free()
// refills the reserve before giving memory back to the allocator. The lock and condition
// variable are touched only when the reserve is in use: the common path is the allocator's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

#include "allocator.h"
#include "blk_types.h"

namespace biofs {

class Mempool {
 public:
  // An empty pool: init() fills the reserve.
  Mempool(unsigned min_nr, size_t elem_size, Allocator& allocator);
  // mempool_init(): fills the reserve with min_nr elements. 0, or -ENOMEM (the reserve left
  // empty) when the allocator cannot supply them, as the kernel's.
  int init();
  ~Mempool();
  Mempool(const Mempool&) = delete;
  Mempool& operator=(const Mempool&) = delete;

  void* alloc(gfp_t gfp);
  void free(void* element);

  // mempool_is_saturated(): the reserve is full, nobody is living off it.
  bool is_saturated() const { return curr_nr_.load(std::memory_order_relaxed) >= min_nr_; }
  unsigned curr_nr() const { return curr_nr_.load(std::memory_order_relaxed); }
  unsigned min_nr() const { return min_nr_; }
  size_t elem_size() const { return elem_size_; }
  Allocator& allocator() const { return allocator_; }
  // Allocations served from the reserve, and waits for an element to come back.
  uint64_t reserve_allocs() const { return reserve_allocs_.load(std::memory_order_relaxed); }
  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }

 private:
  Allocator& allocator_;
  const size_t elem_size_;
  const unsigned min_nr_;
  std::atomic<unsigned> curr_nr_{0};
  std::mutex lock_;
  std::condition_variable wait_;
  std::vector<void*> elements_;  // the reserve, guarded by lock_
  std::atomic<uint64_t> reserve_allocs_{0};
  std::atomic<uint64_t> waits_{0};
};

}  // namespace biofs
