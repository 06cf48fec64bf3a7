// Problems and what is done about them, the repair's twin of e2fsck/problem.c (fix_problem):
// each problem is one line, the problem and then the action; preen may only take the safe ones
// (e2fsck's PR_PREEN_OK), and where it meets one that needs -y it writes nothing and says so on
// every line.
#include <string>

#include "fsck_internal.h"

namespace biofs::fsck {

using namespace disk;

void Repair::fix(bool safe, const std::string& problem, const std::string& action) {
  if (preen() && !safe) r.needs_yes++;
  else r.repaired++;
  lines.push_back(Line{problem, action, safe});
}

void Repair::flush_lines() {
  const bool blocked = preen() && r.needs_yes;
  for (const Line& l : lines) {
    if (!blocked || l.done) report(l.problem + ": " + l.action);
    else if (!l.safe) report(l.problem + " (needs -y: " + l.action + ")");
    else report(l.problem + " (not repaired: preen stops where -y is needed)");
  }
  lines.clear();
  if (blocked) r.repaired = 0;
}

void Repair::fatal(const std::string& why) {
  flush_lines();
  report(why);
  r.fatal = true;
}

}  // namespace biofs::fsck
