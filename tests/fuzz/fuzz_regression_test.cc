// The fuzz harnesses in the ordinary build: the images are reproducible and sound, every harness
// accepts its seeds, and every committed regression input (tests/fuzz/regressions/NAME/*, one
// per finding) runs through its harness without a crash or a broken property.
#include <doctest/doctest.h>
#include <dirent.h>

#include <cstdio>
#include <string>
#include <vector>

#include "fs/fsck/fsck.h"
#include "fuzz_image.h"
#include "fuzz_targets.h"

using namespace biofs;
using namespace biofs::fuzz;

namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> v;
  FILE* f = fopen(path.c_str(), "rb");
  REQUIRE_MESSAGE(f, "cannot open " << path);
  uint8_t buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) v.insert(v.end(), buf, buf + n);
  fclose(f);
  return v;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  return out;
}

}  // namespace

TEST_CASE("fuzz images: the same bytes on every build, and each one sound") {
  const Image a = make_image(false), b = make_image(false);
  CHECK(a.bytes == b.bytes);
  const Image c = make_image(true), d = make_image(true);
  CHECK(c.bytes == d.bytes);
  CHECK(a.bytes != c.bytes);
  CHECK(a.tree_blocks.size() == 3);
  CHECK(a.xattr_blocks.size() == 1);
  CHECK(a.used_inodes.size() == 51);  // root, 2 dirs, 48 files, symlinks, a fifo
  // The clean image checks clean and mounts; the crashed one has a transaction to replay.
  Outcome o = exercise_image(a.bytes, false);
  CHECK(o.fsck_status == 0);
  CHECK(o.mount_error == "");
  CHECK(o.walked >= 45);
  o = exercise_image(c.bytes, true);
  CHECK(o.fsck_status == 0);
  CHECK(o.mount_error == "");
  CHECK(o.unmount_status == 0);
  CHECK(o.fsck_after == 0);  // replayed, changed and unmounted: still clean
}

TEST_CASE("fuzz images: fix_checksums leaves a sound image as it is") {
  std::vector<uint8_t> img = crash_image().bytes;
  fix_checksums(img, false);
  CHECK(img == crash_image().bytes);
  img = clean_image().bytes;
  fix_checksums(img, true);
  CHECK(img == clean_image().bytes);
}

TEST_CASE("fuzz harnesses: every seed runs") {
  for (const Target& t : targets()) {
    const auto s = seeds(t.name);
    CHECK_MESSAGE(!s.empty(), t.name);
    for (const auto& in : s) CHECK(t.run(in.data(), in.size()) == 0);
  }
}

TEST_CASE("fuzz regressions: every committed input runs clean through its harness") {
  size_t n = 0;
  for (const Target& t : targets()) {
    for (const std::string& path : files_in(std::string(BIOFS_FUZZ_REGRESSIONS) + "/" + t.name)) {
      INFO(path);
      const std::vector<uint8_t> in = read_file(path);
      CHECK(t.run(in.data(), in.size()) == 0);
      n++;
    }
  }
  MESSAGE(n << " regression inputs");
}
