#!/bin/bash
# A/B of the emulated namespace's write cache for tar -x into a new directory of an 8 GiB image:
# emu:IMG,vwc against emu:IMG,vwc=through, rounds alternating, each beside passthrough_hp;
# "slow": the daemons in a blkio cgroup that limits the disk to 1500 read and 1500 write IOPS.
set -e
out=${1:-/var/tmp/ab-extract}   # run from the repository root, as root
mkdir -p "$out" /sys/fs/cgroup/blkio/slow
dev=$(lsblk -no MAJ:MIN "$(findmnt -no SOURCE -T /var/tmp)" | tr -d ' ')
echo "$dev 1500" > /sys/fs/cgroup/blkio/slow/blkio.throttle.write_iops_device
echo "$dev 1500" > /sys/fs/cgroup/blkio/slow/blkio.throttle.read_iops_device
for disk in fast slow; do
  for r in 1 2 3; do
    for opts in vwc vwc=through; do
      o="$out/$disk-$opts-r$r"
      cg=/sys/fs/cgroup/blkio/$disk; mkdir -p $cg
      sh -c "echo \$\$ > $cg/cgroup.procs; exec tools/biofs-workload --extract-matrix --rounds 1 --fs biofs,hp \
        --hp /opt/biofs-libfuse/bin/passthrough_hp --sizes 8G --places new --extract-work /var/tmp/xm \
        --work /var/tmp/xm --emu-opts $opts --out $o" > "$o.log" 2>&1
      grep "| disk |" "$o/extract.md" | sed "s/^/$disk $opts r$r /"
    done
  done
done
