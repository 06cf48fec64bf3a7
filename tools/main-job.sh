#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs what is missing, builds, and compares
# the per-CPU bio cache off and on. For now this runs the block core alone: the allocation
# benchmark (biofs-bench alloc), then the whole submit/complete path on the null device
# (biofs-bench --ab bio_cache). It becomes "mount biofs on the emulated namespace and compare
# under fio" as the filesystem lands. Extra arguments go to biofs-bench alloc.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target biofs-bench
build/bin/biofs-bench alloc "$@"
echo
build/bin/biofs-bench --ab bio_cache --runtime 1 --repeats 3
