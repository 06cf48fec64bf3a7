#include "mempool.h"

#include <cerrno>
#include <chrono>

namespace biofs {

Mempool::Mempool(unsigned min_nr, size_t elem_size, Allocator& allocator)
    : allocator_(allocator), elem_size_(elem_size), min_nr_(min_nr) {}

int Mempool::init() {
  elements_.reserve(min_nr_);
  while (elements_.size() < min_nr_) {
    void* e = allocator_.alloc(elem_size_);
    if (!e) {
      for (void* p : elements_) allocator_.free(p);
      elements_.clear();
      return -ENOMEM;
    }
    elements_.push_back(e);
  }
  curr_nr_.store(min_nr_, std::memory_order_relaxed);
  return 0;
}

Mempool::~Mempool() {
  for (void* p : elements_) allocator_.free(p);
}

void* Mempool::alloc(gfp_t gfp) {
  for (;;) {
    if (void* e = allocator_.alloc(elem_size_)) [[likely]]
      return e;
    std::unique_lock guard(lock_);
    if (!elements_.empty()) {
      void* e = elements_.back();
      elements_.pop_back();
      curr_nr_.store(unsigned(elements_.size()), std::memory_order_relaxed);
      reserve_allocs_.fetch_add(1, std::memory_order_relaxed);
      return e;
    }
    if (gfp == GFP_NOWAIT) return nullptr;
    // Wait for someone to give an element back. Like the kernel (io_schedule_timeout(5*HZ))
    // retry the allocator now and then too: memory may have come back there instead.
    waits_.fetch_add(1, std::memory_order_relaxed);
    wait_.wait_for(guard, std::chrono::milliseconds(100));
  }
}

void Mempool::free(void* element) {
  if (!element) return;
  if (curr_nr_.load(std::memory_order_relaxed) < min_nr_) [[unlikely]] {
    std::unique_lock guard(lock_);
    if (elements_.size() < min_nr_) {
      elements_.push_back(element);
      curr_nr_.store(unsigned(elements_.size()), std::memory_order_relaxed);
      guard.unlock();
      wait_.notify_one();
      return;
    }
  }
  allocator_.free(element);
}

}  // namespace biofs
