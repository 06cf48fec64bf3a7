#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# whole-system profile of fio io_uring QD64 4k randread on the default stack, tmpfs image
set -e
cd $REPO
w=$(mktemp -d /dev/shm/prof-XXXX); mkdir $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
build/bin/biofs "emu:$w/img,vwc" $w/m ${OPTS:+-o $OPTS}
pid=$(pgrep -f -n "emu:$w/img,vwc")
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
fio --name=t --filename=$w/m/f --size=256M --rw=${RW:-randread} --bs=4k --direct=1 --ioengine=io_uring --iodepth=${QD:-64} --runtime=10 --time_based --output-format=terse --terse-version=3 > ${OUT:-/var/tmp}/fio.out &
fpid=$!
sleep 3
perf record -a -g -e cpu-clock -F 2000 -o ${OUT:-/var/tmp}/perf.data -- sleep 5 2>/dev/null >/dev/null
wait $fpid
cut -d';' -f8 ${OUT:-/var/tmp}/fio.out
fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
