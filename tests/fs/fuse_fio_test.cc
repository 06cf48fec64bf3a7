// fio through a real mount with verification: the sync, libaio and io_uring engines, direct and
// buffered, several jobs at once, each writing its own file with crc32c-tagged blocks and
// verifying them; then unmount, fsck must be clean, remount (with the toggles flipped) and
// fio verifies every file again from what is on the device. Random writes into fio's fallocated
// file, fragmented into a deep extent tree.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

struct Job {
  const char* engine;
  bool direct;
  const char* rw;
  const char* bs;
};

// One fio run of `j` in directory `dir`; `verify_only` re-reads and checks what an earlier run
// with the same parameters wrote.
std::string fio_cmd(const std::string& dir, const Job& j, bool verify_only) {
  const std::string name = std::string(j.engine) + (j.direct ? "-direct-" : "-buffered-") + j.rw;
  std::string c = "fio --name=" + name + " --directory=" + dir + " --ioengine=" + j.engine +
                  " --direct=" + (j.direct ? "1" : "0") + " --rw=" + j.rw + " --bs=" + j.bs +
                  " --size=8M --numjobs=3 --iodepth=16 --verify=crc32c --verify_fatal=1 --randseed=42 --verify_state_save=0"
                  " --group_reporting --minimal";
  if (verify_only) c += " --verify_only";
  return c;
}

}  // namespace

TEST_CASE("fuse fio: three engines, direct and buffered, three jobs each, verified, then verified again after fsck and a remount") {
  if (!have_fuse()) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible");
    return;
  }
  std::string out;
  REQUIRE_MESSAGE(run("fio --version", &out) == 0, "fio is missing (tools/install-deps.sh installs it): " << out);
  FuseScratch s(512 << 20);
  const std::vector<Job> jobs = {
      {"sync", true, "randwrite", "4k"},    {"sync", false, "write", "64k"},
      {"libaio", true, "randwrite", "4k"},  {"libaio", false, "randwrite", "16k"},
      {"io_uring", true, "randwrite", "4k"}, {"io_uring", true, "write", "1M"},
      {"io_uring", false, "randwrite", "8k"},
  };
  pid_t pid = mount_fg(s.img, s.mnt, "");
  for (const Job& j : jobs) {
    CAPTURE(j.engine);
    CAPTURE(j.direct);
    CAPTURE(j.rw);
    CHECK_MESSAGE(run(fio_cmd(s.mnt, j, false), &out) == 0, out);
  }
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  pid = mount_fg(s.img, s.mnt, "bio_cache=off,tag_batch=off,split_check=fast");
  for (const Job& j : jobs) {
    CAPTURE(j.engine);
    CAPTURE(j.direct);
    CAPTURE(j.rw);
    CHECK_MESSAGE(run(fio_cmd(s.mnt, j, true), &out) == 0, out);
  }
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("fuse fio: random writes into fio's fallocated file split it into thousands of extents (a deep tree), verified live, after fsck and a remount") {
  // fio lays its file out with fallocate (unwritten extents); each 4 KiB write converts its
  // piece and splits the extent around it. With 1 KiB blocks (41 extents to a tree block),
  // 4000 writes make ~8000 extents: a root over index nodes over leaves, past the two levels
  // (1681 extents here) biofs once had, grown one leaf at a time.
  if (!have_fuse()) {
    MESSAGE("skipped: /dev/fuse is absent or not accessible");
    return;
  }
  std::string out;
  REQUIRE_MESSAGE(run("fio --version", &out) == 0, "fio is missing (tools/install-deps.sh installs it): " << out);
  FuseScratch s(256 << 20, "-b 1024");
  const std::string fio = "fio --name=frag --filename=" + s.mnt + "/f --ioengine=psync --direct=1 --rw=randwrite" +
                          " --bs=4k --size=64M --number_ios=4000 --randseed=7 --verify=crc32c --verify_fatal=1" +
                          " --verify_state_save=0 --minimal";
  pid_t pid = mount_fg(s.img, s.mnt, "");
  CHECK_MESSAGE(run(fio, &out) == 0, out);
  struct stat st;
  REQUIRE(stat((s.mnt + "/f").c_str(), &st) == 0);
  CHECK(st.st_blocks > (64 << 20) / 512 + 2 * 100);  // the data and at least 100 tree blocks
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
  pid = mount_fg(s.img, s.mnt, "");
  CHECK_MESSAGE(run(fio + " --verify_only", &out) == 0, out);
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}
