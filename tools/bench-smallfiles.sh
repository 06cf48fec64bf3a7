#!/usr/bin/env bash
# Small files through biofs, two mount option sets A/B alternating (A B B A per round): tar -x of
# /usr/include without boost (~9k entries), then tar -c of it twice (cold, warm). Prints wall
# seconds and the daemon's CPU (utime+stime, centiseconds) per step. Needs root and build/bin.
# Usage: tools/bench-smallfiles.sh [ROUNDS] [OPTS_A] [OPTS_B]   (default: 3 "" writeback_cache)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; a=${2:-}; b=${3:-writeback_cache}
bin=$PWD/build/bin; work=$(mktemp -d /var/tmp/biofs-smallfiles-XXXXXX); mkdir -p "$work/m"
trap 'fusermount3 -u "$work/m" 2>/dev/null || true; rm -rf "$work"' EXIT
tar -C /usr -cf "$work/tree.tar" --exclude=include/boost include
now() { date +%s.%N; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for r in $(seq "$rounds"); do
  for opts in "$a" "$b" "$b" "$a"; do
    rm -f "$work/img"; truncate -s 2G "$work/img"; "$bin/mkfs.biofs" -q "$work/img"
    "$bin/biofs" "emu:$work/img,vwc" "$work/m" ${opts:+-o "$opts"}
    pid=$(pgrep -f -n "biofs emu:$work/img")
    c0=$(cpu "$pid"); t0=$(now); tar -C "$work/m" -xf "$work/tree.tar"; t1=$(now); c1=$(cpu "$pid")
    # Through cat: GNU tar does not read file contents when its output is /dev/null.
    tar -C "$work/m" -cf - include | cat >/dev/null; t2=$(now)
    tar -C "$work/m" -cf - include | cat >/dev/null; t3=$(now); c3=$(cpu "$pid")
    printf 'round %s opts=%-16s extract %6.2f s cpu %4s cs  read1 %5.2f s  read2 %5.2f s  read cpu %3s cs\n' \
      "$r" "${opts:-defaults}" "$(echo "$t1 - $t0" | bc)" "$((c1 - c0))" "$(echo "$t2 - $t1" | bc)" \
      "$(echo "$t3 - $t2" | bc)" "$((c3 - c1))"
    fusermount3 -u "$work/m"; sleep 1
  done
done
