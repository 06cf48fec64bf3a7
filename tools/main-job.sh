#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs what is missing, builds, makes a biofs
# image on the emulated NVMe namespace (a plain file, on /dev/shm when it has room), mounts it
# and compares the per-CPU bio cache off and on end to end, live: one mount and one fio per cell
# (4 KiB random reads and writes, io_uring, direct, depth 1 and 64), the toggle flipped in
# randomly ordered pairs of 0.05 s windows until both of the cell's intervals are within +-0.5%
# (at most 600 pairs; tools/biofs-compare --live), each cell's verdict for IOPS and the daemon's
# CPU per I/O with its interval; then per cell 2 s of perf samples per
# side, every CPU's time per I/O by layer (application, kernel, FUSE, io_uring, the daemon's
# transport, fs, the block core, the NVMe driver, the device, scheduling) and the block core's
# share. Then the seed's set-up, the cheapest device that holds a filesystem (ram:, where the
# block core's share is largest), and the block core alone over the null device, where nothing
# else hides the cache. About 3 minutes after the build.
# Environment: OUT (build/main-job), the results directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target biofs mkfs.biofs fsck.biofs biofs-bench
out=${OUT:-build/main-job}
rm -rf "$out"

# The image in memory where there is room: the emulated namespace then runs its commands inline
# (nvme/README.md) and the daemon's CPU per I/O halves, so the block layer's share doubles.
image=/tmp/biofs-main-job.img
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ "$(df --output=avail -B1G /dev/shm | tail -1)" -ge 3 ]; then
  image=/dev/shm/biofs-main-job.img
fi
profile=2
if ! perf record -q -e cpu-clock -a -o /dev/null -- true 2>/dev/null; then
  echo "main-job: perf cannot sample every CPU here: no per-layer split"; profile=0
fi
echo "== bio_cache off vs on, flipped live inside one run on emu:$image (tools/biofs-compare --live)"
tools/biofs-compare --live --toggle bio_cache=off,on --bin build/bin --image "$image" \
  --pairs 600 --min-pairs 30 --target 0.5 \
  --profile "$profile" --out "$out/emu"
rm -f "$image"
echo
echo "== the seed's set-up: the same toggle over ram: (the device costs nothing; tools/biofs-compare --live --device ram:1G)"
tools/biofs-compare --live --toggle bio_cache=off,on --bin build/bin --device ram:1G \
  --pairs 600 --min-pairs 30 --target 0.5 \
  --cells io_uring/64/randread --out "$out/ram"
echo
echo "== the block core alone (null device, t/io_uring style)"
build/bin/biofs-bench --ab bio_cache --runtime 1 --repeats 3
echo
echo "results: $out/emu/live.md (verdicts and the split by layer), $out/emu/profile.png (a bar per side),"
echo "$out/emu/live.csv and profile.csv (every window, every layer), $out/ram/live.md (ram:)"
