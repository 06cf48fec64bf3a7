#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# A/B of a temporary switch read from the environment by a patched daemon (not kept in the tree):
#   completion thread free:  devices/open_device.cc  cfg.completion_affinity = opts.completion_affinity && !getenv("BIOFS_EXP_NOAFF");
#   SQPOLL emulated queues: nvme/emu_queue.cc  if (getenv("BIOFS_EXP_SQPOLL")) { params.flags |= IORING_SETUP_SQPOLL; params.sq_thread_idle = atoi(...); }
#   COOP_TASKRUN:           nvme/emu_queue.cc  if (getenv("BIOFS_EXP_COOP")) params.flags |= IORING_SETUP_COOP_TASKRUN;
# Usage: aff-ab.sh NAME=VALUE  (three rounds, default and switched alternated; disk image, fio on CPU 0)
cd $REPO
w=/var/tmp/aff; rm -rf $w; mkdir -p $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
run() { # $1 env
  env $1 build/bin/biofs "emu:$w/img,vwc" $w/m
  [ -f $w/m/f ] || fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
  for qd in 64 1; do
  e=io_uring; [ $qd = 1 ] && e=psync
  r=$(taskset -c 0 fio --name=t --filename=$w/m/f --size=256M --rw=randread --bs=4k --direct=1 --ioengine=$e --iodepth=$qd --runtime=4 --time_based --output-format=terse --terse-version=3 | cut -d';' -f8)
  echo "$1 qd$qd $r"
  done
  fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done
}
for i in 1 2 3; do run X=1; run "$1"; done
rm -rf $w
