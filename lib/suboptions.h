// A comma-separated "key[=value]" list checked against a table of known keys, split by glibc's
// getsubopt(3): every device string's options (devices/device_string.cc) go through here, so
// each kind of device is one table and every error reads the same.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/status.h"

namespace biofs {

struct SubOption {
  const char* name;
  enum class Takes { nothing, value, optional } takes;  // optional: `key` or `key=value`
  // Applies the value (empty for a flag); ok, or why it is wrong, e.g. "expected lba=512 or
  // lba=4096".
  std::function<Status(std::string_view value)> apply;
};

// Applies every option of `list` (without the leading kind:path part). Ok, or one line
// "OPTION: why"; an unknown or empty option's line says what `kind` takes.
Status parse_suboptions(const std::string& list, const std::vector<SubOption>& table, const char* kind);

}  // namespace biofs
