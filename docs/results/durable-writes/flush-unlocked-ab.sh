#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# Readers beside an fdatasync writer: fio, one job of 4 KiB random overwrites with fdatasync after
# each, one job of 4 KiB random reads (io_uring QD8) of another file, both direct, on biofs over a
# loop device (emu:/dev/loopN,vwc: a flush reaches the host's block layer). Binary A against B,
# A B B A per round, a fresh image per run. Usage: flush-unlocked-ab.sh BIN_A BIN_B [ROUNDS] [SECS]
# WRITER=dsync: the writer opens with O_DSYNC instead (fio --sync=dsync), no fdatasync.
a=$1; b=$2; rounds=${3:-3}; secs=${4:-5}
sync_opt=--fdatasync=1; [ "${WRITER:-}" = dsync ] && sync_opt=--sync=dsync
W=/var/tmp/flushab; mkfs=$REPO/build/bin/mkfs.biofs
one() {
  rm -rf $W; mkdir -p $W/m; truncate -s 2G $W/img; local loop; loop=$(losetup -f --show $W/img)
  $mkfs -q $loop; $1 "emu:$loop,vwc" $W/m || exit 1
  for f in w r; do fio --name=prep --filename=$W/m/$f --size=64M --bs=1M --rw=write --direct=1 --end_fsync=1 >/dev/null; done
  local out
  out=$(fio --output-format=terse --terse-version=3 --direct=1 --bs=4k --size=64M --time_based --runtime=$secs \
    --name=w --filename=$W/m/w --rw=randwrite --ioengine=psync $sync_opt \
    --name=r --filename=$W/m/r --rw=randread --ioengine=io_uring --iodepth=8 2>/dev/null)
  echo "$out" | awk -F';' -v n=$2 -v m="$sync_opt" '$3=="w" {w=$49} $3=="r" {r=$8} END {printf "%s writes (%s) %6d IOPS, reads beside them %7d IOPS\n", n, m, w, r}'
  fusermount3 -u $W/m; while pgrep -f "emu:$loop,vwc" >/dev/null; do sleep 0.1; done; sleep 0.3; losetup -d $loop; rm -rf $W
}
for r in $(seq $rounds); do one $a A; one $b B; one $b B; one $a A; done
