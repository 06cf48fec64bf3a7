#include "mount_options.h"

#include <set>

#include "blockcore/printable.h"

namespace biofs {

static bool parse_unsigned(const std::string& s, unsigned lo, unsigned hi, unsigned* out) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long v = std::stoul(s);
  if (v < lo || v > hi) return false;
  *out = unsigned(v);
  return true;
}

std::string parse_mount_options(const std::string& list, DaemonOptions* o) {
  // Generic mount(8) and libfuse options, passed through as they are.
  static const std::set<std::string> pass = {
      "allow_other", "allow_root", "default_permissions", "auto_unmount", "rw", "dev", "nodev",
      "suid", "nosuid", "exec", "noexec", "atime", "noatime", "relatime", "async", "sync",
      "dirsync", "nofail", "auto", "noauto", "user", "nouser", "users", "_netdev"};
  static const std::set<std::string> pass_value = {"fsname", "subtype", "max_read", "blksize"};
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string opt = list.substr(start, comma - start);
    start = comma + 1;
    if (opt.empty()) continue;
    if (printable(opt) != opt) return "mount option '" + printable(opt) + "' holds a control character";
    const size_t eq = opt.find('=');
    const std::string key = opt.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string val = has_value ? opt.substr(eq + 1) : "";
    auto bad = [&](const char* want) {
      return "bad value for mount option " + key + ": '" + val + "' (expected " + want + ")";
    };
    if (key == "bio_cache") {
      if (val == "on") o->bio_cache = true;
      else if (val == "off") o->bio_cache = false;
      else return bad("on|off");
    } else if (key == "tag_batch") {
      if (!parse_tag_batch(val, &o->toggles.tag_batch)) return bad("off|plain|retain|loop");
    } else if (key == "split_check") {
      if (!parse_split_check(val, &o->toggles.split_check)) return bad("fast|iter");
    } else if (key == "queues") {
      if (!parse_unsigned(val, 1, 256, &o->queues)) return bad("a number from 1 to 256");
    } else if (key == "qd") {
      if (!parse_unsigned(val, 1, 4096, &o->qd)) return bad("a number from 1 to 4096");
    } else if (key == "threads") {
      if (!parse_unsigned(val, 1, 1024, &o->threads)) return bad("a number from 1 to 1024");
    } else if (key == "max_background") {
      if (!parse_unsigned(val, 1, 65535, &o->max_background)) return bad("a number from 1 to 65535");
    } else if (key == "commit") {
      if (!parse_unsigned(val, 0, 3600, &o->fs.commit_interval_s)) return bad("seconds from 0 to 3600");
    } else if (key == "meta_cache") {
      unsigned mib;
      if (!parse_unsigned(val, 1, 1u << 20, &mib)) return bad("MiB from 1");
      o->fs.meta_cache_bytes = size_t(mib) << 20;
    } else if (key == "keep_cache") {
      if (val == "on") o->keep_cache = true;
      else if (val == "off") o->keep_cache = false;
      else return bad("on|off");
    } else if (key == "writeback_cache") {
      if (!has_value || val == "on") o->writeback_cache = true;
      else if (val == "off") o->writeback_cache = false;
      else return bad("on|off");
    } else if (key == "ro" && !has_value) {
      o->fs.read_only = true;
      o->fuse_opts.push_back("ro");
    } else if (!has_value && pass.count(key)) {
      o->fuse_opts.push_back(opt);
    } else if (has_value && pass_value.count(key)) {
      if (val.empty()) return bad("a value");
      o->fuse_opts.push_back(opt);
    } else {
      return "unknown mount option '" + opt + "'";
    }
  }
  return "";
}

}  // namespace biofs
