// Live toggles through a real mount (daemon/live_toggles.h, tools/biofs-ctl): a flip takes the
// next I/O down the other path (the counter of that path stops or starts moving), a flip under
// fio loses and doubles no I/O (fio verifies its data, and the device saw exactly fio's I/Os),
// and what cannot change live is refused in one line naming it.
#include <doctest/doctest.h>
#include <sys/xattr.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fuse_util.h"

using namespace biofs::test;

namespace {

const std::string kCtl = std::string(BIOFS_SOURCE_DIR) + "/tools/biofs-ctl";

void set_live(const std::string& mnt, const std::string& assignment) {
  std::string out;
  REQUIRE_MESSAGE(run(kCtl + " " + mnt + " set " + assignment, &out) == 0, out);
}

// Device I/O counts (reads + writes) and one stats counter around `cmd`.
struct Moved {
  long long ios, counter;
};
Moved around(const std::string& mnt, const std::string& object, const std::string& key, const std::string& cmd) {
  const std::string before = stats_of(mnt);
  std::string out;
  REQUIRE_MESSAGE(run(cmd, &out) == 0, out);
  const std::string after = stats_of(mnt);
  auto ios = [](const std::string& s) { return stat_in(s, "io", "reads") + stat_in(s, "io", "writes"); };
  return Moved{ios(after) - ios(before), stat_in(after, object, key) - stat_in(before, object, key)};
}

// fio's total I/Os (reads, writes, trims) from its JSON report: the sum of every "total_ios".
long long fio_total_ios(const std::string& json) {
  long long total = 0;
  for (size_t at = json.find("\"total_ios\""); at != std::string::npos; at = json.find("\"total_ios\"", at + 1))
    total += std::atoll(json.c_str() + json.find(':', at) + 1);
  return total;
}

// The live object's entry for one toggle in the stats: {"value":"on","changes":2}.
long long live_changes(const std::string& stats, const std::string& name) {
  const size_t at = stats.find("\"live\":{");
  REQUIRE(at != std::string::npos);
  return stat_in(stats.substr(at), name, "changes");
}

}  // namespace

TEST_CASE("live toggles: each flip takes the next I/O down the other path, counted") {
  if (!have_fuse() || geteuid() != 0) {
    MESSAGE("skipped: needs /dev/fuse and root (a live toggle is root's)");
    return;
  }
  FuseScratch s(256 << 20);
  const bool reactor = kernel_uring_possible();
  if (!reactor) MESSAGE("no FUSE-over-io_uring here: the reactor's toggles (hot, plug, tag batches) are not checked");
  const pid_t pid = mount_fg(s.img, s.mnt, reactor ? "fuse_uring=on" : "");
  const std::string file = s.mnt + "/f";
  std::string out;
  REQUIRE_MESSAGE(run("dd if=/dev/urandom of=" + file + " bs=1M count=16 oflag=direct status=none", &out) == 0, out);
  const std::string reads = "dd if=" + file + " of=/dev/null bs=4k count=1024 iflag=direct status=none";

  // bio_cache: off, no allocation hits the cache; on again, they do.
  set_live(s.mnt, "bio_cache=off");
  Moved m = around(s.mnt, "bio_cache", "alloc_hits", reads);
  CHECK(m.ios == 1024);
  CHECK(m.counter == 0);
  set_live(s.mnt, "bio_cache=on");
  m = around(s.mnt, "bio_cache", "alloc_hits", reads);
  CHECK(m.ios == 1024);
  CHECK(m.counter > 0);  // how many depends on where the completions' puts ran (bio_set.h rule 4)

  // split_check: the queue reports the form it now uses.
  set_live(s.mnt, "split_check=fast");
  CHECK(stats_of(s.mnt).find("\"split_check\":\"fast\"") != std::string::npos);
  set_live(s.mnt, "split_check=iter");
  CHECK(stats_of(s.mnt).find("\"split_check\":\"iter\"") != std::string::npos);

  if (reactor) {
    // fuse_uring_hot: off, libfuse decodes every READ; on, the reactor does.
    set_live(s.mnt, "fuse_uring_hot=off");
    m = around(s.mnt, "reactor", "hot_requests", reads);
    CHECK(m.counter == 0);
    set_live(s.mnt, "fuse_uring_hot=on");
    m = around(s.mnt, "reactor", "hot_requests", reads);
    CHECK(m.counter >= 1024);
    // tag_batch and fuse_uring_plug: a batch of tags needs a plug across a ring batch.
    const std::string deep = "fio --name=q --filename=" + file +
                             " --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --iodepth_batch_submit=16"
                             " --size=16M --io_size=32M --minimal";
    set_live(s.mnt, "tag_batch=off");
    CHECK(around(s.mnt, "queue", "tag_batch_calls", deep).counter == 0);
    set_live(s.mnt, "tag_batch=loop");
    CHECK(around(s.mnt, "queue", "tag_batch_calls", deep).counter > 0);
    set_live(s.mnt, "fuse_uring_plug=off");
    CHECK(around(s.mnt, "queue", "tag_batch_calls", deep).counter == 0);
    set_live(s.mnt, "fuse_uring_plug=on");
    // nomerges: sequential 4 KiB writes of one ring batch share a plug, where each continues
    // the last request (a back merge) unless nomerges=2 stops every merge. Every write reaches
    // the device, as a command of its own or merged into one.
    const std::string seq = "fio --name=s --filename=" + file +
                            " --rw=write --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --iodepth_batch_submit=16"
                            " --size=16M --minimal";
    set_live(s.mnt, "nomerges=2");
    m = around(s.mnt, "queue", "write_merges", seq);
    CHECK(m.counter == 0);
    CHECK(m.ios >= 4096);
    set_live(s.mnt, "nomerges=0");
    m = around(s.mnt, "queue", "write_merges", seq);
    CHECK(m.counter > 0);
    CHECK(m.ios + m.counter >= 4096);
    CHECK(m.ios < 4096 + 64);  // fewer commands than writes, give or take the metadata's
    CHECK(stats_of(s.mnt).find("\"nomerges\":\"0\"") != std::string::npos);
  }
  const std::string st = stats_of(s.mnt);
  CHECK(live_changes(st, "bio_cache") == 2);
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("live toggles: flips every few milliseconds under fio lose and double no I/O") {
  if (!have_fuse() || geteuid() != 0) {
    MESSAGE("skipped: needs /dev/fuse and root (a live toggle is root's)");
    return;
  }
  FuseScratch s(256 << 20);
  const bool reactor = kernel_uring_possible();
  const pid_t pid = mount_fg(s.img, s.mnt, std::string(reactor ? "fuse_uring=on," : "") + "commit=0");
  const std::string file = s.mnt + "/v";
  std::string out;
  REQUIRE_MESSAGE(run("dd if=/dev/zero of=" + file + " bs=1M count=32 oflag=direct status=none", &out) == 0, out);
  std::atomic<bool> stop{false};
  std::atomic<int> flips{0};
  std::thread flipper([&] {
    const char* steps[] = {"bio_cache=off", "tag_batch=off", "split_check=fast", "fuse_uring_hot=off",
                           "fuse_uring_plug=off", "bio_cache=home", "tag_batch=retain", "bio_cache=on",
                           "tag_batch=loop", "split_check=iter", "fuse_uring_hot=on", "fuse_uring_plug=on",
                           "nomerges=2", "nomerges=0"};
    for (int i = 0; !stop.load(); i++) {
      const std::string a = steps[i % std::size(steps)];
      if (setxattr(s.mnt.c_str(), "user.biofs.set", a.data(), a.size(), 0) == 0) flips++;
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  const std::string before = stats_of(s.mnt);
  // Overwrites of allocated blocks, every block verified: no metadata I/O, so the device's
  // reads and writes are fio's.
  const int rc = run("fio --name=v --filename=" + file +
                         " --rw=randwrite --bs=4k --direct=1 --ioengine=io_uring --iodepth=16 --size=32M"
                         " --verify=crc32c --verify_fatal=1 --randseed=7 --verify_state_save=0 --output-format=json",
                     &out);
  const std::string after = stats_of(s.mnt);
  stop = true;
  flipper.join();
  REQUIRE_MESSAGE(rc == 0, out);
  // Each of fio's I/Os reaches the device as a command of its own or merged into a neighbour's
  // (nomerges=0 lets two random writes that happen to be adjacent in one plug merge).
  auto reached = [](const std::string& st) {
    return stat_in(st, "io", "reads") + stat_in(st, "io", "writes") + stat_in(st, "queue", "read_merges") +
           stat_in(st, "queue", "write_merges");
  };
  const long long device = reached(after) - reached(before);
  INFO(flips.load() << " flips; fio " << fio_total_ios(out) << " I/Os, the device " << device);
  CHECK(flips.load() > 20);
  CHECK(device == fio_total_ios(out));
  unmount(s.mnt, pid);
  CHECK_MESSAGE(run(kBin + "/fsck.biofs -n " + s.img, &out) == 0, out);
}

TEST_CASE("live toggles: what cannot change live, or is not a toggle, is refused in one line naming it") {
  if (!have_fuse() || geteuid() != 0) {
    MESSAGE("skipped: needs /dev/fuse and root (a live toggle is root's)");
    return;
  }
  FuseScratch s(64 << 20);
  const pid_t pid = mount_fg(s.img, s.mnt, "");
  std::string out;
  CHECK(run(kCtl + " " + s.mnt + " set queues=2", &out) == 1);
  CHECK(out.find("queues cannot change on a mounted filesystem") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK(run(kCtl + " " + s.mnt + " set tag_batch=sideways", &out) == 1);
  CHECK(out.find("tag_batch") != std::string::npos);
  CHECK(out.find("expected") != std::string::npos);
  CHECK(run(kCtl + " " + s.mnt + " set no_such_thing=1", &out) == 1);
  CHECK(out.find("no_such_thing") != std::string::npos);
  const std::string a = "fuse_uring=off";  // the transport is chosen once, at mount
  CHECK(setxattr(s.mnt.c_str(), "user.biofs.set", a.data(), a.size(), 0) == -1);
  CHECK(errno == EOPNOTSUPP);
  // Nothing changed: every live toggle still reads its mount-time value, with no change counted.
  CHECK(run(kCtl + " " + s.mnt + " get", &out) == 0);
  CHECK(out.find("bio_cache=on (changed 0 times)") != std::string::npos);
  CHECK(out.find("tag_batch=loop (changed 0 times)") != std::string::npos);
  // A user other than root may not flip anything (as a sysfs write needs root).
  CHECK(run("su nobody -s /bin/sh -c '" + kCtl + " " + s.mnt + " set bio_cache=off'", &out) != 0);
  CHECK(run(kCtl + " " + s.mnt + " get bio_cache", &out) == 0);
  CHECK(out == "bio_cache=on (changed 0 times)\n");
  unmount(s.mnt, pid);
}
