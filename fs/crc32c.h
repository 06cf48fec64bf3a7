// CRC-32C (Castagnoli), the checksum of every biofs metadata structure (as ext4's and btrfs's
// metadata_csum), computed by ISA-L (crc32c.cc says why); the same value the SSE4.2 crc32
// instruction gives.
#pragma once

#include <cstddef>
#include <cstdint>

namespace biofs {

// crc32c(seed, data): seed 0 starts a fresh checksum; pass a previous result to continue one.
uint32_t crc32c(uint32_t seed, const void* data, size_t len);

}  // namespace biofs
