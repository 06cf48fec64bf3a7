#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# base (bf4d7b3) vs head binaries, ABBA per round: fio 4k direct, psync QD1 and io_uring QD64,
# randread and randwrite; daemon CPU per I/O.
rounds=${1:-3}; secs=${2:-5}
W=/var/tmp/abh; rm -rf $W; mkdir -p $W/mnt; truncate -s 1G $W/img; $REPO/build/bin/mkfs.biofs -q $W/img
run_one() { # bin label
  $1 "emu:$W/img,vwc" $W/mnt || exit 1; pid=$(pgrep -n -f "emu:$W/img,vwc")
  [ -f $W/laid ] || { fio --name=prep --filename=$W/mnt/f --size=256M --bs=1M --rw=write --direct=1 --ioengine=psync >/dev/null 2>&1; touch $W/laid; }
  for cell in "psync 1 randread" "psync 1 randwrite" "io_uring 64 randread" "io_uring 64 randwrite"; do
    set -- $cell
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    out=$(fio --name=t --filename=$W/mnt/f --size=256M --bs=4k --rw=$3 --direct=1 --ioengine=$1 --iodepth=$2 --time_based --runtime=$secs --output-format=terse 2>/dev/null)
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    if [ $3 = randread ]; then iops=$(echo "$out" | awk -F';' '{print $8}'); rt=$(echo "$out" | awk -F';' '{print $9}'); else iops=$(echo "$out" | awk -F';' '{print $49}'); rt=$(echo "$out" | awk -F';' '{print $50}'); fi
    echo "$LABEL $1 qd$2 $3 iops=$iops cpu_us_per_io=$(echo "($t1-$t0)*10000/($iops*$rt/1000)" | bc -l | cut -c1-6)"
  done
  fusermount3 -u $W/mnt; while pgrep -f "emu:$W/img,vwc" >/dev/null; do sleep 0.1; done
}
for r in $(seq $rounds); do
  LABEL=base run_one /tmp/biofs-base; LABEL=head run_one /tmp/biofs-head; LABEL=head run_one /tmp/biofs-head; LABEL=base run_one /tmp/biofs-base
done
rm -rf $W
