#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs what is missing, builds, makes a biofs
# image on the emulated NVMe namespace (a plain file, on /dev/shm when it has room), mounts it
# and compares the per-CPU bio cache off and on end to end. First the verdict, live: one mount
# and one fio per cell, the toggle flipped in 30 randomly ordered pairs of 0.5 s windows
# (tools/biofs-compare --live: intervals of a few percent where a fresh mount per side gives
# tens). Then tools/biofs-compare --quick for where an I/O's CPU goes:
# fio 4 KiB random reads and writes (io_uring, direct, depth 1 and 64) through the mounted
# filesystem, a fresh mount per side, off and on interleaved (A/B, B/A), the layer baselines
# (the backing file alone, the block core alone), CSV, cost.csv, summary and plot (about two
# minutes). The summary gives each cell's verdict (the effect with its bootstrap interval, for
# IOPS and CPU per I/O) and where an I/O's CPU goes (the daemon's threads by role, the
# block-layer stages). Then the same toggle on the block core alone over the null device, where
# nothing else hides it.
# Environment: OUT (build/compare-quick), the results directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target biofs mkfs.biofs fsck.biofs biofs-bench
out=${OUT:-build/compare-quick}
rm -rf "$out"

# The image in memory where there is room: the emulated namespace then runs its commands inline
# (nvme/README.md) and the daemon's CPU per I/O halves, so the block layer's share doubles.
image=/tmp/biofs-compare.img
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ "$(df --output=avail -B1G /dev/shm | tail -1)" -ge 3 ]; then
  image=/dev/shm/biofs-compare.img
fi
echo "== bio_cache off vs on, flipped live inside one run on emu:$image (tools/biofs-compare --live)"
tools/biofs-compare --live --toggle bio_cache=off,on --bin build/bin --image "$image" --pairs 30 --out "$out/live"
rm -f "$image"
echo
echo "== bio_cache off vs on, a fresh mount per side, and where an I/O's CPU goes (tools/biofs-compare --quick)"
tools/biofs-compare --quick --bin build/bin --image "$image" --out "$out"
rm -f "$image"
echo "results: $out/live/live.md (the live verdicts), $out/results.csv (the reference CSV's columns), $out/cost.csv (CPU per I/O by thread"
echo "role and block-layer stage), $out/summary.md (the verdicts above: effect with its 95% interval,"
echo "and where an I/O's CPU goes), $out/plot.png"
echo
echo "== the block core alone (null device, t/io_uring style)"
build/bin/biofs-bench --ab bio_cache --runtime 1 --repeats 3
