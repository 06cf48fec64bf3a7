// The --json lines of the benchmark modes: one nlohmann-json object a line, keys in the order
// written.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace biofs::bench {

using Json = nlohmann::ordered_json;

// `v` rounded as "%.Nf" rounds it: an integer for 0 decimals, a floating-point number otherwise,
// so the lines keep the numbers and JSON types they had when printf wrote them.
inline Json fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  if (decimals == 0) return Json(int64_t(std::strtoll(buf, nullptr, 10)));
  return Json(std::strtod(buf, nullptr));
}

inline void print_line(const Json& j) { std::puts(j.dump().c_str()); }

}  // namespace biofs::bench
