#!/usr/bin/env bash
# Two builds of biofs against each other on the read/write path: each mounts its own emu: image
# (in DIR), and fio (io_uring, direct, 4 KiB, depth 64, a 512 MiB file) runs randread and then
# randwrite on each, the two interleaved and which goes first swapped every round. Prints each
# run, then per pattern the medians of IOPS and of the daemon's CPU per I/O (its utime+stime
# around the run, /proc/PID/stat) and the ratios B/A. For a change's before and after: build
# the old tree apart (e.g. a git worktree's build/bin) and give both bin directories.
#   tools/bench-builds.sh A_BIN_DIR B_BIN_DIR
# Environment: ROUNDS (5), RUNTIME (5 s), DIR (/tmp), PATTERNS ("randread randwrite").
set -euo pipefail
[ $# = 2 ] || { echo "usage: tools/bench-builds.sh A_BIN_DIR B_BIN_DIR" >&2; exit 2; }
rounds=${ROUNDS:-5} runtime=${RUNTIME:-5} dir=${DIR:-/tmp} patterns=${PATTERNS:-"randread randwrite"}
command -v fio >/dev/null || { echo "bench-builds: fio is missing (tools/install-deps.sh)" >&2; exit 1; }
declare -A bin pid mnt img samples
bin[A]=$1 bin[B]=$2
for s in A B; do
  [ -x "${bin[$s]}/biofs" ] && [ -x "${bin[$s]}/mkfs.biofs" ] ||
    { echo "bench-builds: ${bin[$s]}: no biofs and mkfs.biofs there" >&2; exit 1; }
done
cleanup() {
  for s in A B; do
    [ -n "${mnt[$s]:-}" ] || continue
    mountpoint -q "${mnt[$s]}" && fusermount3 -u "${mnt[$s]}"
    [ -n "${pid[$s]:-}" ] && wait "${pid[$s]}" 2>/dev/null || true
    rmdir "${mnt[$s]}"; rm -f "${img[$s]}"
  done
}
trap cleanup EXIT
for s in A B; do
  img[$s]=$dir/bench-builds-$s.img
  mnt[$s]=$(mktemp -d "$dir/bench-builds-mnt-$s.XXXXXX")
  "${bin[$s]}/mkfs.biofs" -f -q "emu:${img[$s]},size=2G"
  "${bin[$s]}/biofs" "emu:${img[$s]}" "${mnt[$s]}" -f &
  pid[$s]=$!
  for _ in $(seq 100); do mountpoint -q "${mnt[$s]}" && break; sleep 0.1; done
  mountpoint -q "${mnt[$s]}" || { echo "bench-builds: ${bin[$s]}/biofs did not mount" >&2; exit 1; }
  fio --name=layout --filename="${mnt[$s]}/data" --size=512M --rw=write --bs=1M --ioengine=psync --direct=1 --minimal >/dev/null
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
  order="A B"; [ $((r % 2)) = 0 ] && order="B A"
  for pat in $patterns; do
    for s in $order; do
      t0=$(ticks "${pid[$s]}")
      json=$(fio --name=ab --filename="${mnt[$s]}/data" --size=512M --rw="$pat" --bs=4k --ioengine=io_uring \
        --direct=1 --iodepth=64 --time_based --runtime="$runtime" --output-format=json)
      t1=$(ticks "${pid[$s]}")
      read -r iops cpu_ns < <(echo "$json" | python3 -c "
import json, sys
job = json.load(sys.stdin)['jobs'][0]
d = job['read'] if job['read']['total_ios'] else job['write']
print(round(d['iops']), round(($t1 - $t0) / $hz * 1e9 / max(d['total_ios'], 1)))")
      samples[$s,$pat]+="$iops,$cpu_ns "
      echo "round $r $pat $s: IOPS $iops, daemon CPU per I/O $cpu_ns ns"
    done
  done
done
for pat in $patterns; do
  python3 - "$pat" "${samples[A,$pat]}" "${samples[B,$pat]}" <<'PY'
import statistics, sys
pat = sys.argv[1]
a, b = ([[float(v) for v in x.split(',')] for x in arg.split()] for arg in sys.argv[2:4])
ma, mb = [statistics.median(c) for c in zip(*a)], [statistics.median(c) for c in zip(*b)]
print(f"{pat}: IOPS A {ma[0]:.0f} B {mb[0]:.0f} (B/A {mb[0] / ma[0]:.3f}); "
      f"daemon CPU per I/O A {ma[1]:.0f} ns B {mb[1]:.0f} ns (B/A {mb[1] / ma[1]:.3f})")
PY
done
