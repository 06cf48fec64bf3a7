#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# 60,000 random 4 KiB writes into a fresh fallocated 512 MiB file through the mount, verified.
set -e
B=$REPO/build/bin
IMG=/dev/shm/frag.img; MNT=/tmp/fragmnt
umount $MNT 2>/dev/null || true
rm -f $IMG; truncate -s 2G $IMG
$B/mkfs.biofs -q $IMG >/dev/null 2>&1 || $B/mkfs.biofs $IMG >/dev/null
mkdir -p $MNT
$B/biofs emu:$IMG $MNT
cd /tmp
fallocate -l 512M $MNT/f
fio --name=frag --filename=$MNT/f --rw=randwrite --bs=4k --direct=1 --ioengine=psync --size=512M \
    --number_ios=60000 --randrepeat=1 --norandommap=0 --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --fallocate=none --output-format=terse --minimal | awk -F';' '{print "write iops", $49, "errors", $5}'
rm -f /tmp/frag-*verify.state
$B/biofs-stat $MNT 2>/dev/null | head -3 || true
stat -c 'blocks %b size %s' $MNT/f
umount $MNT
$B/fsck.biofs -n $IMG; echo "fsck rc $?"
$B/biofs emu:$IMG $MNT
fio --name=frag --filename=$MNT/f --rw=randwrite --bs=4k --size=512M --number_ios=60000 --randrepeat=1 \
    --verify=crc32c --verify_only=1 --direct=1 --output-format=terse --minimal | awk -F';' '{print "verify after remount: errors", $5}'
umount $MNT
rm -f $IMG
