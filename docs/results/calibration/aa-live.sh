#!/usr/bin/env bash
# A/A calibration of biofs-compare --live (issue 44 §3): RUNS runs with both sides the same
# value (bio_cache=on,on: each "flip" still writes the attribute and waits the settle gap), one
# cell each; every run prints 2 intervals (IOPS, CPU/IO), each at 95%/2 (Bonferroni), so a run
# whose intervals both contain 0 is a run without a false effect: nominally at least 95% of runs.
# Usage: docs/results/calibration/aa-live.sh [RUNS] [OUT] [CELL] [PAIRS] [WINDOW]
# (every pair run, no --target: the intervals' coverage at a fixed count)
set -euo pipefail
runs=${1:-40} out=${2:-aa-live-out} cell=${3:-io_uring/1/randread} pairs=${4:-100} window=${5:-0.05}
tools=$(cd "$(dirname "$0")/../../../tools" && pwd)
img=${IMG:-/dev/shm/biofs-aa.img}
mkdir -p "$out"
for r in $(seq "$runs"); do
  "$tools/biofs-compare" --live --toggle bio_cache=on,on --image "$img" --cells "$cell" --pairs "$pairs" \
    --window "$window" --seed "$r" --out "$out/run-$r" > /dev/null 2>&1 || echo "run $r failed"
  grep "^| $cell" "$out/run-$r/live.md" | sed "s/^/run $r /"
done | tee "$out/runs.txt"
total=$(grep -c "^run .* |" "$out/runs.txt" || true)
clean=$(grep "^run .* |" "$out/runs.txt" | grep -vc "effect [+-]" || true)
iops_ok=$(grep "^run .* |" "$out/runs.txt" | awk -F'|' '$6 !~ /^ effect/' | wc -l)
cpu_ok=$(grep "^run .* |" "$out/runs.txt" | awk -F'|' '$9 !~ /^ effect/' | wc -l)
echo "runs $total; without a false effect $clean ($(( 100 * clean / (total ? total : 1) ))%); IOPS intervals holding 0: $iops_ok; CPU/IO: $cpu_ok" | tee "$out/coverage.txt"
