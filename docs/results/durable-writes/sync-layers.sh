#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# fsync'd small writes, three layers interleaved: fio 4 KiB random overwrites, psync QD1,
# direct, O_DSYNC (--sync=dsync) and write+fdatasync, on biofs (emu:IMG,vwc), ext4 on a loop
# device, passthrough_hp --nopassthrough over that ext4 through /dev/fuse (hp) and over
# FUSE-over-io_uring (hp_uring). Daemon CPU per write for the FUSE ones.
# With `loop` biofs's image is a loop device too (emu:/dev/loopN,vwc), so that both daemons
# leave the host's durability work to a loop worker. Usage: sync-layers.sh [ROUNDS] [SECS] [loop]
rounds=${1:-3}; secs=${2:-5}; on_loop=${3:-}
W=/var/tmp/synclayers; rm -rf $W; mkdir -p $W/b $W/e $W/h $W/u
truncate -s 2G $W/bimg; bdev=$W/bimg; bloop=""
if [ "$on_loop" = loop ]; then bloop=$(losetup -f --show $W/bimg); bdev=$bloop; fi
$REPO/build/bin/mkfs.biofs -q $bdev
truncate -s 2G $W/eimg; mkfs.ext4 -q -F $W/eimg; loop=$(losetup -f --show $W/eimg); mount $loop $W/e
$REPO/build/bin/biofs "emu:$bdev,vwc" $W/b || exit 1; bpid=$(pgrep -f -n "emu:$bdev,vwc")
/opt/biofs-libfuse/bin/passthrough_hp --nopassthrough $W/e $W/h & sleep 1; hpid=$(pgrep -f -n "passthrough_hp --nopassthrough $W/e $W/h")
/opt/biofs-libfuse/bin/passthrough_hp --nopassthrough -o io_uring $W/e $W/u & sleep 1; upid=$(pgrep -f -n "passthrough_hp --nopassthrough -o io_uring $W/e $W/u")
for d in $W/b $W/e; do fio --name=prep --filename=$d/f --size=64M --bs=1M --rw=write --direct=1 --ioengine=psync --end_fsync=1 >/dev/null 2>&1; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
one() { # layer dir pid mode
  local a; [ $4 = dsync ] && a=--sync=dsync || a=--fdatasync=1
  local c0=0 c1=0; [ -n "$3" ] && c0=$(cpu $3)
  out=$(fio --name=t --filename=$2/f --size=64M --bs=4k --rw=randwrite --direct=1 --ioengine=psync --time_based --runtime=$secs --output-format=terse $a 2>/dev/null)
  [ -n "$3" ] && c1=$(cpu $3)
  iops=$(echo "$out" | awk -F';' '{print $49}'); ios=$(echo "$out" | awk -F';' '{print $49*$50/1000}')
  echo "$1 $4 iops=$iops cpu_us_per_io=$( [ -n "$3" ] && echo "($c1-$c0)*10000/$ios" | bc -l | cut -c1-6 || echo -)"
}
for r in $(seq $rounds); do
  for m in dsync fdatasync; do
    one biofs $W/b $bpid $m; one hp $W/h $hpid $m; one hp_uring $W/u $upid $m; one ext4 $W/e "" $m
    one ext4 $W/e "" $m; one hp_uring $W/u $upid $m; one hp $W/h $hpid $m; one biofs $W/b $bpid $m
  done
done
fusermount3 -u $W/h; fusermount3 -u $W/u; fusermount3 -u $W/b; umount $W/e; losetup -d $loop
if [ -n "$bloop" ]; then sleep 1; losetup -d $bloop; fi
rm -rf $W
