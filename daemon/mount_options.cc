#include "mount_options.h"

#define FUSE_USE_VERSION 318
#include <fuse_opt.h>

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "daemon_switches.h"
#include "fuse_compat.h"
#include "lib/parse_number.h"
#include "lib/printable.h"

namespace biofs {

namespace {

// The numeric options: each range is checked here, once; the layers below take what passes.
struct NumericOption {
  const char* name;
  uint64_t lo, hi;
  const char* unit;  // "a number", "seconds", "MiB": the error line's "expected UNIT from LO to HI"
  void (*store)(DaemonOptions* o, uint64_t v);
};

const NumericOption kNumericOptions[] = {
    {"queues", 1, 256, "a number", [](DaemonOptions* o, uint64_t v) { o->queues = unsigned(v); }},
    {"qd", 1, 4096, "a number", [](DaemonOptions* o, uint64_t v) { o->qd = unsigned(v); }},
    {"threads", 1, 1024, "a number", [](DaemonOptions* o, uint64_t v) { o->threads = unsigned(v); }},
    {"poll_queues", 0, 256, "a number", [](DaemonOptions* o, uint64_t v) { o->poll_queues = int(v); }},
    {"max_background", 1, 65535, "a number", [](DaemonOptions* o, uint64_t v) { o->max_background = unsigned(v); }},
    {"commit", 0, 3600, "seconds", [](DaemonOptions* o, uint64_t v) { o->fs.commit_interval_s = unsigned(v); }},
    {"meta_cache", 1, 1u << 20, "MiB", [](DaemonOptions* o, uint64_t v) { o->fs.meta_cache_bytes = size_t(v) << 20; }},
    {"fuse_uring_qd", 1, 4096, "a number", [](DaemonOptions* o, uint64_t v) { o->fuse_uring_qd = unsigned(v); }},
};

const NumericOption* find_numeric_option(const std::string& name) {
  for (const NumericOption& n : kNumericOptions)
    if (name == n.name) return &n;
  return nullptr;
}

// One option of a -o list: ok, or the line that stops the mount.
Status parse_one(const std::string& opt, DaemonOptions* o) {
  // Generic mount(8) and libfuse options, passed through as they are.
  static const std::set<std::string> pass = {
      "allow_other", "allow_root", "default_permissions", "auto_unmount", "dev", "nodev",
      "suid", "nosuid", "exec", "noexec", "async", "sync", "dirsync"};
  // Taken and dropped: fstab's own (for mount(8), which may hand them to a helper: nothing for a
  // filesystem to do). libfuse's session refuses each as an unknown option.
  static const std::set<std::string> drop = {"nofail", "auto", "noauto", "user", "nouser", "users", "_netdev",
                                             // The VFS's lazy timestamps: FUSE's inodes keep none (the
                                             // daemon journals every time it sets), so nothing to defer.
                                             "lazytime", "nolazytime"};
  // The atime options: the daemon moves atime (fs/atime.h; FUSE's kernel side never does), so
  // it keeps them; libfuse takes noatime (and nodiratime, but not 3.14) for the mount's flags and refuses the rest.
  static const std::map<std::string, AtimeMode> atime_modes = {
      {"atime", AtimeMode::relatime}, {"relatime", AtimeMode::relatime},
      {"strictatime", AtimeMode::strictatime}, {"noatime", AtimeMode::noatime}};
  static const std::set<std::string> pass_value = {"fsname", "subtype", "max_read", "blksize"};
  static const std::set<std::string> kernel_only = {"user_id", "group_id", "rootmode", "fd"};
  if (opt.empty()) return Status();
  if (printable(opt) != opt)
    return Status::invalid_argument("mount option '" + printable(opt) + "' holds a control character");
  const size_t eq = opt.find('=');
  const std::string key = opt.substr(0, eq);
  const bool has_value = eq != std::string::npos;
  const std::string val = has_value ? opt.substr(eq + 1) : "";
  auto bad = [&](const std::string& want) {
    return Status::invalid_argument("bad value for mount option " + key + ": '" + val + "' (expected " + want + ")");
  };
  if (const ToggleInfo* t = find_toggle(key)) return t->set(&o->toggles, val) ? Status() : bad(t->values);
  if (const NumericOption* n = find_numeric_option(key)) {
    uint64_t v;
    if (!parse_uint(val, &v, n->lo, n->hi))
      return bad(std::string(n->unit) + " from " + std::to_string(n->lo) + " to " + std::to_string(n->hi));
    n->store(o, v);
    return Status();
  }
  if (key == "writeback_cache" && !has_value) {  // mount(8)'s flag form
    o->writeback_cache = true;
    return Status();
  }
  if (const DaemonSwitch* s = find_daemon_switch(key)) return s->set(o, val) ? Status() : bad(s->values);
  if (key == "blkdev") {
    if (val.empty()) return bad("a block device");
    o->blkdev = val;
    return Status();
  }
  if (key == "trace") {
    if (val.empty()) return bad("a directory");
    o->trace_dir = val;
    return Status();
  }
  if (key == "verbose" && !has_value) {
    o->verbose = true;
    return Status();
  }
  if (key == "remount" && !has_value) {
    o->remount = true;
    return Status();
  }
  if ((key == "norecovery" || key == "noload") && !has_value) {  // ext4's names
    o->fs.norecovery = true;
    return Status();
  }
  if ((key == "ro" || key == "rw") && !has_value) {  // the last one wins, as in mount(8)
    o->fs.read_only = key == "ro";
    o->fuse_opts.push_back(key);
    return Status();
  }
  if (!has_value && drop.count(key)) return Status();
  if (!has_value && atime_modes.count(key)) {
    o->fs.atime.mode = atime_modes.at(key);  // the last one wins, as in mount(8)
    std::erase(o->fuse_opts, "noatime");
    if (key == "noatime") o->fuse_opts.push_back(opt);
    return Status();
  }
  if (key == "nodiratime" && !has_value) {
    o->fs.atime.nodiratime = true;
    if (BIOFS_FUSE_TAKES_NODIRATIME) o->fuse_opts.push_back(opt);
    return Status();
  }
  if (!has_value && pass.count(key)) {
    o->fuse_opts.push_back(opt);
    return Status();
  }
  if (has_value && kernel_only.count(key)) {
    o->kernel_opts.push_back(opt);
    return Status();
  }
  if (has_value && pass_value.count(key)) {
    if (val.empty()) return bad("a value");
    o->fuse_opts.push_back(opt);
    return Status();
  }
  return Status::invalid_argument("unknown mount option '" + opt + "'");
}

enum Key { KEY_FOREGROUND, KEY_DEBUG, KEY_SINGLE, KEY_HELP, KEY_LIST_TOGGLES };

const fuse_opt kFlags[] = {
    FUSE_OPT_KEY("-f", KEY_FOREGROUND), FUSE_OPT_KEY("-d", KEY_DEBUG),
    FUSE_OPT_KEY("-s", KEY_SINGLE),     FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),   FUSE_OPT_KEY("--list-toggles", KEY_LIST_TOGGLES),
    FUSE_OPT_END,
};

struct Parse {
  CommandLine* cl;
  Status error;
  std::vector<std::string> positional;
};

int on_arg(void* data, const char* arg, int key, fuse_args*) {
  auto* p = static_cast<Parse*>(data);
  switch (key) {
    case KEY_FOREGROUND: p->cl->foreground = true; return 0;
    case KEY_DEBUG: p->cl->debug = p->cl->foreground = true; return 0;
    case KEY_SINGLE: p->cl->single_thread = true; return 0;
    case KEY_HELP: p->cl->help = true; return 0;
    case KEY_LIST_TOGGLES: p->cl->list_toggles = true; return 0;
    case FUSE_OPT_KEY_NONOPT: p->positional.push_back(arg); return 0;
    default: break;  // FUSE_OPT_KEY_OPT: one item of a -o list, or an unknown flag
  }
  if (arg[0] == '-') {
    p->error = Status::invalid_argument("unknown flag '" + printable(arg) + "' (try -h)");
    return -1;
  }
  p->error = parse_one(arg, &p->cl->opts);
  return p->error.ok() ? 0 : -1;
}

Status run(std::vector<std::string> argv, Parse* p) {
  std::vector<char*> ptrs;
  for (std::string& a : argv) ptrs.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(int(ptrs.size()), ptrs.data());
  const int rc = fuse_opt_parse(&args, p, kFlags, on_arg);
  fuse_opt_free_args(&args);
  if (rc == -1 && p->error.ok())
    p->error = Status::invalid_argument("malformed command line");  // libfuse printed why
  return p->error;
}

}  // namespace

unsigned default_fuse_threads() {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return unsigned(std::max(4L, 2 * std::max(1L, cpus)));
}

Status parse_mount_options(const std::string& list, DaemonOptions* o) {
  if (list.empty()) return Status();  // "-o" alone would be libfuse's "missing argument"
  if (const size_t nul = list.find('\0'); nul != std::string::npos) {
    // libfuse reads C strings: name the option holding the NUL here, as parse_one names others.
    const size_t start = list.rfind(',', nul);
    const size_t end = list.find(',', nul);
    const std::string opt = list.substr(start == std::string::npos ? 0 : start + 1,
                                        end == std::string::npos ? std::string::npos : end - (start == std::string::npos ? 0 : start + 1));
    return Status::invalid_argument("mount option '" + printable(opt) + "' holds a control character");
  }
  CommandLine cl;
  cl.opts = *o;
  Parse p{&cl, Status(), {}};
  if (Status s = run({"biofs", "-o" + list}, &p); !s.ok()) return s;
  *o = cl.opts;
  return Status();
}

Status parse_command_line(int argc, char** argv, CommandLine* cl) {
  Parse p{cl, Status(), {}};
  if (Status s = run(std::vector<std::string>(argv, argv + argc), &p); !s.ok()) return s;
  if (cl->help || cl->list_toggles) return Status();
  if (p.positional.size() < 2) return Status::invalid_argument("expected DEVICE and MOUNTPOINT (try -h)");
  if (p.positional.size() > 2)
    return Status::invalid_argument("unexpected argument '" + printable(p.positional[2]) + "' (try -h)");
  cl->device = p.positional[0];
  cl->mountpoint = p.positional[1];
  if (!cl->opts.kernel_opts.empty() && !cl->opts.remount)
    return Status::invalid_argument("mount option '" + cl->opts.kernel_opts[0] +
                                    "' is the kernel's own (/proc/mounts shows it); only -o remount takes it");
  if (cl->opts.fs.norecovery && !cl->opts.fs.read_only && !cl->opts.remount)
    return Status::invalid_argument("norecovery needs ro: a journal left unreplayed must not be written over");
  if (!cl->opts.blkdev.empty() && cl->opts.fuse_uring == FuseUring::libfuse)
    return Status::invalid_argument(
        "blkdev= needs fuse_uring=on, auto or off: libfuse's own ring answers the kernel's FUSE_SYNCFS with ENOSYS");
  if (cl->opts.fuse_uring_sched == DaemonOptions::RingSched::idle &&
      (cl->opts.fuse_uring == FuseUring::off || cl->opts.fuse_uring == FuseUring::libfuse))
    return Status::invalid_argument(
        "fuse_uring_sched=idle needs fuse_uring=on or auto: it schedules the reactor's threads, not libfuse's");
  return Status();
}

std::string usage_text() {
  std::string opts = "  -o ";
  size_t line_start = 0;
  auto add = [&](const std::string& item) {
    if (opts.size() - line_start + item.size() > 100) {
      opts += "\n";
      line_start = opts.size();
      opts += "     ";
    }
    opts += item + ",";
  };
  for (const ToggleInfo& t : toggle_table()) add(std::string(t.name) + "=" + t.values);
  for (const DaemonSwitch& s : daemon_switches()) add(std::string(s.name) + "=" + s.values);
  return "usage: biofs DEVICE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]\n"
         "       biofs --list-toggles   (each toggle and switch: NAME VALUES A B block|daemon)\n" +
         opts + "\n"
         "     queues=N,qd=N,threads=N,poll_queues=N,max_background=N,commit=SECONDS,meta_cache=MiB,fuse_uring_qd=N,\n"
         "     trace=DIR,ro,verbose, and FUSE/mount options\n"
         "  -f foreground   -d debug (implies -f)   -s single-threaded\n";
}

}  // namespace biofs
