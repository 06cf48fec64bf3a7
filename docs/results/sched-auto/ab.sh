#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# A/B: two biofs mounts ("ENV|mount options" each), and the raw file; fio io_uring QD64 4k, disk-level stats.
# Usage: ab.sh "ENV_A" "ENV_B" rounds [rw]
set -e
cd $REPO
A=$1; B=$2; N=${3:-3}; RW=${4:-randread}
w=/var/tmp/sched-auto-w; rm -rf $w; mkdir -p $w/a $w/b
for x in a b; do truncate -s 2G $w/$x.img; build/bin/mkfs.biofs -q $w/$x.img; done
mnt() { local e=${1%%|*} o=${1#*|}; [ "$o" = "$1" ] && o=; env $e build/bin/biofs ${o:+-o $o} "emu:$w/$2.img,vwc" $w/$2; }
mnt "$A" a; mnt "$B" b
for f in $w/a/f $w/b/f $w/raw; do fio --name=pre --filename=$f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null; done
snap() { echo $(awk '$3=="vda"{print $4+$8, $7+$11, $12, $14}' /proc/diskstats); }
run() {
  taskset -c 0 fio --name=t --filename=$1 --size=256M --rw=$RW --bs=4k --direct=1 --ioengine=io_uring --iodepth=64 --runtime=6 --time_based --output-format=terse --terse-version=3 > $w/fio.out &
  local p=$!; sleep 1.5; local a=($(snap)); local t0=$(date +%s.%N); sleep 4; local b=($(snap)); local t1=$(date +%s.%N); wait $p
  local iops=$(awk -F';' '{print $8+$49}' $w/fio.out)
  python3 -c "
r=$((b[0]-a[0])); ms=$((b[1]-a[1])); wt=$((b[3]-a[3])); dt=$t1-$t0
print('%-28s fio %7d IOPS | disk %6.0f/s  await %.3f ms  queue %.1f' % ('$2', $iops, r/dt, ms/r, wt/dt/1000))"
}
for i in $(seq $N); do run $w/a/f "A $A"; run $w/b/f "B $B"; run $w/raw raw; done
for x in a b; do fusermount3 -u $w/$x; done; sleep 1; rm -rf $w
