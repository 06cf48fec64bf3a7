#include "daemon_switches.h"

#include "blockcore/toggles.h"
#include "fuse_transport.h"

namespace biofs {

namespace {

const char* on_off_name(bool v) { return v ? "on" : "off"; }

// An on|off switch's set and get, for the member it names.
template <bool DaemonOptions::*M>
bool set_on_off(DaemonOptions* o, std::string_view v) {
  if (v != "on" && v != "off") return false;
  o->*M = v == "on";
  return true;
}
template <bool DaemonOptions::*M>
const char* get_on_off(const DaemonOptions& o) {
  return on_off_name(o.*M);
}

using RingSched = DaemonOptions::RingSched;

const char* ring_sched_name(RingSched s) {
  switch (s) {
    case RingSched::normal: return "normal";
    case RingSched::idle: return "idle";
    default: return "auto";
  }
}

}  // namespace

const std::vector<DaemonSwitch>& daemon_switches() {
  static const std::vector<DaemonSwitch> table = {
      {"keep_cache", "on|off", "off", "on", set_on_off<&DaemonOptions::keep_cache>, get_on_off<&DaemonOptions::keep_cache>},
      {"writeback_cache", "on|off", "off", "on", set_on_off<&DaemonOptions::writeback_cache>, get_on_off<&DaemonOptions::writeback_cache>},
      {"fuse_uring", "on|off|auto|reactor|libfuse", "off", "on",
       [](DaemonOptions* o, std::string_view v) { return parse_fuse_uring(std::string(v), &o->fuse_uring); },
       [](const DaemonOptions& o) { return fuse_uring_name(o.fuse_uring); }},
      {"fuse_uring_plug", "on|off", "off", "on", set_on_off<&DaemonOptions::fuse_uring_plug>, get_on_off<&DaemonOptions::fuse_uring_plug>},
      {"fuse_uring_cover", "on|off", "off", "on", set_on_off<&DaemonOptions::fuse_uring_cover>, get_on_off<&DaemonOptions::fuse_uring_cover>},
      {"fuse_uring_hot", "on|off", "off", "on", set_on_off<&DaemonOptions::fuse_uring_hot>, get_on_off<&DaemonOptions::fuse_uring_hot>},
      {"fuse_uring_sched", "normal|idle|auto", "normal", "auto",
       [](DaemonOptions* o, std::string_view v) {
         for (RingSched s : {RingSched::normal, RingSched::idle, RingSched::auto_})
           if (v == ring_sched_name(s)) return o->fuse_uring_sched = s, true;
         return false;
       },
       [](const DaemonOptions& o) { return ring_sched_name(o.fuse_uring_sched); }},
  };
  return table;
}

const DaemonSwitch* find_daemon_switch(std::string_view name) {
  for (const DaemonSwitch& s : daemon_switches())
    if (name == s.name) return &s;
  return nullptr;
}

std::string list_toggles_text() {
  std::string out;
  for (const ToggleInfo& t : toggle_table())
    out += std::string(t.name) + " " + t.values + " " + t.ab_a + " " + t.ab_b + " block\n";
  for (const DaemonSwitch& s : daemon_switches())
    out += std::string(s.name) + " " + s.values + " " + s.ab_a + " " + s.ab_b + " daemon\n";
  return out;
}

}  // namespace biofs
