// The allocator under every mempool: the userspace stand-in for the kernel's slab caches.
//
// Default: TBB's scalable allocator. Like slab it keeps per-thread heaps, and it frees memory
// that another thread allocated without a lock (it pushes onto the owning heap's public list),
// which is exactly the pattern bios follow: allocated by a submitter, freed by a completion.
// glibc malloc is the alternative ("system"), and what sanitizer builds always use, because the
// sanitizers see only malloc. Either can be made to fail through a hook, for forward-progress
// tests: the hook is one predictable branch when unset.
#pragma once

#include <atomic>
#include <cstddef>

namespace biofs {

enum class AllocatorKind { tbb, system };
const char* allocator_kind_name(AllocatorKind kind);

// Returns true to make the allocation fail.
using AllocFailHook = bool (*)(void* ctx);

class Allocator {
 public:
  explicit Allocator(AllocatorKind kind = default_kind());
  static AllocatorKind default_kind();

  // Memory aligned to 64 bytes, or nullptr when the hook (or the system) says no.
  void* alloc(size_t size) {
    if (AllocFailHook hook = fail_hook_.load(std::memory_order_relaxed); hook) [[unlikely]] {
      if (hook(fail_ctx_.load(std::memory_order_relaxed))) return nullptr;
    }
    return raw_alloc(size);
  }
  void free(void* p);

  void set_fail_hook(AllocFailHook hook, void* ctx) {
    fail_ctx_.store(ctx, std::memory_order_relaxed);
    fail_hook_.store(hook, std::memory_order_release);
  }
  AllocatorKind kind() const { return kind_; }

 private:
  void* raw_alloc(size_t size);

  AllocatorKind kind_;
  std::atomic<AllocFailHook> fail_hook_{nullptr};
  std::atomic<void*> fail_ctx_{nullptr};
};

}  // namespace biofs
