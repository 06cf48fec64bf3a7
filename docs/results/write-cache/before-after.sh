#!/usr/bin/env bash
# The write cache before and after its ring (issue 50), interleaved: for each round, tar -x of
# /usr/include (into a new directory of a 4 GiB image on the disk) and the fsync'd 4 KiB writes,
# with the build in BIN_BEFORE, then with the one in BIN_AFTER, both on `emu:IMG,vwc`.
# Usage: docs/results/write-cache/before-after.sh BIN_BEFORE BIN_AFTER [ROUNDS] [OUT]
set -euo pipefail
before=$1 after=$2 rounds=${3:-3} out=${4:-before-after-out}
tools=$(cd "$(dirname "$0")/../../../tools" && pwd)
mkdir -p "$out"
for r in $(seq "$rounds"); do
  for side in before after; do
    bin=$before; [ "$side" = after ] && bin=$after
    "$tools/biofs-workload" --extract-matrix --rounds 1 --fs biofs --bin "$bin" --sizes 4G --places new \
      --extract-work /var/tmp --out "$out/extract-$side-$r" > /dev/null 2>&1
    "$tools/biofs-workload" --write-matrix --rounds 1 --targets biofs --bin "$bin" --cell-match fsync \
      --out "$out/fsync-$side-$r" > /dev/null 2>&1
    printf '%s round %s: tar -x %s s (daemon CPU %s s), fsync 4k QD1 %s MB/s (daemon CPU %s s over %s I/Os)\n' "$side" "$r" \
      "$(tail -1 "$out/extract-$side-$r/extract.csv" | cut -d, -f6)" "$(tail -1 "$out/extract-$side-$r/extract.csv" | cut -d, -f7)" \
      "$(tail -1 "$out/fsync-$side-$r/writes.csv" | cut -d, -f4)" "$(tail -1 "$out/fsync-$side-$r/writes.csv" | cut -d, -f7)" \
      "$(tail -1 "$out/fsync-$side-$r/writes.csv" | cut -d, -f6)"
  done
done
