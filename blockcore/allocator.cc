#include "allocator.h"

#include <tbb/scalable_allocator.h>

#include <cstdlib>

namespace biofs {

const char* allocator_kind_name(AllocatorKind kind) {
  return kind == AllocatorKind::tbb ? "tbb" : "system";
}

AllocatorKind Allocator::default_kind() {
#ifdef BIOFS_SANITIZER_BUILD
  return AllocatorKind::system;
#else
  return AllocatorKind::tbb;
#endif
}

Allocator::Allocator(AllocatorKind kind) : kind_(kind) {
#ifdef BIOFS_SANITIZER_BUILD
  kind_ = AllocatorKind::system;  // see allocator.h: the sanitizers must see every allocation
#endif
}

void* Allocator::raw_alloc(size_t size) {
  if (kind_ == AllocatorKind::tbb) return scalable_aligned_malloc(size, 64);
  return std::aligned_alloc(64, (size + 63) & ~size_t(63));
}

void Allocator::free(void* p) {
  if (kind_ == AllocatorKind::tbb)
    scalable_aligned_free(p);
  else
    std::free(p);
}

}  // namespace biofs
