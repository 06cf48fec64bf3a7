#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# A/B: random 4 KiB writes into a fresh fallocated 512 MiB file (tmpfs image), old vs new biofs.
# usage: frag-ab.sh ROUNDS NIOS ENGINE DEPTH BIN_A BIN_B
ROUNDS=$1 NIOS=$2 ENG=$3 QD=$4; shift 4
B=$REPO/build/bin
IMG=/dev/shm/fragab.img; MNT=/tmp/fragabmnt; mkdir -p $MNT
tck=$(getconf CLK_TCK)
for r in $(seq $ROUNDS); do
 for bin in "$@"; do
  rm -f $IMG; truncate -s 2G $IMG; $B/mkfs.biofs -q $IMG >/dev/null
  $bin emu:$IMG $MNT
  pid=$(pgrep -n -f "$bin emu:$IMG")
  fallocate -l 512M $MNT/f
  c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$(cd /tmp && fio --name=ab --filename=$MNT/f --rw=randwrite --bs=4k --direct=1 --ioengine=$ENG --iodepth=$QD \
        --size=512M --number_ios=$NIOS --randseed=3 --fallocate=none --output-format=json 2>/dev/null)
  c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  iops=$(echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["write"]; print(round(j["iops"]), j["total_ios"])')
  set -- $iops "$@"; ios=$2; shift 2
  echo "$(basename $(dirname $(dirname $(dirname $bin))))/$(basename $bin) round $r: iops $(echo $iops|cut -d' ' -f1) ios $ios cpu_us_per_io $(python3 -c "print(round(($c1-$c0)/$tck*1e6/$ios,1))")"
  umount $MNT
 done
done
rm -f $IMG
