#include "mountinfo.h"

#include <fstream>
#include <sstream>

namespace biofs {

namespace {

// The kernel's mangle(): space, tab, newline and backslash as \OOO octal.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

bool parse_mountinfo_line(const std::string& line, MountEntry* out) {
  // ID PARENT MAJ:MIN ROOT MOUNTPOINT MOUNT_OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTS
  std::istringstream in(line);
  std::string id, parent, root, field;
  MountEntry e;
  if (!(in >> id >> parent >> e.dev >> root >> e.mountpoint >> e.mount_opts)) return false;
  while (in >> field && field != "-") {}
  if (field != "-" || !(in >> e.fstype >> e.source >> e.super_opts)) return false;
  e.mountpoint = unescape(e.mountpoint);
  e.source = unescape(e.source);
  *out = std::move(e);
  return true;
}

std::vector<MountEntry> read_mountinfo(const char* path) {
  std::vector<MountEntry> all;
  std::ifstream f(path);
  std::string line;
  MountEntry e;
  while (std::getline(f, line))
    if (parse_mountinfo_line(line, &e)) all.push_back(e);
  return all;
}

bool has_option(const std::string& list, const std::string& opt) {
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    if (list.compare(start, comma == std::string::npos ? std::string::npos : comma - start, opt) == 0) return true;
    if (comma == std::string::npos) return false;
    start = comma + 1;
  }
}

}  // namespace biofs
