#include "bounce.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "blockcore/blk_types.h"

namespace biofs {

BounceArena::~BounceArena() {
  if (base_) munmap(base_, bytes_);
}

Status BounceArena::init(unsigned slots, size_t slot_size) {
  slot_size_ = (slot_size + PAGE_SIZE - 1) & ~size_t(PAGE_SIZE - 1);
  bytes_ = slot_size_ * slots;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Status::io_error("bounce buffers: cannot map " + std::to_string(bytes_ >> 20) + " MiB: " +
                            std::strerror(errno));
  base_ = static_cast<uint8_t*>(p);
  return Status();
}

void copy_from_iovecs(uint8_t* dst, const iovec* vecs, unsigned nr) {
  for (unsigned i = 0; i < nr; i++) {
    std::memcpy(dst, vecs[i].iov_base, vecs[i].iov_len);
    dst += vecs[i].iov_len;
  }
}

void copy_to_iovecs(const iovec* vecs, unsigned nr, const uint8_t* src) {
  for (unsigned i = 0; i < nr; i++) {
    std::memcpy(vecs[i].iov_base, src, vecs[i].iov_len);
    src += vecs[i].iov_len;
  }
}

}  // namespace biofs
