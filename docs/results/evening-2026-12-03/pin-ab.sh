#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# ring threads pinned (libfuse's default) vs free to run on any CPU, one mount, alternated
rounds=${1:-2}
cd $REPO
w=$(mktemp -d /dev/shm/pin-XXXX); mkdir $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
build/bin/biofs "emu:$w/img,vwc" $w/m ${OPTS:+-o $OPTS}
pid=$(pgrep -f -n "emu:$w/img,vwc")
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
rings() { for t in /proc/$pid/task/*; do c=$(cat $t/comm); [[ $c == fuse-ring-* ]] && echo "${t##*/} ${c#fuse-ring-}"; done; }
pin() { rings | while read tid q; do if [ $1 = pinned ]; then taskset -p -c $q $tid >/dev/null; else taskset -p -c 0-$(($(nproc)-1)) $tid >/dev/null; fi; done; }
for r in $(seq $rounds); do for mode in pinned free free pinned; do
  pin $mode
  for cell in "psync 1 randread" "io_uring 1 randread" "io_uring 64 randread" "io_uring 64 randwrite"; do
    set -- $cell
    c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    out=$(fio --name=t --filename=$w/m/f --size=256M --rw=$3 --bs=4k --direct=1 --ioengine=$1 --iodepth=$2 --runtime=3 --time_based --output-format=terse --terse-version=3)
    c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    if [ $3 = randread ]; then kb=$(cut -d';' -f6 <<<"$out"); iops=$(cut -d';' -f8 <<<"$out"); else kb=$(cut -d';' -f47 <<<"$out"); iops=$(cut -d';' -f49 <<<"$out"); fi
    awk -v o=$mode -v n="$1-QD$2-$3" -v i=$iops -v c=$((c1-c0)) -v k=$kb 'BEGIN { printf "%-8s %-22s %7d IOPS %6.1f us/IO\n", o, n, i, c*10000/(k/4) }'
  done
done; done
fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
