// Mounting a damaged image never crashes: images mutated at random (a fixed seed, so a failure
// reproduces), with checksums fixed or not, either refuse to mount with one line or mount, walk
// and change without harm; fsck classifies each (0/4/8), in-process and as fsck.biofs -n.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include "fuzz_image.h"

extern char** environ;

using namespace biofs;
using namespace biofs::fuzz;

namespace {

// `n` random byte runs written over the image (metadata blocks most of the time).
std::vector<uint8_t> mutate(const Image& base, std::mt19937_64& rng, int n, bool fix) {
  std::vector<uint8_t> img = base.bytes;
  const uint64_t bs = base.sb.block_size;
  for (int i = 0; i < n; i++) {
    const uint64_t hi = rng() % 4 ? base.sb.data_start * bs : img.size();
    const uint64_t off = rng() % hi;
    const uint64_t len = 1 + rng() % 8;
    for (uint64_t k = 0; k < len && off + k < img.size(); k++) {
      switch (rng() % 3) {
        case 0: img[off + k] = uint8_t(rng()); break;
        case 1: img[off + k] ^= uint8_t(1u << (rng() % 8)); break;
        default: img[off + k] = uint8_t(rng() % 2 ? 0xff : 0); break;
      }
    }
  }
  if (fix) fix_checksums(img, false);
  return img;
}

int run_fsck_binary(const std::string& image) {
  const std::string dev = "emu:" + image;
  const char* argv[] = {BIOFS_FSCK_BIN, "-n", dev.c_str(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE_MESSAGE(WIFEXITED(status), "fsck.biofs died with signal " << WTERMSIG(status) << " on " << image);
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("damaged images: mount refuses with one line or mounts and walks, never crashes") {
  std::mt19937_64 rng(7);
  int refused = 0, mounted = 0, fsck_errors = 0;
  for (int i = 0; i < 600; i++) {
    const Image& base = i % 2 ? crash_image() : clean_image();
    const std::vector<uint8_t> img = mutate(base, rng, 1 + int(rng() % 6), i % 4 != 3);
    const Outcome o = exercise_image(img, i % 3 != 0);  // aborts on a broken property
    CHECK((o.fsck_status == 0 || o.fsck_status == 4 || o.fsck_status == 8));
    if (o.mount_error.empty()) mounted++;
    else refused++;
    fsck_errors += o.fsck_status != 0;
  }
  MESSAGE(mounted << " mounted, " << refused << " refused, " << fsck_errors << " with fsck errors");
  // Both sides were exercised, and fsck saw damage.
  CHECK(mounted > 100);
  CHECK(refused > 5);
  CHECK(fsck_errors > 50);
}

TEST_CASE("damaged images: fsck.biofs -n exits 0, 4 or 8 and never crashes") {
  char dir[] = "/tmp/biofs-fuzz-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/img";
  std::mt19937_64 rng(11);
  int seen[9] = {};
  for (int i = 0; i < 16; i++) {
    const Image& base = i % 2 ? crash_image() : clean_image();
    const std::vector<uint8_t> img = i == 0 ? base.bytes : mutate(base, rng, 1 + int(rng() % 4), i % 3 != 0);
    FILE* f = fopen(path.c_str(), "wb");
    REQUIRE(f);
    REQUIRE(fwrite(img.data(), 1, img.size(), f) == img.size());
    REQUIRE(fclose(f) == 0);
    const int st = run_fsck_binary(path);
    CHECK_MESSAGE((st == 0 || st == 4 || st == 8), "fsck.biofs exited " << st);
    if (st == 0 || st == 4 || st == 8) seen[st]++;
    if (i == 0) CHECK(st == 0);
  }
  unlink(path.c_str());
  rmdir(dir);
  CHECK(seen[4] > 0);
}
