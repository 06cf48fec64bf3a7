// A vector of trivially copyable items whose first N live inside it: an I/O batch's queued bios
// (IoBatch), one for a 4 KiB read or write, which std::vector put on the heap every time.
// Past N the items move to a std::vector; clear() keeps its memory for the next batch.
#pragma once

#include <type_traits>
#include <vector>

namespace biofs {

template <typename T, unsigned N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  void push_back(const T& v) {
    if (!on_heap_ && n_ < N) {
      inline_[n_++] = v;
      return;
    }
    if (!on_heap_) {
      heap_.assign(inline_, inline_ + n_);
      on_heap_ = true;
    }
    heap_.push_back(v);
    n_++;
  }
  void clear() {
    n_ = 0;
    on_heap_ = false;
    heap_.clear();
  }
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  const T* begin() const { return on_heap_ ? heap_.data() : inline_; }
  const T* end() const { return begin() + n_; }

 private:
  T inline_[N];
  std::vector<T> heap_;
  unsigned n_ = 0;
  bool on_heap_ = false;
};

}  // namespace biofs
