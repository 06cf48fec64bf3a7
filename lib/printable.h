// Text from outside (a mount option, a device string, a name read off a damaged disk) as it may
// be printed in a one-line message: control characters and DEL as \xNN.
#pragma once

#include <string>
#include <string_view>

namespace biofs {

inline std::string printable(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) {
      out += char(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace biofs
