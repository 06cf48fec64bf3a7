#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs what is missing, builds, makes a biofs
# image on the emulated NVMe namespace (a plain file), and compares the per-CPU bio cache off
# and on end to end: fio 4 KiB random reads (io_uring, direct, depth 32) through the mounted
# filesystem, a fresh mount per side, off and on alternating, median of the repeats. Then the
# same toggle on the block core alone (biofs-bench), where nothing else hides it.
# Environment: BIOFS_IMAGE (default /tmp/biofs-main.img), REPEATS (3), RUNTIME (5 seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target biofs mkfs.biofs biofs-bench
bin=build/bin
img=${BIOFS_IMAGE:-/tmp/biofs-main.img}
repeats=${REPEATS:-3}
runtime=${RUNTIME:-5}
mnt=$(mktemp -d /tmp/biofs-mnt.XXXXXX)
cleanup() { mountpoint -q "$mnt" && fusermount3 -u "$mnt"; rmdir "$mnt" 2>/dev/null || true; }
trap cleanup EXIT

rm -f "$img"
"$bin/mkfs.biofs" -f -q "emu:$img,size=2G"
"$bin/biofs" "emu:$img" "$mnt"
fio --name=layout --directory="$mnt" --filename=data --size=512M --rw=write --bs=1M \
    --ioengine=psync --direct=1 --minimal >/dev/null
fusermount3 -u "$mnt"

echo "== fio randread 4k, io_uring, direct, depth 32, ${runtime}s per run, through biofs on emu:$img"
declare -A iops=([off]="" [on]="")
for rep in $(seq "$repeats"); do
  order="off on"; [ $((rep % 2)) = 0 ] && order="on off"
  for side in $order; do
    "$bin/biofs" "emu:$img" "$mnt" -o "bio_cache=$side"
    v=$(fio --name=cmp --directory="$mnt" --filename=data --size=512M --rw=randread --bs=4k \
            --ioengine=io_uring --iodepth=32 --direct=1 --runtime="$runtime" --time_based \
            --minimal | cut -d';' -f8)
    fusermount3 -u "$mnt"
    printf '  repeat %s bio_cache=%-3s IOPS=%s\n' "$rep" "$side" "$v"
    iops[$side]+="$v "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
off=$(median "${iops[off]}")
on=$(median "${iops[on]}")
awk -v off="$off" -v on="$on" 'BEGIN {printf "median IOPS: bio_cache=off %d, bio_cache=on %d, on/off = %.3f\n", off, on, on/off}'
echo
echo "== the block core alone (null device, t/io_uring style)"
"$bin/biofs-bench" --ab bio_cache --runtime 1 --repeats 3
