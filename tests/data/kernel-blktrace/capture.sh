#!/bin/bash
# Captures what this machine's kernel block layer traces for three I/O patterns on a loop
# device (the kernel has no null_blk module here), through ftrace's `blk` tracer: the same
# blk_add_trace_* functions that feed blktrace's relay files, printed as blkparse prints them.
# (blktrace's own debugfs files are refused under kernel lockdown; the tracer is not.)
#
#   tests/data/kernel-blktrace/capture.sh [OUTDIR]     (root; default: this script's folder)
#
# Writes split.txt, plugged.txt, merge.txt, tagsleep.txt: one line per record, "ACTION RWBS SECTOR+N".
# blk_trace_test compares biofs's records for the same patterns with these.
set -euo pipefail
out=${1:-$(dirname "$0")}
tr=/sys/kernel/tracing
[ -e $tr/current_tracer ] || mount -t tracefs nodev $tr
work=$(mktemp -d)
truncate -s 64M "$work/img"
dev=$(losetup --direct-io=on -f --show "$work/img")
q=/sys/block/${dev#/dev/}/queue
trap 'echo 0 > /sys/block/${dev#/dev/}/trace/enable; echo nop > $tr/current_tracer; losetup -d $dev; rm -rf "$work"' EXIT

capture() {  # NAME, then the command that does the I/O
  local name=$1; shift
  echo 0 > $tr/tracing_on; echo blk > $tr/current_tracer; echo > $tr/trace
  echo 1 > /sys/block/${dev#/dev/}/trace/enable
  echo 1 > $tr/tracing_on
  "$@" >/dev/null 2>&1
  sleep 0.5
  echo 0 > $tr/tracing_on
  echo 0 > /sys/block/${dev#/dev/}/trace/enable
  # "  fio-123 [000] d..1. 1.2: 7,0    Q  WS 0 + 32 [fio]" -> "Q WS 0+32"; U carries its depth
  grep -v '^#' $tr/trace | sed -E 's/.*: +[0-9]+,[0-9]+ +//' |
    awk '{ if ($4 == "+") print $1, $2, $3 "+" $5; else if ($4 == "/") print $1, $2, $3 "/" $5;
           else if ($1 ~ /^U/) print $1, $NF; else print $1 }' > "$out/$name.txt"
  echo "$name: $(wc -l < "$out/$name.txt") records"
}
fio_job() {  # fio on the loop device, libaio, one io_submit of all its I/Os (a task plug)
  fio --name=p --filename=$dev --direct=1 --ioengine=libaio --thread "$@"
}

echo 128 > $q/nr_requests
# Splits: three non-adjacent 16 KiB writes in one io_submit (io_submit plugs a batch of more
# than two, AIO_PLUG_THRESHOLD) on a queue whose requests hold at most 4 KiB.
echo 4 > $q/max_sectors_kb
capture split fio_job --rw=write:16k --bs=16k --iodepth=3 --iodepth_batch_submit=3 --number_ios=3 --size=1M
echo 1280 > $q/max_sectors_kb
# A plugged batch: 4 non-adjacent 4 KiB writes in one io_submit.
capture plugged fio_job --rw=write:4k --bs=4k --iodepth=4 --iodepth_batch_submit=4 --number_ios=4 --size=1M
# Back merges: three adjacent 4 KiB writes in one io_submit.
capture merge fio_job --rw=write --bs=4k --iodepth=3 --iodepth_batch_submit=3 --number_ios=3 --size=1M
# A tag sleep: 8 writes in one io_submit on a queue of 4 tags.
echo 4 > $q/nr_requests
capture tagsleep fio_job --rw=write:4k --bs=4k --iodepth=8 --iodepth_batch_submit=8 --number_ios=8 --size=1M
