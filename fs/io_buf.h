// IoBuf: page-aligned memory for the filesystem's I/O.
#pragma once

#include <cstddef>
#include <cstdint>

namespace biofs {

// Page-aligned memory for I/O: the device may need its dma_alignment (and O_DIRECT-backed
// namespaces need a 4 KiB one), which plain new[] does not give.
class IoBuf {
 public:
  IoBuf() = default;
  explicit IoBuf(size_t bytes, bool zero = true);  // zero-filled unless told otherwise
  IoBuf(IoBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  IoBuf& operator=(IoBuf&& o) noexcept;
  ~IoBuf();
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace biofs
