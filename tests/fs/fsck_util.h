// fsck in a test: run in process on a device, its result and every line it reported, for
// every test that checks or repairs (tests/fs, tests/reliability, tests/fuzz). No doctest here:
// the fuzz harnesses use it too.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "fs/fsck/fsck.h"

namespace biofs::test {

struct FsckRun {
  FsckResult r;
  std::vector<std::string> lines;

  // Some line holds `s`.
  bool has(const std::string& s) const {
    for (const auto& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
  // The lines, each followed by `sep`.
  std::string text(const std::string& sep = "\n") const {
    std::string s;
    for (const auto& l : lines) s += l + sep;
    return s;
  }
};

// fsck as `mode` (check: fsck_check; preen or yes: fsck_repair) on `io`.
inline FsckRun collect_fsck(BlockIo& io, FsckMode mode = FsckMode::check, const std::atomic<bool>* cancel = nullptr) {
  FsckRun f;
  f.r = fsck_repair(io, mode, [&](const std::string& l) { f.lines.push_back(l); }, cancel);
  return f;
}

}  // namespace biofs::test
