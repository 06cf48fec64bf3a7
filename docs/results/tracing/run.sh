#!/bin/bash
# docs/tracing.md's figures. One fio job (4 KiB random reads, io_uring, depth 16, direct, 16000
# I/Os) on a biofs mount of an emulated namespace with blktrace on (-o trace=DIR), with
# bio_cache off and on and tag_batch off and loop (its default); then the same job on a loop device over the
# same kind of file, traced by the kernel (ftrace's blk tracer: blktrace's debugfs files are
# refused under lockdown; tools/ftrace2blktrace.py turns the text back into blktrace files).
# For each: blkparse's first records and summary, btt's table, and one summary line in
# OUT/summary.txt (btt's averages in microseconds).
#
#   docs/results/tracing/run.sh [BUILD_DIR] [OUT]     (root; BUILD_DIR default build/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=$(cd "${1:-$root/build}" && pwd)/bin
out=$(mkdir -p "${2:-$here}" && cd "${2:-$here}" && pwd)
work=$(mktemp -d /var/tmp/biofs-trace.XXXXXX)
loopdev=""
cleanup() {
  mountpoint -q "$work/mnt" && fusermount3 -u "$work/mnt"
  [ -n "$loopdev" ] && losetup -d "$loopdev"
  rm -rf "$work"
}
trap cleanup EXIT
job=(--name=job --rw=randread --bs=4k --ioengine=io_uring --iodepth=16 --direct=1 --size=64M
     --number_ios=16000 --randrepeat=1 --minimal)

unmount_and_wait() {  # the records are in the files once the daemon has exited
  fusermount3 -u "$work/mnt"
  while pgrep -f "biofs emu:$work/img" >/dev/null; do sleep 0.1; done
}
# "NAME Q2G D2C Q2C (avg us) N": btt's ALL table
summarize() {
  awk -v name="$1" '/^Q2G /{q2g=$3} /^D2C /{d2c=$3; n=$5} /^Q2C /{q2c=$3}
    END { printf "%-16s Q2G %8.2f us  D2C %8.2f us  Q2C %8.2f us  N %s\n", name, q2g*1e6, d2c*1e6, q2c*1e6, n }' "$2"
}
report() {  # NAME DIR TRACE_NAME: blkparse and btt over DIR/TRACE_NAME.blktrace.*
  local name=$1 dir=$2 tname=$3
  blkparse -i "$tname" -D "$dir" -d "$dir/all.bin" > "$dir/blkparse.txt"
  head -24 "$dir/blkparse.txt" > "$out/blkparse-$name.txt"
  sed -n '/^Total/,/^Events/p' "$dir/blkparse.txt" >> "$out/blkparse-$name.txt"
  (cd "$dir" && btt -i all.bin) > "$out/btt-$name.txt"  # btt writes .dat files where it runs
  summarize "$name" "$out/btt-$name.txt" | tee -a "$out/summary.txt"
}

: > "$out/summary.txt"
truncate -s 1G "$work/img"
"$bin/mkfs.biofs" -q "$work/img"
mkdir "$work/mnt"
"$bin/biofs" "emu:$work/img" "$work/mnt"
fio --name=fill --filename="$work/mnt/f" --size=64M --bs=1M --rw=write --end_fsync=1 --minimal >/dev/null
unmount_and_wait
for t in bio_cache=off bio_cache=on tag_batch=off tag_batch=loop; do
  name=${t/=/-}
  mkdir "$work/$name"
  "$bin/biofs" "emu:$work/img" "$work/mnt" -o "trace=$work/$name,$t"
  fio "${job[@]}" --filename="$work/mnt/f" >/dev/null
  unmount_and_wait
  report "biofs-$name" "$work/$name" biofs
done

# The kernel: the same job on a loop device (direct I/O to its file), ftrace's blk tracer.
tr=/sys/kernel/tracing
[ -e $tr/current_tracer ] || mount -t tracefs nodev $tr
truncate -s 1G "$work/loopimg"
dd if=/dev/zero of="$work/loopimg" bs=1M count=64 conv=notrunc status=none
loopdev=$(losetup --direct-io=on -f --show "$work/loopimg")
sysblk=/sys/block/${loopdev#/dev/}
echo 0 > $tr/tracing_on; echo 65536 > $tr/buffer_size_kb; echo blk > $tr/current_tracer; echo > $tr/trace
echo 1 > $sysblk/trace/enable; echo 1 > $tr/tracing_on
fio "${job[@]}" --filename="$loopdev" >/dev/null
echo 0 > $tr/tracing_on; echo 0 > $sysblk/trace/enable
mkdir "$work/kernel"
cp $tr/trace "$work/kernel/ftrace.txt"
echo nop > $tr/current_tracer; echo 1408 > $tr/buffer_size_kb
python3 "$root/tools/ftrace2blktrace.py" "$work/kernel/ftrace.txt" "$work/kernel" kernel
report kernel-loop "$work/kernel" kernel
