#!/usr/bin/env bash
# Request merging (nomerges=2: none, 0: the kernel's default) end to end and on the block core
# alone; issue 45 part 3. From the repository root, after tools/main-job.sh (or a build):
#   docs/results/merging/run.sh [OUT]   (OUT: build/merging)
# Through the mount: one live run (tools/biofs-compare --live), 4 KiB direct I/O, sequential
# and random, reads and writes, sync/libaio/io_uring at depth 1 and 64, 20 pairs of 0.5 s
# windows per cell; live.md gives IOPS and CPU per I/O with intervals and each side's device
# commands per fio I/O. Then biofs-bench --ab nomerges on the null device, random and
# sequential reads.
set -euo pipefail
out=${1:-build/merging}
image=/tmp/biofs-merging.img
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then image=/dev/shm/biofs-merging.img; fi
cells=psync/1/write,psync/1/read,libaio/64/write,libaio/64/read,io_uring/1/write,io_uring/64/write
cells=$cells,io_uring/64/read,io_uring/64/randwrite,io_uring/64/randread
tools/biofs-compare --live --toggle nomerges=2,0 --bin build/bin --image "$image" --pairs 20 --cells "$cells" \
  --out "$out/live"
for rw in randread read; do
  echo "== the block core alone, $rw (null device)"
  build/bin/biofs-bench --ab nomerges --rw "$rw" --runtime 1 --repeats 5
done
