#!/usr/bin/env bash
# fio 4 KiB direct I/O on biofs (`emu:IMG,vwc`, fresh 2 GiB image per mount) with several mount
# option sets, alternated A B C C B A per round; prints each cell's IOPS and the daemon's CPU
# per I/O (utime+stime of the daemon over the cell / I/Os). Needs root, fio and build/bin.
# IMG_DIR=/dev/shm puts the image on tmpfs (default /var/tmp, the disk). FIO_CPUS=LIST runs fio
# on those CPUs (taskset): on the disk, where fio runs relative to the interrupts' CPU matters.
# A set is OPTIONS or BINARY@OPTIONS (another biofs build, e.g. the one before a change).
# Usage: docs/results/run-to-completion/fio-cells.sh ROUNDS SET_A SET_B [SET_C ...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=$1; shift
cell_run() {  # $1: [BINARY@]OPTIONS; prints "set cell iops cpu_us"
  local set=$1 bin=build/bin/biofs opts=$1 w pid
  if [[ "$opts" == *@* ]]; then bin=${opts%%@*}; opts=${opts#*@}; fi
  w=$(mktemp -d "${IMG_DIR:-/var/tmp}/biofs-cells-XXXXXX"); mkdir "$w/m"; truncate -s 2G "$w/img"
  build/bin/mkfs.biofs -q "$w/img"
  "$bin" "emu:$w/img,vwc" "$w/m" -o "$opts"
  pid=$(pgrep -f -n "emu:$w/img,vwc")
  fio --name=pre --filename="$w/m/f" --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
  for cell in "psync 1 randread" "psync 1 randwrite" "io_uring 1 randread" "io_uring 64 randread" "io_uring 64 randwrite"; do
    set -- $cell
    local c0 c1 out kb
    c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out=$(${FIO_CPUS:+taskset -c "$FIO_CPUS"} fio --name=t --filename="$w/m/f" --size=256M --rw="$3" --bs=4k --direct=1 --ioengine="$1" \
          --iodepth="$2" --runtime=3 --time_based --output-format=terse --terse-version=3)
    c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    # terse v3: read kB total field 6, IOPS 8; write kB 47, IOPS 49
    if [ "$3" = randread ]; then kb=$(cut -d';' -f6 <<<"$out"); iops=$(cut -d';' -f8 <<<"$out")
    else kb=$(cut -d';' -f47 <<<"$out"); iops=$(cut -d';' -f49 <<<"$out"); fi
    awk -v o="$set" -v n="$1-QD$2-$3" -v i="$iops" -v c=$((c1 - c0)) -v k="$kb" \
      'BEGIN { printf "%-40s %-22s %7d IOPS %6.1f us/IO\n", o, n, i, c * 10000 / (k / 4) }'
  done
  fusermount3 -u "$w/m"
  while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done
  rm -rf "$w"
}
sets=("$@"); order=("${sets[@]}")  # A B C, then C B A
for ((i = ${#sets[@]} - 1; i >= 0; i--)); do order+=("${sets[i]}"); done
raw=$(mktemp)
for ((r = 1; r <= rounds; r++)); do
  for opts in "${order[@]}"; do cell_run "$opts"; done
done | tee "$raw"
python3 -c '
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in sys.stdin:
    f = line.split()
    runs[(f[0], f[1])].append((float(f[2]), float(f[4])))
print("medians:")
for (opts, cell), v in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print("%-40s %-22s %7.0f IOPS %6.1f us/IO (%d runs)" % (opts, cell, statistics.median(x[0] for x in v),
          statistics.median(x[1] for x in v), len(v)))' < "$raw"
rm -f "$raw"
