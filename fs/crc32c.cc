// CRC-32C through ISA-L's crc32_iscsi (libisal-dev), which picks at run time the fastest code the
// CPU has: the SSE4.2 crc32 instruction over three interleaved streams joined with carry-less
// multiplies, AVX-512 folding where there is AVX-512, a table where there is no SSE4.2. It
// replaced a slicing-by-8 table because on the development machine it was 12x faster on a
// 4 KiB block and nearly 4x on 64 bytes, with the same values (docs/results.md, "CRC32C"; the
// vectors in tests/fs/block_io_test.cc).
#include "crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>

namespace biofs {

uint32_t crc32c(uint32_t seed, const void* data, size_t len) {
  // ISA-L takes and returns the CRC register as is, without the standard's inversions before
  // and after: invert here, so that 0 starts a checksum and a result continues one. It takes an
  // int length and a non-const pointer (it only reads through it).
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t c = ~seed;
  while (len > 0) {
    const size_t n = std::min<size_t>(len, size_t(1) << 30);
    c = crc32_iscsi(p, int(n), c);
    p += n;
    len -= n;
  }
  return ~c;
}

}  // namespace biofs
