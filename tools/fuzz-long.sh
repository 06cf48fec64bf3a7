#!/usr/bin/env bash
# The long form of the fuzz run (ctest -L fuzz is the short one): builds build-fuzz
# (clang, libFuzzer, ASan+UBSan), makes the seed corpus, and runs each harness for SECONDS over
# its seeds and the corpus kept from earlier runs (build-fuzz/fuzz/corpus/NAME). Prints one line
# per harness: executions, execs/s, corpus size, new inputs, and whether it found a crash (the
# input lands in build-fuzz/fuzz/artifacts/; make it a regression: tests/fuzz/README.md).
# Usage: tools/fuzz-long.sh [SECONDS] [HARNESS...]     (default 600 s each, every harness)
#        FUZZ_JOBS=N runs N harnesses at once (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(superblock inode extent dir journal xattr image mount_options device_spec)
case "$seconds" in ''|*[!0-9]*) echo "fuzz-long: SECONDS must be a number, not '$seconds'" >&2; exit 2 ;; esac

command -v clang++ >/dev/null || { echo "fuzz-long: clang++ not found (tools/install-deps.sh installs clang)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBIOFS_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_all
work=build-fuzz/fuzz
build-fuzz/bin/biofs-fuzz-seeds "$work" >/dev/null
mkdir -p "$work/logs"

run_one() {  # harness
  local t=$1 log="$work/logs/$1.log" rc=0
  "build-fuzz/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t-" "$work/corpus/$t" "$work/seeds/$t" >"$log" 2>&1 || rc=$?
  local execs rate added corpus
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  added=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
  corpus=$(find "$work/corpus/$t" -type f | wc -l)
  printf '%-14s %6ss  %10s execs  %6s/s  corpus %5s  new %5s  %s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" \
    "$corpus" "${added:-?}" "$([ "$rc" = 0 ] && echo "no crash" || echo "FOUND A CRASH (exit $rc): $log")"
  return "$rc"
}

status=0
jobs=${FUZZ_JOBS:-1}
reap() {  # waits for one harness; 127: none was left to wait for
  local rc=0
  wait -n || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 127 ] || status=1
}
for t in "${harnesses[@]}"; do
  [ -x "build-fuzz/bin/fuzz_$t" ] || { echo "fuzz-long: no harness '$t'" >&2; exit 2; }
  run_one "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do reap; done
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do reap; done
exit "$status"
