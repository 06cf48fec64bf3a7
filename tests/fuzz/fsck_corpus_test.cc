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

#include "fs/fsck/fsck.h"
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

struct Run {
  FsckResult r;
  int status = 0;
  std::vector<std::string> lines;
};

// One fsck run on the device.
Run run(BrdDevice& dev, FsckMode mode) {
  BlockIo io(dev.bdev(), 4096);
  REQUIRE(io.init() == 0);
  Run out;
  out.r = fsck_repair(io, mode, [&](const std::string& l) { out.lines.push_back(l); });
  out.status = fsck_exit_code(out.r, mode);
  return out;
}

void print(const Run& x, const char* label, std::ostream& out) {
  out << "  " << label << " exit " << x.status << ": " << x.r.errors << " errors, " << x.r.warnings << " warnings, "
      << x.r.inodes << " inodes, " << x.r.dirs << " dirs, " << x.r.blocks_used << " blocks\n";
  for (const std::string& l : x.lines) out << "    " << l << "\n";
}

struct Damaged {
  std::string name;
  std::vector<uint8_t> bytes;
};

// Every image the image harnesses give exercise_image(), named by the input that made it.
const std::vector<Damaged>& corpus() {
  static const std::vector<Damaged> images = [] {
    std::vector<Damaged> out;
    std::string input;
    int image = 0;
    set_image_observer([&](const std::vector<uint8_t>& img) {
      out.push_back({input + " image " + std::to_string(image++), img});
    });
    auto feed = [&](const Target& t, const std::string& name, const std::vector<uint8_t>& in) {
      input = std::string(t.name) + " " + name;
      image = 0;
      t.run(in.data(), in.size());
    };
    for (const Target& t : targets()) {
      if (std::string(t.name) == "mount_options" || std::string(t.name) == "device_spec") continue;
      const auto seeds = biofs::fuzz::seeds(t.name);
      for (size_t i = 0; i < seeds.size(); i++) feed(t, "seed " + std::to_string(i), seeds[i]);
      const auto damaged = mutants(t.name, seeds, 40);
      for (size_t i = 0; i < damaged.size(); i++) feed(t, "mutant " + std::to_string(i), damaged[i]);
      const std::string dir = std::string(BIOFS_FUZZ_REGRESSIONS) + "/" + t.name;
      for (const std::string& name : sorted_files(dir)) feed(t, "regression " + name, read_bytes(dir + "/" + name));
    }
    set_image_observer(nullptr);
    return out;
  }();
  return images;
}

std::string corpus_transcript() {
  std::ostringstream out;
  for (const Damaged& d : corpus()) {
    out << "== " << d.name << "\n";
    auto dev = load_device(d.bytes);
    print(run(*dev, FsckMode::check), "-n", out);
    print(run(*dev, FsckMode::yes), "-y", out);
    print(run(*dev, FsckMode::check), "-n after -y", out);
  }
  return out.str();
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

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

TEST_CASE("fsck corpus: -n names exactly the problems -y mends, one line each, in the same order") {
  size_t compared = 0;
  for (const Damaged& d : corpus()) {
    INFO(d.name);
    auto dev = load_device(d.bytes);
    const Run check = run(*dev, FsckMode::check);
    const Run yes = run(*dev, FsckMode::yes);
    // A check reads the disk as it is, a repair after replaying the journal and freeing the
    // orphans: their passes see different filesystems there, and a fatal run stops early.
    const bool differs = check.r.fatal || yes.r.fatal ||
                         std::any_of(yes.lines.begin(), yes.lines.end(), [](const std::string& l) {
                           return starts_with(l, "journal: replayed") || l.find("orphan") != std::string::npos;
                         });
    if (differs) continue;
    std::vector<std::string> mended, named;
    for (const std::string& l : yes.lines)
      if (l != "filesystem was not cleanly unmounted: marked clean") mended.push_back(l);
    for (const std::string& l : check.lines)
      if (l != "filesystem was not cleanly unmounted" && l != "using the backup superblock") named.push_back(l);
    REQUIRE(mended.size() == named.size());
    for (size_t i = 0; i < named.size(); i++) {
      std::string m = mended[i];
      if (const size_t at = m.find(" more bits corrected"); at != std::string::npos) m.replace(at, 20, " more bits wrong");
      CHECK_MESSAGE((m == named[i] || starts_with(m, named[i] + ": ")), "-y: " << mended[i] << "\n-n: " << named[i]);
    }
    CHECK(check.r.errors == yes.r.repaired);
    CHECK(fsck_exit_code(check.r, FsckMode::check) == (yes.r.repaired ? 4 : 0));
    compared++;
  }
  MESSAGE(compared << " of " << corpus().size() << " images compared");
  CHECK(compared > corpus().size() / 2);
}
