#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# per-thread daemon CPU per write for fio psync randwrite with --fdatasync=1 (or dsync) on biofs over a loop device
mode=${1:-fdatasync}
W=/var/tmp/fsthr; rm -rf $W; mkdir -p $W/b; truncate -s 2G $W/bimg; bloop=$(losetup -f --show $W/bimg)
$REPO/build/bin/mkfs.biofs -q $bloop
$REPO/build/bin/biofs "emu:$bloop,vwc" $W/b || exit 1; bpid=$(pgrep -f -n "emu:$bloop,vwc")
fio --name=prep --filename=$W/b/f --size=64M --bs=1M --rw=write --direct=1 --ioengine=psync --end_fsync=1 >/dev/null 2>&1
snap() { for t in /proc/$bpid/task/*; do echo "$(cat $t/comm | tr ' ' _) $(awk '{print $14+$15}' $t/stat)"; done | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort; }
# io-wq workers come and go: count the process total too
p0=$(awk '{print $14+$15}' /proc/$bpid/stat); snap > $W/s0
[ $mode = dsync ] && a=--sync=dsync || a=--fdatasync=1
out=$(fio --name=t --filename=$W/b/f --size=64M --bs=4k --rw=randwrite --direct=1 --ioengine=psync --time_based --runtime=5 --output-format=terse $a 2>/dev/null)
p1=$(awk '{print $14+$15}' /proc/$bpid/stat); snap > $W/s1
ios=$(echo "$out" | awk -F';' '{print $49*$50/1000}')
echo "$mode iops=$(echo "$out" | awk -F';' '{print $49}') total_us_per_io=$(echo "($p1-$p0)*10000/$ios" | bc -l | cut -c1-6)"
join -a2 -e0 -o 0,1.2,2.2 $W/s0 $W/s1 | awk -v n=$ios '{d=$3-$2; if (d>0) printf "  %-18s %7.1f us/IO\n", $1, d*10000/n}'
fusermount3 -u $W/b; while pgrep -f "emu:$bloop,vwc" >/dev/null; do sleep 0.1; done; sleep 0.5; losetup -d $bloop; rm -rf $W
