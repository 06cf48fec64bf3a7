#!/bin/sh
# Runs inside the QEMU guest (tests/qemu/run-in-guest.sh --add …): every passthrough check against
# the real kernel's /dev/ng0n1, one PASS/FAIL line each; exits non-zero if any failed.
#   1. the driver's tests over io_uring passthrough (identify, round trips larger than MDTS,
#      unaligned buffers, flush, LBA out of range, polling, threads, registered files, fixed
#      buffers), the doctest cases chosen by $1;
#   2. biofs-bench briefly on nvme:/dev/ng0n1;
#   3. fio's own io_uring_cmd engine, an independent witness, verifying the 0xa5 pattern the
#      driver left at 64 MiB;
#   4. the whole stack: mkfs.biofs and a biofs mount on nvme:/dev/ng0n1, fio with crc32c
#      verification through the mount (psync and io_uring, direct and buffered), unmount,
#      fsck, remount with the toggles flipped, fio verifies again, unmount, fsck.
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

# Mounts biofs on the namespace in the foreground (the caller unmounts and waits for it).
mnt=/tmp/biofs
fs_mount() {
  ./biofs nvme:/dev/ng0n1 $mnt -f -o "$1" &
  daemon=$!
  i=0
  while ! grep -q " $mnt fuse.biofs " /proc/mounts; do
    i=$((i+1))
    [ $i -lt 300 ] || { echo "biofs did not mount"; return 1; }
    kill -0 $daemon 2>/dev/null || { echo "biofs exited before mounting"; return 1; }
    sleep 0.1
  done
}
fs_unmount() { umount $mnt && wait $daemon; }
fio_verify() {  # $1: extra fio options (--verify_only to check an earlier run)
  extra=$1
  for job in "psync 1 randwrite 4k" "io_uring 1 write 128k" "io_uring 0 randwrite 8k"; do
    set -- $job
    ./fio --name=guest-$1-$2-$3 --directory=$mnt --ioengine=$1 --direct=$2 --rw=$3 --bs=$4 \
      --size=4M --numjobs=2 --iodepth=8 --verify=crc32c --verify_fatal=1 --randseed=7 --verify_state_save=0 \
      --group_reporting --output-format=terse $extra > /tmp/fio.out 2>&1 || { cat /tmp/fio.out; return 1; }
    echo "fio $1 direct=$2 $3 bs=$4 $extra: verified"
  done
}
whole_stack() {
  mkdir -p $mnt
  ./mkfs.biofs -f -q nvme:/dev/ng0n1 || return 1
  fs_mount "" || return 1
  fio_verify "" || return 1
  fs_unmount || return 1
  ./fsck.biofs -n nvme:/dev/ng0n1 || return 1
  fs_mount "bio_cache=off,tag_batch=off,split_check=fast" || return 1
  fio_verify --verify_only || return 1
  fs_unmount || return 1
  ./fsck.biofs -n -v nvme:/dev/ng0n1
}
check biofs-whole-stack whole_stack
exit $failed
