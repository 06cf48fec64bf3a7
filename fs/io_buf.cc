#include "io_buf.h"

#include <cstdlib>
#include <cstring>
#include <new>

#ifndef BIOFS_SANITIZER_BUILD
#include <tbb/scalable_allocator.h>
#endif

#include "blockcore/blk_types.h"

namespace biofs {

// I/O buffers come and go with every file I/O, up to 1 MiB each: TBB's scalable allocator
// keeps freed large blocks for reuse, where glibc would mmap and munmap them (a page fault and
// a zeroed page per 4 KiB, every time). Sanitizer builds use malloc, which they can see.
static void* io_buf_alloc(size_t bytes) {
#ifdef BIOFS_SANITIZER_BUILD
  void* p = nullptr;
  return posix_memalign(&p, PAGE_SIZE, bytes) ? nullptr : p;
#else
  return scalable_aligned_malloc(bytes, PAGE_SIZE);
#endif
}
static void io_buf_free(void* p) {
#ifdef BIOFS_SANITIZER_BUILD
  free(p);
#else
  scalable_aligned_free(p);
#endif
}

IoBuf::IoBuf(size_t bytes, bool zero) : n_(bytes) {
  p_ = static_cast<uint8_t*>(io_buf_alloc(bytes ? bytes : PAGE_SIZE));
  if (!p_) throw std::bad_alloc();
  if (zero) std::memset(p_, 0, bytes);
}
IoBuf& IoBuf::operator=(IoBuf&& o) noexcept {
  if (this != &o) {
    if (p_) io_buf_free(p_);
    p_ = o.p_, n_ = o.n_;
    o.p_ = nullptr, o.n_ = 0;
  }
  return *this;
}
IoBuf::~IoBuf() {
  if (p_) io_buf_free(p_);
}

}  // namespace biofs
