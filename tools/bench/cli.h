// The benchmark modes' command lines (CLI11).
#pragma once

#include <stdexcept>

#include <CLI/CLI.hpp>

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

}  // namespace biofs::bench
