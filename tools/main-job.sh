#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs what is missing, builds, and compares
# the per-CPU bio cache off and on. For now this runs the block core alone (biofs-bench alloc);
# it becomes "mount biofs on the emulated namespace and compare under fio" as the filesystem
# lands. Extra arguments go to biofs-bench alloc (e.g. --repeats 9 --json).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target biofs-bench
build/bin/biofs-bench alloc "$@"
