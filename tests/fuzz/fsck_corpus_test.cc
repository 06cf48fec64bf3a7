// fsck.biofs over the damaged-image corpus: every image the image harnesses make from their
// seeds and from the committed regression inputs, checked (-n), repaired (-y) and checked again.
// What each printed and its exit status must equal the transcript committed beside this file
// (fsck_corpus.txt): a change to what fsck says about a damaged disk is a change a review sees.
// BIOFS_FSCK_CORPUS_UPDATE=1 rewrites the transcript instead (then read its diff).
#include <doctest/doctest.h>
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fs/fsck.h"
#include "fuzz_image.h"
#include "fuzz_targets.h"

using namespace biofs;
using namespace biofs::fuzz;

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<std::string> sorted_files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One fsck run on the device: its lines, then its exit status.
void run(BrdDevice& dev, FsckMode mode, const char* label, std::ostream& out) {
  BlockIo io(dev.bdev(), 4096);
  std::vector<std::string> lines;
  const FsckResult r = fsck_repair(io, mode, [&](const std::string& l) { lines.push_back(l); });
  out << "  " << label << " exit " << fsck_exit_code(r, mode) << ": " << r.errors << " errors, " << r.warnings
      << " warnings, " << r.inodes << " inodes, " << r.dirs << " dirs, " << r.blocks_used << " blocks\n";
  for (const std::string& l : lines) out << "    " << l << "\n";
}

void transcribe(const std::vector<uint8_t>& img, std::ostream& out) {
  auto dev = load_device(img);
  run(*dev, FsckMode::check, "-n", out);
  run(*dev, FsckMode::yes, "-y", out);
  run(*dev, FsckMode::check, "-n after -y", out);
}

// Where a harness's flags byte is (fuzz_targets.h) and the first byte it lays over the image.
struct Layout {
  size_t flags, body;
};
Layout layout_of(const std::string& target) {
  if (target == "superblock" || target == "journal" || target == "image") return {0, 1};
  return {1, 2};  // inode, extent, dir, xattr: [which][flags][bytes]
}

// Damage the seeds alone do not make: each seed in turn with one to four bytes of its body
// changed (a fixed xorshift, so the same images every run), checksums fixed so the damage
// reaches the parsers behind them.
std::vector<std::vector<uint8_t>> mutants(const std::string& target, const std::vector<std::vector<uint8_t>>& seeds,
                                          int count) {
  std::vector<std::vector<uint8_t>> out;
  const Layout at = layout_of(target);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (char c : target) x = (x ^ uint8_t(c)) * 0x100000001b3ull;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (int k = 0; k < count && !seeds.empty(); k++) {
    std::vector<uint8_t> in = seeds[size_t(k) % seeds.size()];
    if (in.size() <= at.body) continue;
    in[at.flags] |= 1;  // FIX
    for (uint64_t n = 1 + next() % 4; n > 0; n--) in[at.body + next() % (in.size() - at.body)] = uint8_t(next());
    out.push_back(std::move(in));
  }
  return out;
}

std::string corpus_transcript() {
  std::ostringstream out;
  std::string input;
  int image = 0;
  set_image_observer([&](const std::vector<uint8_t>& img) {
    out << "== " << input << " image " << image++ << "\n";
    transcribe(img, out);
  });
  for (const Target& t : targets()) {
    if (std::string(t.name) == "mount_options" || std::string(t.name) == "device_spec") continue;
    const auto seeds = biofs::fuzz::seeds(t.name);
    for (size_t i = 0; i < seeds.size(); i++) {
      input = std::string(t.name) + " seed " + std::to_string(i);
      image = 0;
      t.run(seeds[i].data(), seeds[i].size());
    }
    const auto damaged = mutants(t.name, seeds, 40);
    for (size_t i = 0; i < damaged.size(); i++) {
      input = std::string(t.name) + " mutant " + std::to_string(i);
      image = 0;
      t.run(damaged[i].data(), damaged[i].size());
    }
    const std::string dir = std::string(BIOFS_FUZZ_REGRESSIONS) + "/" + t.name;
    for (const std::string& name : sorted_files(dir)) {
      const std::vector<uint8_t> in = read_bytes(dir + "/" + name);
      input = std::string(t.name) + " regression " + name;
      image = 0;
      t.run(in.data(), in.size());
    }
  }
  set_image_observer(nullptr);
  return out.str();
}

}  // namespace

TEST_CASE("fsck corpus: every damaged image gets the committed lines and exit codes from -n and -y") {
  const std::string now = corpus_transcript();
  const char* update = getenv("BIOFS_FSCK_CORPUS_UPDATE");
  if (update && std::string(update) == "1") {
    std::ofstream(BIOFS_FSCK_CORPUS) << now;
    MESSAGE("rewrote " << BIOFS_FSCK_CORPUS);
    return;
  }
  std::ifstream f(BIOFS_FSCK_CORPUS);
  REQUIRE_MESSAGE(f, "no transcript at " BIOFS_FSCK_CORPUS);
  const std::string committed{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  if (now == committed) return;
  // The first image that differs, whole, both ways.
  std::istringstream a(committed), b(now);
  std::string la, lb, head_a, head_b;
  int line = 0;
  while (true) {
    const bool ga = bool(std::getline(a, la)), gb = bool(std::getline(b, lb));
    line++;
    if (ga && la.rfind("== ", 0) == 0) head_a = la;
    if (gb && lb.rfind("== ", 0) == 0) head_b = lb;
    if (!ga || !gb || la != lb) {
      FAIL_CHECK("the transcript differs at line " << line << " (in '" << head_b << "'):\n  committed: " << (ga ? la : "<end>")
                                                   << "\n  now:       " << (gb ? lb : "<end>"));
      break;
    }
  }
}
