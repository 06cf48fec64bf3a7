#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# O_DSYNC direct 4k random overwrites (FUA) vs plain writes each followed by fdatasync, on one
# biofs mount (emu:IMG,vwc), interleaved; daemon CPU per write. Usage: dsync.sh BIN rounds secs
bin=${1:-$REPO/build/bin/biofs}; rounds=${2:-3}; secs=${3:-5}
W=/tmp/zc/w; mkdir -p $W/mnt
truncate -s 0 $W/img; truncate -s 1G $W/img
$REPO/build/bin/mkfs.biofs -q -f $W/img
$bin "emu:$W/img,vwc" $W/mnt -o threads=2 || exit 1
pid=$(pgrep -n -f "$bin emu:$W/img")
fio --name=prep --filename=$W/mnt/f --size=64M --bs=1M --rw=write --direct=1 --ioengine=psync --end_fsync=1 >/dev/null 2>&1
one() { # label, fio args
  local s0 t0 t1 out
  s0=$($REPO/tools/biofs-stat $W/mnt --json | tr -d ' ')
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$(fio --name=t --filename=$W/mnt/f --size=64M --bs=4k --rw=randwrite --direct=1 --ioengine=psync --time_based --runtime=$secs --output-format=terse "${@:2}" 2>/dev/null)
  t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  s1=$($REPO/tools/biofs-stat $W/mnt --json | tr -d ' ')
  iops=$(echo "$out" | awk -F';' '{print $49}'); ios=$(echo "$out" | awk -F';' '{print $49*$50/1000}')
  fl=$(( $(echo "$s1" | grep -o '"flushes":[0-9]*' | cut -d: -f2) - $(echo "$s0" | grep -o '"flushes":[0-9]*' | cut -d: -f2) ))
  fua=$(( $(echo "$s1" | grep -o '"fua_writes":[0-9]*' | cut -d: -f2) - $(echo "$s0" | grep -o '"fua_writes":[0-9]*' | cut -d: -f2) ))
  echo "$1 iops=$iops cpu_us_per_io=$(echo "($t1-$t0)*10000/$ios" | bc -l | cut -c1-6) flushes=$fl fua=$fua"
}
for r in $(seq $rounds); do
  one dsync --sync=dsync; one fdatasync --fdatasync=1; one fdatasync --fdatasync=1; one dsync --sync=dsync
done
fusermount3 -u $W/mnt
