#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# ABBA of two daemon binaries: fio randwrite direct psync QD1 at bs, CPU of the daemon per I/O.
bs=${1:-128k}; rounds=${2:-3}; secs=${3:-6}
W=/tmp/zc/w; mkdir -p $W/mnt
truncate -s 0 $W/img; truncate -s 1G $W/img
$REPO/build/bin/mkfs.biofs -q -f $W/img
run_one() { # binary label
  $1 $W/img $W/mnt -o threads=2 || exit 1
  pid=$(pgrep -n -f "$1 $W/img")
  fio --name=prep --filename=$W/mnt/f --size=256M --bs=1M --rw=write --direct=1 --ioengine=psync >/dev/null 2>&1
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$(fio --name=t --filename=$W/mnt/f --size=256M --bs=$bs --rw=randwrite --direct=1 --ioengine=psync --time_based --runtime=$secs --output-format=terse 2>/dev/null)
  t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  ios=$(echo "$out" | awk -F";" "{print \$49*\$50/1000}")
  iops=$(echo "$out" | awk -F';' '{print $49}')
  copies=$($REPO/tools/biofs-stat $W/mnt --json 2>/dev/null | tr -d " " | grep -o '"fs_write_copies":[0-9]*' || true)
  fusermount3 -u $W/mnt; while pgrep -f "$1 $W/img" >/dev/null; do sleep 0.1; done
  echo "$2 iops=$iops cpu_us_per_io=$(echo "($t1-$t0)*10000/$ios" | bc -l | cut -c1-6) $copies"
}
for r in $(seq $rounds); do
  run_one /tmp/biofs-old old; run_one /tmp/biofs-new new; run_one /tmp/biofs-new new; run_one /tmp/biofs-old old
done
