#!/usr/bin/env bash
# The filesystem against its limit: fio on a raw file vs fio on a file in biofs mounted on an
# emu: image, both in the same directory, for the three workloads fs/README.md ("Measured") sets aims for
# (4 KiB random reads at depth 64, 1 MiB sequential writes and reads at depth 8; io_uring,
# direct). Raw and biofs alternate within each repeat; the table gives medians, the ratio and
# the daemon's resident size. Figures in fs/README.md come from this script.
# Environment: DIR (/tmp), SIZE (512M), RUNTIME (5 s), REPEATS (3), OPTS (mount options).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
[ -x "$bin/biofs" ] || { echo "bench-fs: build first (cmake --build build)" >&2; exit 1; }
command -v fio >/dev/null || { echo "bench-fs: fio is missing (tools/install-deps.sh)" >&2; exit 1; }
dir=${DIR:-/tmp}
size=${SIZE:-512M}
runtime=${RUNTIME:-5}
repeats=${REPEATS:-3}
img=$dir/bench-fs.img raw=$dir/bench-fs-raw.dat
mnt=$(mktemp -d "$dir/bench-fs-mnt.XXXXXX")
cleanup() { mountpoint -q "$mnt" && fusermount3 -u "$mnt"; rmdir "$mnt"; rm -f "$img" "$raw"; }
trap cleanup EXIT

rm -f "$img"
"$bin/mkfs.biofs" -f -q "emu:$img,size=2G"
"$bin/biofs" "emu:$img" "$mnt" ${OPTS:+-o "$OPTS"}
for f in "$mnt/data" "$raw"; do
  fio --name=layout --filename="$f" --size="$size" --rw=write --bs=1M --ioengine=psync --direct=1 --minimal >/dev/null
done

# One fio run; prints IOPS for reads and KiB/s for the 1 MiB workloads.
one() {  # file rw bs depth
  fio --name=b --filename="$1" --size="$size" --rw="$2" --bs="$3" --ioengine=io_uring --iodepth="$4" \
      --direct=1 --runtime="$runtime" --time_based --minimal |
    awk -F';' -v rw="$2" -v bs="$3" '{ v = (rw ~ /write/) ? (bs == "4k" ? $49 : $48) : (bs == "4k" ? $8 : $7); print v }'
}
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '%-34s %14s %14s %7s\n' workload raw biofs ratio
for w in "randread 4k 64" "write 1M 8" "read 1M 8"; do
  set -- $w
  r="" b=""
  for rep in $(seq "$repeats"); do
    if [ $((rep % 2)) = 1 ]; then r+="$(one "$raw" "$@") "; b+="$(one "$mnt/data" "$@") "
    else b+="$(one "$mnt/data" "$@") "; r+="$(one "$raw" "$@") "; fi
  done
  unit=$([ "$2" = 4k ] && echo IOPS || echo KiB/s)
  awk -v w="$1 $2 depth $3 ($unit)" -v r="$(median "$r")" -v b="$(median "$b")" \
    'BEGIN { printf "%-34s %14d %14d %7.2f\n", w, r, b, b / r }'
done
pid=$(pgrep -n -f "biofs emu:$img") || true
[ -n "$pid" ] && awk '/VmRSS/ {printf "biofs resident size: %.1f MiB\n", $2 / 1024}' "/proc/$pid/status"
echo "machine: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
