#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# Disk-level view of fio QD64 4k randread: raw file vs biofs (emu:IMG,vwc). diskstats deltas over 5 s.
set -e
cd $REPO
w=/var/tmp/sched-auto-w; rm -rf $w; mkdir -p $w/m
truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
build/bin/biofs "emu:$w/img,vwc" $w/m
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
fio --name=pre --filename=$w/raw --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
snap() { echo $(awk '$3=="vda"{print $4, $7, $12, $14, $6}' /proc/diskstats) $(awk '$1=="36:"{print $3}' /proc/interrupts); }  # reads, ms reading, io_ticks, weighted, sectors, irqs
run() { # $1 file $2 label $3 depth
  taskset -c 0 fio --name=t --filename=$1 --size=256M --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=${3:-64} --runtime=8 --time_based --output-format=terse --terse-version=3 > $w/fio.out &
  local p=$!; sleep 2; perf stat -a -x, -e block:block_plug,block:block_unplug,block:block_rq_insert,block:block_rq_issue,block:block_getrq,io_uring:io_uring_queue_async_work,io_uring:io_uring_task_add,io_uring:io_uring_submit_req,context-switches -o $w/perf.$2.$3 -- sleep 5 & local a=($(snap)); local t0=$(date +%s.%N); sleep 5; local b=($(snap)); local t1=$(date +%s.%N); wait $p; sleep 0.2; awk -F, -v r=$((b[0]-a[0])) '$1 ~ /^[0-9]/ {printf "   %s %.2f/read\n", $3, $1/r}' $w/perf.$2.$3
  python3 -c "
r=$((b[0]-a[0])); ms=$((b[1]-a[1])); wt=$((b[3]-a[3])); dt=$t1-$t0
sec=$((b[4]-a[4])); irq=$((b[5]-a[5]))
print('%-6s qd%-3s fio %s IOPS | disk reads/s %.0f  await %.3f ms  avg queue %.1f  KiB/read %.1f  irqs/read %.2f' % ('$2', '${3:-64}', '$(cut -d';' -f8 $w/fio.out)', r/dt, ms/r, wt/dt/1000, sec/2/r, irq/r))"
}
for i in 1; do run $w/raw raw; run $w/m/f biofs; done
fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
