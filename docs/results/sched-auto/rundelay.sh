#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# Run-delay share (runnable, not running) of each FUSE ring thread and of the requester, over 3 s
# of a workload, on a tmpfs or disk image. Usage: rundelay.sh IMGDIR "mount opts"
cd $REPO
w=$1/rd; rm -rf $w; mkdir -p $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
dev="emu:$w/img"; [[ $1 == /dev/shm* ]] || dev="$dev,vwc"
build/bin/biofs ${2:+-o $2} "$dev" $w/m
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
d=$(pgrep -f "$dev $w/m")
snapt() { for t in /proc/$d/task/* /proc/$1/task/*; do n=$(cat $t/comm 2>/dev/null); case $n in fuse-ring*|biofs-cq|fio|python3) echo "$n $(cat $t/schedstat)";; esac; done; }
measure() { # $1 label; the workload runs in the background as $!
  local p=$1; shift; sleep 1.5; snapt $p > $w/s1; sleep 3; snapt $p > $w/s2; wait $p
  echo "$* : $(cat $w/res 2>/dev/null)"; paste $w/s1 $w/s2 | awk '$1==$5 && $8-$4>0 {printf "   %-12s run %4.0f ms  wait %4.0f ms (%2.0f%% of 3 s)  slices %6d\n", $1, ($6-$2)/1e6, ($7-$3)/1e6, ($7-$3)/3e7, $8-$4}'
}
fiorun() { taskset -c 0 fio --name=t --filename=$w/m/f --size=256M --rw=randread --bs=4k --direct=1 --runtime=5 --time_based --output-format=terse --terse-version=3 "$@" | cut -d';' -f8 > $w/res; }
fiorun --ioengine=psync & measure $! "psync QD1 randread IOPS"
fiorun --ioengine=io_uring --iodepth=64 & measure $! "io_uring QD64 randread IOPS"
mkdir $w/m/d
taskset -c 0 python3 -c "
import os,time
t=time.time(); n=0
while time.time()-t<5:
    p='$w/m/d/f%d'%n; open(p,'w').close(); n+=1
print('creates/s %d'%(n/5))" > $w/res & measure $! "python creates"
fusermount3 -u $w/m; sleep 0.5; rm -rf $w
