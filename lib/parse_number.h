// Numbers in option text, as the kernel's kstrtoull() (lib/kstrtox.c) and memparse()
// (lib/cmdline.c) read them, but strict: the whole text must be the number, and nothing
// overflows. Every parser of device strings, mount options and tool flags uses these.
#pragma once

#include <cstdint>
#include <string_view>

namespace biofs {

// Decimal digits only (no sign, no spaces), within [lo, hi].
bool parse_uint(std::string_view text, uint64_t* out, uint64_t lo = 0, uint64_t hi = UINT64_MAX);

// A byte count: decimal digits with an optional K, M, G or T suffix (binary multiples, either
// case), not zero.
bool parse_size(std::string_view text, uint64_t* out);

// A decimal fraction from 0 to 1 inclusive ("0.01", "1", "0").
bool parse_fraction(std::string_view text, double* out);

}  // namespace biofs
