#!/usr/bin/env bash
# The long forms of the reliability tests (docs/reliability.md): hundreds of seeded power cuts,
# SIGKILLs of the FUSE daemon, and fault-injection rounds, each printing its figures.
# Usage: tools/crash-long.sh [BUILD_DIR]   (default build/; builds the tests first)
# Rounds and seeds come from the environment: BIOFS_POWERCUT_ROUNDS (300), BIOFS_CRASH_ROUNDS
# (300), BIOFS_TAR_CRASH_ROUNDS (the tar -x case, as BIOFS_CRASH_ROUNDS), BIOFS_FAULT_ROUNDS (100), BIOFS_POWERCUT_SEED / BIOFS_CRASH_SEED / BIOFS_FAULT_SEED (1).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
[ -f "$dir/build.ninja" ] || cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j "$(nproc)" --target rel_powercut_test rel_fault_test rel_fuse_crash_test biofs fsck.biofs
export BIOFS_POWERCUT_ROUNDS=${BIOFS_POWERCUT_ROUNDS:-300} BIOFS_CRASH_ROUNDS=${BIOFS_CRASH_ROUNDS:-300}
export BIOFS_FAULT_ROUNDS=${BIOFS_FAULT_ROUNDS:-100} BIOFS_TAR_CRASH_ROUNDS=${BIOFS_TAR_CRASH_ROUNDS:-$BIOFS_CRASH_ROUNDS}
status=0
run() {  # name, binary, test-case filter
  echo "== $1"
  local start=$SECONDS
  # The error lines the faults provoke go to a log; doctest's summary and MESSAGE lines stay.
  if ! "$dir/bin/$2" -tc="$3" 2>"$dir/$2.stderr.log" | grep -E "MESSAGE|ERROR|Status|test cases"; then status=1; fi
  echo "   $((SECONDS - start)) s (stderr: $dir/$2.stderr.log)"
}
run "power cuts at random commands ($BIOFS_POWERCUT_ROUNDS rounds)" rel_powercut_test "*random command*"
run "journal replay cut at every command" rel_powercut_test "*replay*"
run "SIGKILL of the FUSE daemon ($BIOFS_CRASH_ROUNDS rounds)" rel_fuse_crash_test "*"
run "random device faults ($BIOFS_FAULT_ROUNDS rounds)" rel_fault_test "*random faults*"
exit $status
