#!/bin/sh
# Runs inside the QEMU guest (tests/qemu/run-in-guest.sh --add …): every check of issue 4 against
# the real kernel's /dev/ng0n1, one PASS/FAIL line each; exits non-zero if any failed.
#   1. the driver's tests over io_uring passthrough (identify, round trips larger than MDTS,
#      unaligned buffers, flush, LBA out of range, polling, threads, registered files, fixed
#      buffers), the doctest cases chosen by $1;
#   2. biofs-bench briefly on nvme:/dev/ng0n1;
#   3. fio's own io_uring_cmd engine, an independent witness, verifying the 0xa5 pattern the
#      driver left at 64 MiB.
cd /test || exit 1
failed=0
check() {
  name=$1
  shift
  if "$@" > /tmp/check.out 2>&1; then
    echo "PASS $name"
    tail -n 3 /tmp/check.out
  else
    echo "FAIL $name"
    cat /tmp/check.out
    failed=1
  fi
}
check driver ./passthrough_guest_test "-tc=$1"
check biofs-bench ./biofs-bench --dev nvme:/dev/ng0n1 --runtime 1 --quiet
check fio-io_uring_cmd-witness ./fio --name=witness --filename=/dev/ng0n1 --ioengine=io_uring_cmd \
  --cmd_type=nvme --rw=write --bs=4k --size=1M --offset=64M --verify=pattern \
  --verify_pattern=0xa5 --verify_only=1 --verify_fatal=1 --output-format=terse
exit $failed
