// Problems and what is done about them, the twin of e2fsck/problem.c (fix_problem): each
// problem is one line, the problem and then the action; preen may only take the safe ones
// (e2fsck's PR_PREEN_OK), and where it meets one that needs -y it writes nothing and says so on
// every line; a check (-n) takes none and prints the problem alone, as e2fsck -n answers "no".
#include <string>

#include "fs/fsck/engine.h"

namespace biofs::fsck {

using namespace disk;

void Engine::fix(bool safe, const std::string& problem, const std::string& action) {
  if (checking()) r.errors++;
  else if (preen() && !safe) r.needs_yes++;
  else r.repaired++;
  lines.push_back(Line{problem, checking() ? "" : action, safe});
}

void Engine::warn(const std::string& line) {
  r.warnings++;
  note(line);
}

void Engine::note(const std::string& line) { lines.push_back(Line{line, "", true, true}); }

void Engine::flush_lines() {
  const bool blocked = preen() && r.needs_yes;
  for (const Line& l : lines) {
    if (l.action.empty()) report(l.problem);
    else if (!blocked || l.done) report(l.problem + ": " + l.action);
    else if (!l.safe) report(l.problem + " (needs -y: " + l.action + ")");
    else report(l.problem + " (not repaired: preen stops where -y is needed)");
  }
  lines.clear();
  if (blocked) r.repaired = 0;
}

void Engine::fatal(const std::string& why) {
  flush_lines();
  report(why);
  r.fatal = true;
}

}  // namespace biofs::fsck
