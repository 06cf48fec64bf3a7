// The daemon's own switches: the FUSE side's A/B knobs, in a table as blockcore/toggles.h keeps
// the block layer's. Each row: the mount option's name, the values it takes, the pair an A/B run
// compares (the baseline, then the idea), and how to set and read it. The usage text and
// `biofs --list-toggles` (which tools/biofs-compare reads its default pairs from) are made from
// this table and toggle_table(): adding a switch is a field in DaemonOptions, a row here, and its use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mount_options.h"

namespace biofs {

struct DaemonSwitch {
  const char* name;
  const char* values;  // what set() takes, "a|b|c"
  const char* ab_a;    // the A/B pair: the baseline, then the idea
  const char* ab_b;
  bool (*set)(DaemonOptions* o, std::string_view value);
  const char* (*get)(const DaemonOptions& o);
};

const std::vector<DaemonSwitch>& daemon_switches();
const DaemonSwitch* find_daemon_switch(std::string_view name);  // nullptr if none has that name

// `biofs --list-toggles`: one line per block toggle and daemon switch, "NAME VALUES A B KIND"
// (KIND: block or daemon), in table order.
std::string list_toggles_text();

}  // namespace biofs
