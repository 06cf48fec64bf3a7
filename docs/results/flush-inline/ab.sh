#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# A/B of the emulated flush run on the submitting thread (inline=auto, the default) against
# through io_uring (inline=off): biofs on a loop device, fio psync 4k randwrite with
# --fdatasync=1 and with O_DSYNC, rounds alternated. Per write: IOPS, the daemon's CPU (all its
# threads, io-wq workers included) and the ring / completion / io-wq threads' shares.
# usage: ab.sh [rounds] [seconds]
rounds=${1:-3}; secs=${2:-5}
BIN=${BIN:-$REPO/build/bin}
W=/var/tmp/flush-ab; rm -rf $W; mkdir -p $W/b; truncate -s 2G $W/bimg; bloop=$(losetup -f --show $W/bimg)
$BIN/mkfs.biofs -q $bloop
cell() {  # $1 device options, $2 fdatasync|dsync
  $BIN/biofs "emu:$bloop,vwc$1" $W/b || exit 1; local pid=$(pgrep -f -n "emu:$bloop,vwc")
  [ -f $W/b/f ] || fio --name=prep --filename=$W/b/f --size=64M --bs=1M --rw=write --direct=1 --ioengine=psync --end_fsync=1 >/dev/null 2>&1
  snap() { for t in /proc/$pid/task/*; do echo "$(cut -c1-8 $t/comm | tr ' -' '__') $(awk '{print $14+$15}' $t/stat)"; done | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort; }
  local p0=$(awk '{print $14+$15}' /proc/$pid/stat); snap > $W/s0
  local a; [ $2 = dsync ] && a=--sync=dsync || a=--fdatasync=1
  local out=$(fio --name=t --filename=$W/b/f --size=64M --bs=4k --rw=randwrite --direct=1 --ioengine=psync --time_based --runtime=$secs --output-format=terse $a 2>/dev/null)
  local p1=$(awk '{print $14+$15}' /proc/$pid/stat); snap > $W/s1
  local ios=$(echo "$out" | awk -F';' '{print $49*$50/1000}')
  printf "%-12s %-9s iops=%-6s cpu_us_per_io=%-6s" "${1:-,auto}" $2 "$(echo "$out" | awk -F';' '{print $49}')" "$(echo "($p1-$p0)*10000/$ios" | bc -l | cut -c1-5)"
  join -a2 -e0 -o 0,1.2,2.2 $W/s0 $W/s1 | awk -v n=$ios '{d=$3-$2; t[$1 ~ /^iou_wrk/ ? "io-wq" : $1]+=d} END {for (k in t) if (t[k]>0) printf " %s=%.1f", k, t[k]*10000/n; print ""}'
  fusermount3 -u $W/b; while pgrep -f "emu:$bloop,vwc" >/dev/null; do sleep 0.1; done
}
for r in $(seq $rounds); do
  for mode in fdatasync dsync; do
    if [ $((r % 2)) = 1 ]; then cell "" $mode; cell ",inline=off" $mode; else cell ",inline=off" $mode; cell "" $mode; fi
  done
done
sleep 0.5; losetup -d $bloop; rm -rf $W
