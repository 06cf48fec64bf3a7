#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# fio io_uring QD64 4k randread on the disk image (emu:IMG,vwc on /var/tmp), fio on CPU 0, and
# while it runs either a whole-system profile (prof-disk.txt) or the daemon's counters twice,
# 2 s apart (stat: disk-stat-qd64.txt is the second). Usage: prof-disk.sh [perf|stat]
set -e
mode=${1:-perf}
cd $REPO
w=$(mktemp -d /var/tmp/prof-XXXX); mkdir $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
build/bin/biofs "emu:$w/img,vwc" $w/m
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
taskset -c 0 fio --name=t --filename=$w/m/f --size=256M --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 --runtime=10 --time_based --output-format=terse --terse-version=3 > /var/tmp/fio.out &
fpid=$!
sleep 3
if [ "$mode" = stat ]; then
  tools/biofs-stat $w/m > /var/tmp/stat1.txt; sleep 2; tools/biofs-stat $w/m > /var/tmp/stat2.txt
else
  perf record -a -g -e cpu-clock -F 2000 -o /var/tmp/perf-disk.data -- sleep 5 2>/dev/null >/dev/null
fi
wait $fpid
cut -d';' -f8 /var/tmp/fio.out
fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
