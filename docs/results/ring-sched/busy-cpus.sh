#!/usr/bin/env bash
# Metadata rates while every CPU runs a busy loop (`yes` pinned to each CPU), biofs with two
# mount option sets alternated A B B A per round: what a SCHED_IDLE ring thread costs when
# normal tasks keep its CPU busy. Creates and unlinks FILES files. Needs root and build/bin.
# Usage: docs/results/ring-sched/busy-cpus.sh ROUNDS FILES OPTS_A OPTS_B
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=$1 files=$2 a=$3 b=$4
one() {
  local w pid hogs=(); w=$(mktemp -d /var/tmp/biofs-busy-XXXXXX); mkdir "$w/m"; truncate -s 2G "$w/img"
  build/bin/mkfs.biofs -q "$w/img"
  build/bin/biofs "emu:$w/img,vwc" "$w/m" -o "$1"
  for ((c = 0; c < $(nproc); c++)); do taskset -c "$c" yes >/dev/null & hogs+=($!); done
  python3 - "$w/m" "$files" "$1" <<'PY'
import os, sys, time
d, n, opts = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = [os.path.join(d, "f%06d" % i) for i in range(n)]
t0 = time.perf_counter()
for p in names: os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
t1 = time.perf_counter()
for p in names: os.unlink(p)
t2 = time.perf_counter()
print("%-40s create %7.0f/s unlink %7.0f/s" % (opts, n / (t1 - t0), n / (t2 - t1)))
PY
  kill "${hogs[@]}"; wait "${hogs[@]}" 2>/dev/null || true
  fusermount3 -u "$w/m"
  while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done
  rm -rf "$w"
}
for ((r = 1; r <= rounds; r++)); do one "$a"; one "$b"; one "$b"; one "$a"; done
