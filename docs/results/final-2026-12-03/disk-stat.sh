#!/bin/bash
cd /work/main
w=$(mktemp -d /var/tmp/ds-XXXX); mkdir $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
build/bin/biofs "emu:$w/img,vwc" $w/m
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
taskset -c 0 fio --name=t --filename=$w/m/f --size=256M --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 --runtime=6 --time_based --output-format=terse --terse-version=3 > /var/tmp/fio.out &
fpid=$!
sleep 2; tools/biofs-stat $w/m > /var/tmp/stat1.txt; sleep 2; tools/biofs-stat $w/m > /var/tmp/stat2.txt
wait $fpid
cut -d';' -f8 /var/tmp/fio.out
fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
