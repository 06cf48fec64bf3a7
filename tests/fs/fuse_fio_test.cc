// fio through a real mount with verification: the sync, libaio and io_uring engines, direct and
// buffered, several jobs at once, each writing its own file with crc32c-tagged blocks and
// verifying them; then unmount, fsck must be clean, remount (with the toggles flipped) and
// fio verifies every file again from what is on the device.
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
