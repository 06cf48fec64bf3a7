#include "suboptions.h"

#include <cstdlib>

namespace biofs {

Status parse_suboptions(const std::string& list, const std::vector<SubOption>& table, const char* kind) {
  std::vector<char*> tokens;
  for (const SubOption& o : table) tokens.push_back(const_cast<char*>(o.name));
  tokens.push_back(nullptr);
  auto unknown = [&](const std::string& text) {
    std::string known;
    for (const SubOption& o : table)
      known += std::string(known.empty() ? "" : ", ") + o.name +
               (o.takes == SubOption::Takes::value ? "=" : o.takes == SubOption::Takes::optional ? "[=]" : "");
    return Status::invalid_argument(text + ": unknown option (" + kind + " takes " + known + ")");
  };
  std::string buf = list;  // getsubopt writes NULs into the list it walks
  char* p = buf.data();
  while (*p) {
    const char* start = p;
    char* value = nullptr;
    const int i = getsubopt(&p, tokens.data(), &value);
    const std::string text = start;  // this option alone: getsubopt ended it with a NUL
    if (i < 0) return unknown(text);  // "a,,b" too: an empty option is a typo
    const SubOption& o = table[size_t(i)];
    if (o.takes == SubOption::Takes::nothing && value) return Status::invalid_argument(text + ": takes no value");
    if (o.takes == SubOption::Takes::value && !value) return Status::invalid_argument(text + ": needs a value");
    if (Status s = o.apply(value ? value : ""); !s.ok()) return Status::invalid_argument(text + ": " + s.message());
  }
  if (!list.empty() && list.back() == ',') return unknown("");
  return Status();
}

}  // namespace biofs
