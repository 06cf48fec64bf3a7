#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, builds, and
# runs ctest in five configurations:
#   build/        optimised build, every test (the `long` forms included)
#   build-asan/   AddressSanitizer + UndefinedBehaviorSanitizer, every test but the `long` and
#                 `qemu` ones, the FUSE tests' images on /dev/shm (the emulated namespace's
#                 inline path; elsewhere their images are on the disk, through io_uring)
#   build-tsan/   ThreadSanitizer, every test but the `long` and `qemu` ones (`concurrent` marks
#                 the stress tests written for it)
#   build-fuzz/   clang + libFuzzer + ASan/UBSan: the `fuzz` label (each harness 20 s,
#                 BIOFS_FUZZ_SECONDS to change it; tools/fuzz-long.sh for the long form)
#   build-fuse314/ on Debian 12's own libfuse3-dev 3.14, the fallback where no newer libfuse
#                 builds (daemon/fuse_compat.h): the daemon's tests and the FUSE ones, /dev/fuse only
# Usage: tools/test-all.sh [--quick]   (--quick: optimised build only, without the `long` and `qemu` tests)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "test-all: unknown option '$1' (only --quick)" >&2; exit 2 ;;
esac

jobs=$(nproc)

# Each stage's line says when it started, in seconds since this script did (SECONDS); at the
# end, passed or not, a table gives each stage's minutes (the last lines are what a CI log keeps).
stages=()
stage() {  # what
  stages+=("$SECONDS|$*")
  echo "== [${SECONDS} s] $*"
}
minutes() {  # seconds, what: "  12.3 min  what"
  printf '%4d.%d min  %s\n' $(($1 / 60)) $(($1 % 60 * 10 / 60)) "$2"
}
stage_times() {
  local rc=$? i start name next
  echo "== stage times (exit $rc)"
  for i in "${!stages[@]}"; do
    start=${stages[$i]%%|*} name=${stages[$i]#*|}
    next=$SECONDS
    [ $((i + 1)) -lt ${#stages[@]} ] && next=${stages[$((i + 1))]%%|*}
    minutes $((next - start)) "$name"
  done
  minutes "$SECONDS" "in all"
}
trap stage_times EXIT

stage "install what is missing"
tools/install-deps.sh

configure_and_build() {  # dir, cmake args...
  local dir=$1; shift
  stage "build $dir $*"
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
}

run_ctest() {  # dir, ctest args...
  local dir=$1; shift
  stage "ctest in $dir $*"
  (cd "$dir" && ctest --output-on-failure --no-tests=error -j "$jobs" "$@")
}

configure_and_build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "$quick" = 1 ]; then
  run_ctest build -LE "long|qemu"
  exit 0
fi
run_ctest build

# The FUSE tests' images in memory here, where the emulated namespace runs its commands inline
# (nvme/emu_ns.h); in the other configurations they are on the disk and go through io_uring.
configure_and_build build-asan -DCMAKE_BUILD_TYPE=Debug -DBIOFS_SANITIZE=address,undefined
BIOFS_SCRATCH_DIR=/dev/shm ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_ctest build-asan -LE "long|qemu"

configure_and_build build-tsan -DCMAKE_BUILD_TYPE=Debug -DBIOFS_SANITIZE=thread
# Left out here, run under ASan above: the cases that drive the filesystem from one thread over
# the RAM disk, whose requests complete inline in the submitter (blockcore/brd.h), so there is
# no second thread for TSan to watch; they are its slowest (7.3 of its 23 test CPU-minutes).
single_threaded="fs_crash_test\.crash: every prefix|fs_fsck_repair_test\.fsck repair: damage at random|fuzz_regression_test\.(fsck corpus|damaged images)"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest build-tsan -LE "long|qemu" -E "$single_threaded"

# Fuzzing (tests/fuzz/README.md): clang, libFuzzer, ASan+UBSan. Each harness runs BIOFS_FUZZ_SECONDS (20) over
# a seed corpus made at test time, beside the regression inputs (tools/fuzz-long.sh: longer).
stage "build build-fuzz (clang, libFuzzer)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBIOFS_FUZZ=ON \
  -DBIOFS_FUZZ_SECONDS="${BIOFS_FUZZ_SECONDS:-20}" >/dev/null
cmake --build build-fuzz -j "$jobs" --target fuzz_all
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-fuzz -L fuzz

# Debian 12's own libfuse 3.14 (an empty prefix: no libfuse of build-libfuse.sh): what a machine
# gets whose archive offers no fuse3 source that builds. /dev/fuse only; the tests that need what
# 3.14 lacks say so. Only what those tests run is built (the fuse_suite target), without LTO.
BUILD_TARGET=fuse_suite configure_and_build build-fuse314 -DCMAKE_BUILD_TYPE=Release -DBIOFS_LTO=OFF -DBIOFS_LIBFUSE_PREFIX=
run_ctest build-fuse314 -R '^daemon_'
run_ctest build-fuse314 -L fuse -LE "long|qemu"
stage "done"
