// The benchmark modes' command lines (CLI11).
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "blockcore/toggles.h"
#include "lib/status.h"

namespace biofs::bench {

// Parses argv into app. -1: go on; otherwise the exit status (0 after --help). A malformed
// command line throws std::invalid_argument with CLI11's one line.
inline int parse_cli(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    throw std::invalid_argument(e.what());
  }
  return -1;
}

// The bench's command line and its runs end at the first error with one line, which main()
// prints (CLI11 reports a bad command line by throwing): a failed Status from the library's
// setup (device strings, opening a device, toggles, mkfs, mount) joins that path here.
inline void stop_unless_ok(const Status& s, const std::string& prefix = "") {
  if (!s.ok()) throw std::runtime_error(prefix + s.message());
}

// One option per block-layer toggle (toggles.h's table), --bio-cache and --bio_cache alike; the
// values land in *values, in the table's order, each starting at its default.
inline void add_toggle_options(CLI::App& app, std::vector<std::string>* values) {
  values->resize(toggle_table().size());
  for (size_t i = 0; i < toggle_table().size(); i++) {
    const ToggleInfo& t = toggle_table()[i];
    std::string dashed = t.name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    (*values)[i] = t.get(Toggles{});
    app.add_option("--" + dashed + ",--" + t.name, (*values)[i], std::string("toggle: ") + t.values)->capture_default_str();
  }
}

}  // namespace biofs::bench
