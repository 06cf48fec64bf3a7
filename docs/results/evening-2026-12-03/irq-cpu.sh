#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# (run from anywhere; uses $REPO/build/bin)
# 4k randread on a disk image (psync QD1, or ENGINE=io_uring QD=64): fio on the CPU that takes the disk's interrupts vs the other, per transport
cd $REPO
for opts in fuse_uring=off fuse_uring=auto; do
  w=$(mktemp -d /var/tmp/irq-XXXX); mkdir $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
  build/bin/biofs "emu:$w/img,vwc" $w/m -o $opts; pid=$(pgrep -f -n "emu:$w/img,vwc")
  fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
  for r in 1 2; do for cpu in 0 1 1 0; do
    out=$(taskset -c $cpu fio --name=t --filename=$w/m/f --size=256M --rw=randread --bs=4k --direct=1 --ioengine=${ENGINE:-psync} --iodepth=${QD:-1} --runtime=3 --time_based --output-format=terse --terse-version=3)
    echo "$opts fio-on-cpu$cpu $(cut -d';' -f8 <<<"$out")"
  done; done
  fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
done
