#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# Where a psync QD1 4 KiB read's daemon CPU goes on the disk image (emu:IMG,vwc, image on /var/tmp
# ext4), fio on CPU 0: perf of the daemon's threads, context switches, and the wait syscalls.
cd $REPO
w=$(mktemp -d /var/tmp/pp-XXXX); mkdir $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
build/bin/biofs "emu:$w/img,vwc" $w/m ${OPTS:+-o $OPTS}; pid=$(pgrep -f -n "emu:$w/img,vwc")
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
taskset -c 0 fio --name=t --filename=$w/m/f --size=256M --rw=randread --bs=4k --direct=1 --ioengine=psync --runtime=12 --time_based --output-format=terse --terse-version=3 > $w/fio.out &
fpid=$!
sleep 2
c0=$(awk '{print $14+$15}' /proc/$pid/stat)
perf record -g -e cpu-clock -F 10000 -p $pid -o /var/tmp/pp.data -- sleep 4 2>/dev/null >/dev/null
c1=$(awk '{print $14+$15}' /proc/$pid/stat)
perf stat -e context-switches,cpu-migrations -p $pid -- sleep 2 2>&1 | grep -E "context|migr"
perf trace -s -p $pid -- sleep 1 2>&1 | grep -E "io_uring_enter|futex|nanosleep|read|write" | head
wait $fpid
echo "iops $(cut -d';' -f8 $w/fio.out)  daemon ticks during perf record: $((c1-c0)) (x10 ms over 4 s)"
fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
