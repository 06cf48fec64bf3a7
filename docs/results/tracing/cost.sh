#!/bin/bash
# What tracing costs through a mount: fio (4 KiB random reads, io_uring, depth 16, direct) on a
# RAM-disk mount, three sides interleaved round by round:
#   base    a daemon built without the tracepoints (the commit before them: git worktree)
#   usdt    the daemon as shipped: USDT probes compiled in, nothing attached, blktrace off
#   trace   the same daemon with -o trace=DIR: every bio's records written
# Per run: IOPS and the daemon's CPU per I/O (utime+stime from /proc over the run). Prints
# each run, then per side the median and the ratio to base.
#
#   docs/results/tracing/cost.sh BASE_BUILD BUILD [ROUNDS] [SECONDS]    (root)
set -euo pipefail
base=$(cd "$1" && pwd)/bin
usdt=$(cd "$2" && pwd)/bin
rounds=${3:-6}
secs=${4:-4}
work=$(mktemp -d /var/tmp/biofs-trace-cost.XXXXXX)
trap 'mountpoint -q $work/mnt && fusermount3 -u $work/mnt; rm -rf $work' EXIT
mkdir "$work/mnt" "$work/trace"
tick=$(getconf CLK_TCK)
run() {  # SIDE BIN OPTS
  local side=$1 bin=$2 opts=$3
  rm -f "$work"/trace/*
  "$bin/biofs" ram:512M "$work/mnt" ${opts:+-o "$opts"}
  local pid
  pid=$(pgrep -n -f "biofs ram:512M $work/mnt")
  fio --name=fill --filename="$work/mnt/f" --size=128M --bs=1M --rw=write --minimal >/dev/null
  local c0 c1
  c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
  local iops
  iops=$(fio --name=r --filename="$work/mnt/f" --size=128M --bs=4k --rw=randread --ioengine=io_uring \
           --iodepth=16 --direct=1 --time_based --runtime="$secs" --output-format=json |
         python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print(int(j["iops"]), j["total_ios"])')
  c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  fusermount3 -u "$work/mnt"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  set -- $iops
  echo "$side $1 $(python3 -c "print(round(($c1 - $c0) / $tick / $2 * 1e6, 3))")"
}
for r in $(seq "$rounds"); do
  run base "$base" ""
  run usdt "$usdt" ""
  run trace "$usdt" "trace=$work/trace"
done | tee "$work/runs.txt"
python3 - "$work/runs.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for side in ("base", "usdt", "trace"):
    iops = [float(r[1]) for r in rows if r[0] == side]
    cpu = [float(r[2]) for r in rows if r[0] == side]
    med[side] = (statistics.median(iops), statistics.median(cpu))
for side, (i, c) in med.items():
    print(f"{side:7s} IOPS {i:9.0f} ({i / med['base'][0]:.3f}x)  daemon CPU/IO {c:6.2f} us ({c / med['base'][1]:.3f}x)")
PY
