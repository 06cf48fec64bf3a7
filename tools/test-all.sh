#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, builds, and
# runs ctest in three configurations:
#   build/        optimised build, every test (the `long` forms included)
#   build-asan/   AddressSanitizer + UndefinedBehaviorSanitizer, every test but the `long` and
#                 `qemu` ones
#   build-tsan/   ThreadSanitizer, every test but the `long` and `qemu` ones (`concurrent` marks
#                 the stress tests written for it)
# Usage: tools/test-all.sh [--quick]   (--quick: optimised build only, without the `long` and `qemu` tests)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "test-all: unknown option '$1' (only --quick)" >&2; exit 2 ;;
esac

tools/install-deps.sh
jobs=$(nproc)

configure_and_build() {  # dir, cmake args...
  local dir=$1; shift
  echo "== build $dir $*"
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

run_ctest() {  # dir, ctest args...
  local dir=$1; shift
  echo "== ctest in $dir $*"
  (cd "$dir" && ctest --output-on-failure --no-tests=error -j "$jobs" "$@")
}

configure_and_build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "$quick" = 1 ]; then
  run_ctest build -LE "long|qemu"
  exit 0
fi
run_ctest build

configure_and_build build-asan -DCMAKE_BUILD_TYPE=Debug -DBIOFS_SANITIZE=address,undefined
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan -LE "long|qemu"

configure_and_build build-tsan -DCMAKE_BUILD_TYPE=Debug -DBIOFS_SANITIZE=thread
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest build-tsan -LE "long|qemu"
