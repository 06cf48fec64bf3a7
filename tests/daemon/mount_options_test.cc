// The daemon's -o parser: toggles parsed, FUSE options passed through, anything else refused
// with a line naming it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/daemon_switches.h"
#include "daemon/fuse_compat.h"
#include "daemon/mount_options.h"

using namespace biofs;

TEST_CASE("mount options: the block-core toggles and queue settings") {
  DaemonOptions o;
  CHECK(parse_mount_options("bio_cache=off,tag_batch=retain,split_check=fast,queues=2,qd=64,commit=0", &o).message() == "");
  CHECK(o.toggles.bio_cache == BioCache::off);
  CHECK(o.toggles.tag_batch == TagBatch::retain);
  CHECK(o.toggles.split_check == SplitCheck::fast);
  CHECK(parse_mount_options("bio_cache=home", &o).message() == "");
  CHECK(o.toggles.bio_cache == BioCache::home);
  CHECK(parse_mount_options("bio_cache=on", &o).message() == "");
  CHECK(o.toggles.bio_cache == BioCache::on);
  CHECK(o.queues == 2);
  CHECK(o.qd == 64);
  CHECK(o.fs.commit_interval_s == 0);
  CHECK(o.fuse_opts.empty());
  CHECK(o.keep_cache);
  CHECK(parse_mount_options("keep_cache=off", &o).message() == "");
  CHECK_FALSE(o.keep_cache);
  CHECK(parse_mount_options("keep_cache=1", &o).message() == "bad value for mount option keep_cache: '1' (expected on|off)");
  CHECK_FALSE(o.writeback_cache);  // off by default: fs/README.md, "Caching in the kernel"
  CHECK(parse_mount_options("writeback_cache", &o).message() == "");
  CHECK(o.writeback_cache);
  CHECK(parse_mount_options("writeback_cache=off", &o).message() == "");
  CHECK_FALSE(o.writeback_cache);
  CHECK(parse_mount_options("writeback_cache=on", &o).message() == "");
  CHECK(o.writeback_cache);
}

TEST_CASE("mount options: FUSE and mount(8) options pass through") {
  DaemonOptions o;
  CHECK(parse_mount_options("allow_other,default_permissions,ro,fsname=x,noatime,,", &o).message() == "");
  CHECK(o.fuse_opts == std::vector<std::string>{"allow_other", "default_permissions", "ro", "fsname=x", "noatime"});
  CHECK(o.fs.read_only);
  CHECK(parse_mount_options("rw", &o).message() == "");  // the last of ro and rw wins, as in mount(8)
  CHECK_FALSE(o.fs.read_only);
  CHECK(parse_mount_options("ro", &o).message() == "");
  CHECK(o.fs.read_only);
}

// What mount(8) hands a helper for `mount -o remount,ro MNT`: the options /proc/mounts shows,
// the kernel's own among them, with remount and ro.
TEST_CASE("mount options: a remount takes the kernel's options mount(8) repeats, a mount refuses them") {
  auto parse = [](std::vector<const char*> argv, CommandLine* cl) {
    return parse_command_line(int(argv.size()), const_cast<char**>(argv.data()), cl).message();
  };
  CommandLine remount, mount, plain;
  CHECK(parse({"biofs", "emu:img", "mnt", "-o", "ro,relatime,remount,user_id=0,group_id=0,default_permissions,allow_other"},
              &remount) == "");
  CHECK(remount.opts.remount);
  CHECK(remount.opts.fs.read_only);
  CHECK(remount.opts.kernel_opts == std::vector<std::string>{"user_id=0", "group_id=0"});
  CHECK(parse({"biofs", "emu:img", "mnt", "-o", "user_id=0"}, &mount) ==
        "mount option 'user_id=0' is the kernel's own (/proc/mounts shows it); only -o remount takes it");
  CHECK(parse({"biofs", "emu:img", "mnt", "-o", "allow_other"}, &plain) == "");
  CHECK_FALSE(plain.opts.remount);
}

TEST_CASE("mount options: norecovery and noload need ro") {
  auto parse = [](std::vector<const char*> argv, CommandLine* cl) {
    return parse_command_line(int(argv.size()), const_cast<char**>(argv.data()), cl).message();
  };
  CommandLine ro, noload, rw;
  CHECK(parse({"biofs", "img", "mnt", "-o", "ro,norecovery"}, &ro) == "");
  CHECK(ro.opts.fs.norecovery);
  CHECK(parse({"biofs", "img", "mnt", "-o", "noload,ro"}, &noload) == "");
  CHECK(noload.opts.fs.norecovery);
  CHECK(parse({"biofs", "img", "mnt", "-o", "norecovery"}, &rw) ==
        "norecovery needs ro: a journal left unreplayed must not be written over");
}

TEST_CASE("mount options: unknown or malformed options are refused by name") {
  DaemonOptions o;
  CHECK(parse_mount_options("frobnicate", &o).message() == "unknown mount option 'frobnicate'");
  CHECK(parse_mount_options("frobnicate", &o).code() == Status::Code::invalid_argument);
  CHECK(parse_mount_options("bio_cache=maybe", &o).message() == "bad value for mount option bio_cache: 'maybe' (expected on|off|home)");
  CHECK(parse_mount_options("tag_batch=", &o).message().find("tag_batch") != std::string::npos);
  CHECK(parse_mount_options("split_check=slow", &o).message().find("split_check") != std::string::npos);
  CHECK(parse_mount_options("qd=0", &o).message().find("qd") != std::string::npos);
  CHECK(parse_mount_options("queues=1x", &o).message().find("queues") != std::string::npos);
  CHECK(parse_mount_options("allow_other=1", &o).message() == "unknown mount option 'allow_other=1'");
  CHECK(parse_mount_options("fsname=", &o).message().find("fsname") != std::string::npos);
  CHECK(parse_mount_options("trace=", &o).message() == "bad value for mount option trace: '' (expected a directory)");
  CHECK(o.trace_dir.empty());
}

TEST_CASE("mount options: trace=DIR is kept as given, for the daemon to resolve before it detaches") {
  DaemonOptions o;
  CHECK(o.trace_dir.empty());  // off by default
  REQUIRE(parse_mount_options("trace=out/trace,bio_cache=off", &o).ok());
  CHECK(o.trace_dir == "out/trace");
}

TEST_CASE("mount options: the FUSE transport") {
  DaemonOptions o;
  CHECK(o.fuse_uring == FuseUring::auto_);  // io_uring where the kernel has it (daemon/README.md)
  CHECK(parse_mount_options("fuse_uring=off", &o).message() == "");
  CHECK(o.fuse_uring == FuseUring::off);
  CHECK(parse_mount_options("fuse_uring=auto,fuse_uring_qd=32", &o).message() == "");
  CHECK(o.fuse_uring == FuseUring::auto_);
  CHECK(o.fuse_uring_qd == 32);
  CHECK(parse_mount_options("fuse_uring=on", &o).message() == "");
  CHECK(o.fuse_uring == FuseUring::on);
  CHECK(parse_mount_options("fuse_uring=off,fuse_uring=reactor", &o).message() == "");  // another name for on
  CHECK(o.fuse_uring == FuseUring::on);
  CHECK(parse_mount_options("fuse_uring=libfuse", &o).message() == "");
  CHECK(o.fuse_uring == FuseUring::libfuse);
  CHECK(parse_mount_options("fuse_uring=yes", &o).message() == "bad value for mount option fuse_uring: 'yes' (expected on|off|auto|reactor|libfuse)");
  CHECK(parse_mount_options("fuse_uring_qd=0", &o).message().find("fuse_uring_qd") != std::string::npos);
  using RS = DaemonOptions::RingSched;
  CHECK(o.fuse_uring_sched == RS::auto_);  // idle rings where the guard can move them back (ring_guard.h)
  CHECK(parse_mount_options("fuse_uring_sched=idle", &o).message() == "");
  CHECK(o.fuse_uring_sched == RS::idle);
  CHECK(parse_mount_options("fuse_uring_sched=normal", &o).message() == "");
  CHECK(o.fuse_uring_sched == RS::normal);
  CHECK(parse_mount_options("fuse_uring_sched=auto", &o).message() == "");
  CHECK(o.fuse_uring_sched == RS::auto_);
  CHECK(parse_mount_options("fuse_uring_sched=batch", &o).message() ==
        "bad value for mount option fuse_uring_sched: 'batch' (expected normal|idle|auto)");
  CHECK(o.fuse_uring_plug);  // a plug across each ring batch unless asked otherwise
  CHECK(parse_mount_options("fuse_uring_plug=off", &o).message() == "");
  CHECK_FALSE(o.fuse_uring_plug);
  CHECK(parse_mount_options("fuse_uring_plug=on", &o).message() == "");
  CHECK(o.fuse_uring_plug);
  CHECK(parse_mount_options("fuse_uring_plug=1", &o).message().find("fuse_uring_plug") != std::string::npos);
  CHECK(o.fuse_uring_cover);  // each reactor covers its CPU's hardware queue unless asked otherwise
  CHECK(parse_mount_options("fuse_uring_cover=off", &o).message() == "");
  CHECK_FALSE(o.fuse_uring_cover);
  CHECK(parse_mount_options("fuse_uring_cover=on", &o).message() == "");
  CHECK(o.fuse_uring_cover);
  CHECK(parse_mount_options("fuse_uring_cover=yes", &o).message().find("fuse_uring_cover") != std::string::npos);
  CHECK(o.fuse_uring_hot);  // the reactor decodes reads and writes itself unless asked otherwise
  CHECK(parse_mount_options("fuse_uring_hot=off", &o).message() == "");
  CHECK_FALSE(o.fuse_uring_hot);
  CHECK(parse_mount_options("fuse_uring_hot=maybe", &o).message().find("fuse_uring_hot") != std::string::npos);
  CHECK_FALSE(o.verbose);
  CHECK(parse_mount_options("verbose", &o).message() == "");
  CHECK(o.verbose);
  CHECK(parse_mount_options("verbose=1", &o).message() != "");  // a flag, no value
  CHECK(o.fuse_opts.empty());  // ours, never passed to libfuse as written
}

TEST_CASE("mount options: fuse_uring_sched=idle without the reactor is refused") {
  auto parse = [](std::vector<const char*> argv, CommandLine* cl) {
    return parse_command_line(int(argv.size()), const_cast<char**>(argv.data()), cl).message();
  };
  CommandLine off, on, by_default, auto_off, reactor, libfuse;
  const std::string refused = "fuse_uring_sched=idle needs fuse_uring=on or auto: it schedules the reactor's threads, not libfuse's";
  CHECK(parse({"biofs", "img", "mnt", "-o", "fuse_uring=off,fuse_uring_sched=idle"}, &off) == refused);
  CHECK(parse({"biofs", "img", "mnt", "-o", "fuse_uring=libfuse,fuse_uring_sched=idle"}, &libfuse) == refused);
  CHECK(parse({"biofs", "img", "mnt", "-o", "fuse_uring=reactor,fuse_uring_sched=idle"}, &reactor) == "");
  CHECK(parse({"biofs", "img", "mnt", "-o", "fuse_uring_sched=idle"}, &by_default) == "");  // auto by default
  CHECK(by_default.opts.fuse_uring_sched == DaemonOptions::RingSched::idle);
  CHECK(parse({"biofs", "img", "mnt", "-o", "fuse_uring_sched=idle", "-o", "fuse_uring=auto"}, &on) == "");
  CHECK(on.opts.fuse_uring_sched == DaemonOptions::RingSched::idle);
  CHECK(parse({"biofs", "img", "mnt", "-o", "fuse_uring=off"}, &auto_off) == "");  // auto: nothing to schedule
}

TEST_CASE("mount options: the FUSE worker count follows the CPUs") {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  DaemonOptions o;
  CHECK(o.threads == unsigned(std::max(4L, 2 * cpus)));
  CHECK(parse_mount_options("threads=3", &o).message() == "");
  CHECK(o.threads == 3);
}

// The daemon's switches (daemon/daemon_switches.h): each row's A/B pair parses as a mount option
// and reads back, a bad value names the switch and its values, and `biofs --list-toggles` and
// the usage text list every block toggle and every switch, the list with each one's pair.
TEST_CASE("mount options: every daemon switch and toggle is in the table, --list-toggles and the usage") {
  const std::string list = list_toggles_text();
  const std::string usage = usage_text();
  for (const DaemonSwitch& s : daemon_switches()) {
    CAPTURE(s.name);
    for (const char* v : {s.ab_a, s.ab_b}) {
      DaemonOptions o;
      CHECK(parse_mount_options(std::string(s.name) + "=" + v, &o).message() == "");
      CHECK(std::string(s.get(o)) == v);
      CHECK(o.fuse_opts.empty());
    }
    DaemonOptions o;
    CHECK(parse_mount_options(std::string(s.name) + "=bogus", &o).message() ==
          "bad value for mount option " + std::string(s.name) + ": 'bogus' (expected " + s.values + ")");
    CHECK(find_daemon_switch(s.name) == &s);
    CHECK(list.find(std::string(s.name) + " " + s.values + " " + s.ab_a + " " + s.ab_b + " daemon\n") !=
          std::string::npos);
    CHECK(usage.find(std::string(s.name) + "=" + s.values) != std::string::npos);
  }
  for (const ToggleInfo& t : toggle_table()) {
    CAPTURE(t.name);
    CHECK(list.find(std::string(t.name) + " " + t.values + " " + t.ab_a + " " + t.ab_b + " block\n") !=
          std::string::npos);
    CHECK(usage.find(std::string(t.name) + "=" + t.values) != std::string::npos);
  }
  size_t lines = 0;
  for (char c : list) lines += c == '\n';
  CHECK(lines == toggle_table().size() + daemon_switches().size());
  for (size_t start = 0, end; (end = usage.find('\n', start)) != std::string::npos; start = end + 1)
    CHECK(end - start <= 110);  // wrapped for a terminal
  CommandLine cl;
  std::vector<const char*> argv = {"biofs", "--list-toggles"};
  CHECK(parse_command_line(int(argv.size()), const_cast<char**>(argv.data()), &cl).ok());
  CHECK(cl.list_toggles);
}

// Each numeric option's range, checked once in the parser: both ends taken, one past either
// end refused with a line naming the option and the range, the value stored where it belongs.
TEST_CASE("mount options: every number is range-checked at both ends and stored") {
  struct Range {
    const char* name;
    uint64_t lo, hi;
    uint64_t (*stored)(const DaemonOptions& o);
  };
  const Range ranges[] = {
      {"queues", 1, 256, [](const DaemonOptions& o) { return uint64_t(o.queues); }},
      {"qd", 1, 4096, [](const DaemonOptions& o) { return uint64_t(o.qd); }},
      {"threads", 1, 1024, [](const DaemonOptions& o) { return uint64_t(o.threads); }},
      {"poll_queues", 0, 256, [](const DaemonOptions& o) { return uint64_t(o.poll_queues); }},
      {"max_background", 1, 65535, [](const DaemonOptions& o) { return uint64_t(o.max_background); }},
      {"commit", 0, 3600, [](const DaemonOptions& o) { return uint64_t(o.fs.commit_interval_s); }},
      {"meta_cache", 1, 1u << 20, [](const DaemonOptions& o) { return uint64_t(o.fs.meta_cache_bytes >> 20); }},
      {"fuse_uring_qd", 1, 4096, [](const DaemonOptions& o) { return uint64_t(o.fuse_uring_qd); }},
  };
  for (const Range& r : ranges) {
    CAPTURE(r.name);
    const std::string name = r.name;
    for (uint64_t v : {r.lo, r.hi}) {
      DaemonOptions o;
      CHECK(parse_mount_options(name + "=" + std::to_string(v), &o).message() == "");
      CHECK(r.stored(o) == v);
    }
    const std::string range = "from " + std::to_string(r.lo) + " to " + std::to_string(r.hi) + ")";
    std::vector<uint64_t> outside = {r.hi + 1};
    if (r.lo > 0) outside.push_back(r.lo - 1);
    for (uint64_t v : outside) {
      DaemonOptions o;
      const std::string msg = parse_mount_options(name + "=" + std::to_string(v), &o).message();
      CHECK(msg.find("mount option " + name + ":") != std::string::npos);
      CHECK(msg.find(range) != std::string::npos);
    }
  }
}

// fstab's options: taken, and never handed to libfuse, whose session refuses each of them as
// unknown (`mount -o relatime` failed with "cannot create the FUSE session"; xfstests'
// _require_relatime found it).
TEST_CASE("mount options: fstab-only options are accepted and not passed on") {
  for (const char* opt : {"nofail", "auto", "noauto", "user", "nouser", "users", "_netdev", "lazytime", "nolazytime"}) {
    CAPTURE(opt);
    DaemonOptions o;
    CHECK(parse_mount_options(opt, &o).message() == "");
    CHECK(o.fuse_opts.empty());
  }
}

// The atime options set the daemon's policy (fs/atime.h), the last one winning as in mount(8);
// only the flags libfuse knows reach it.
TEST_CASE("mount options: atime, relatime, strictatime, noatime and nodiratime set the atime policy") {
  // libfuse 3.14's session refuses nodiratime; the daemon's own rule holds on every version.
  const std::vector<std::string> kNodiratimeFlag =
      BIOFS_FUSE_TAKES_NODIRATIME ? std::vector<std::string>{"nodiratime"} : std::vector<std::string>{};
  const struct {
    const char* opts;
    AtimeMode mode;
    bool nodiratime;
    std::vector<std::string> to_libfuse;
  } cases[] = {
      {"", AtimeMode::relatime, false, {}},
      {"relatime", AtimeMode::relatime, false, {}},
      {"strictatime", AtimeMode::strictatime, false, {}},
      {"noatime", AtimeMode::noatime, false, {"noatime"}},
      {"noatime,atime", AtimeMode::relatime, false, {}},
      {"atime,noatime,noatime", AtimeMode::noatime, false, {"noatime"}},
      {"strictatime,relatime", AtimeMode::relatime, false, {}},
      {"nodiratime", AtimeMode::relatime, true, kNodiratimeFlag},
      {"strictatime,nodiratime", AtimeMode::strictatime, true, kNodiratimeFlag},
  };
  for (const auto& c : cases) {
    CAPTURE(c.opts);
    DaemonOptions o;
    CHECK(parse_mount_options(c.opts, &o).message() == "");
    CHECK(o.fs.atime.mode == c.mode);
    CHECK(o.fs.atime.nodiratime == c.nodiratime);
    CHECK(o.fuse_opts == c.to_libfuse);
  }
  DaemonOptions o;
  CHECK(parse_mount_options("noatimes", &o).message() == "unknown mount option 'noatimes'");  // a near miss is not one
}
