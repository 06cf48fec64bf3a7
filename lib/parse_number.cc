#include "parse_number.h"

#include <charconv>
#include <cmath>

namespace biofs {

bool parse_uint(std::string_view text, uint64_t* out, uint64_t lo, uint64_t hi) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;  // from_chars takes a '-'
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_size(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  unsigned shift = 0;
  switch (text.back()) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
  }
  if (shift) text.remove_suffix(1);
  uint64_t n;
  if (!parse_uint(text, &n, 1, UINT64_MAX >> (shift + 1))) return false;
  *out = n << shift;
  return true;
}

bool parse_fraction(std::string_view text, double* out) {
  if (text.empty() || !((text[0] >= '0' && text[0] <= '9') || text[0] == '.')) return false;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
  if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0 && v <= 1)) return false;
  *out = v;
  return true;
}

}  // namespace biofs
