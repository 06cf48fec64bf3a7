// Test data: n bytes that differ with `seed` and along the buffer (no two pages alike, never a
// page of zeros), so that a block read back from the wrong place or not at all is seen.
#pragma once

#include <cstddef>
#include <string>

namespace biofs::test {

inline std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = char((i * 2654435761u + seed * 40503u + (i >> 12)) >> 11);
  return s;
}

}  // namespace biofs::test
