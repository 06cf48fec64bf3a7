#!/bin/sh
# Runs inside the QEMU guest (tests/qemu/run-in-guest.sh --add …): every passthrough check against
# the real kernel's /dev/ng0n1, one PASS/FAIL line each; exits non-zero if any failed.
#   driver        the driver's tests over io_uring passthrough (passthrough_guest_test.cc), the
#                 doctest cases chosen by $1
#   biofs-bench   briefly on nvme:/dev/ng0n1
#   fio witness   fio's own io_uring_cmd engine verifies the 0xa5 pattern the driver left at 64 MiB
#   stack         mkfs.biofs, a mount on nvme:/dev/ng0n1 over FUSE-over-io_uring (the reactor;
#                 the kernel command line sets fuse.enable_uring=1), fio with crc32c verification
#                 through it (psync and io_uring, direct and buffered), unmount, fsck; again with
#                 the toggles flipped over /dev/fuse
#   stack-OPT     the same fio verification on nvme:/dev/ng0n1,OPT for regfiles, fixedbufs,
#                 iopoll and sqpoll, each with the kernel's evidence that OPT was in force
#   fuseblk-sync  a fuseblk mount (blkdev=/dev/nvme0n1): sync(2) reaches the daemon, so after a
#                 kill -9 the tree is there, fsck clean
#   retry         controller resets while fio writes through a mount on ng0n2 (a namespace QEMU
#                 throttles): commands the reset aborts are sent again (nvme_max_retries) and no
#                 data is lost
#   fabric        an NVMe-oF namespace (nvmet-tcp over loopback, `nvme connect`): mkfs, a mount,
#                 fio verification, fsck, a remount with toggles flipped, fsck
#   stripe-local-fabric  the same on stripe:nvme:/dev/ng0n1+nvme:FABRIC: one mount over both
# $2 (optional): the checks to run, space-separated (default: all of them).
cd /test || exit 1
export PATH=/test:$PATH
failed=0
wanted=${2:-"driver biofs-bench fio-witness stack stack-regfiles stack-fixedbufs stack-iopoll stack-sqpoll fuseblk-sync retry fabric stripe-local-fabric"}
kernel=$(uname -r)
kver=$(uname -r | awk -F. '{print $1 * 100 + $2}')
check() {
  name=$1
  shift
  case " $wanted " in *" $name "*) ;; *) return 0 ;; esac
  start=$(date +%s)
  if "$@" > /tmp/check.out 2>&1; then
    echo "PASS $name ($(( $(date +%s) - start )) s)"
    tail -n 3 /tmp/check.out
  else
    echo "FAIL $name ($(( $(date +%s) - start )) s)"
    cat /tmp/check.out
    failed=1
  fi
}
echo "guest: Linux $kernel"

# Mounts biofs on $1 in the foreground with options $2 (the caller unmounts and waits for it).
mnt=/tmp/biofs
mkdir -p $mnt
fs_mount() {
  ./biofs "$1" $mnt -f -o "$2" &
  daemon=$!
  i=0
  while ! grep -qE " $mnt fuse(blk)?\.biofs " /proc/mounts; do
    i=$((i+1))
    [ $i -lt 300 ] || { echo "biofs did not mount"; return 1; }
    kill -0 $daemon 2>/dev/null || { echo "biofs exited before mounting"; return 1; }
    sleep 0.1
  done
}
fs_unmount() { umount $mnt && wait $daemon; }
# One counter or string of the mount's stats (the JSON in user.biofs.stats). getfattr asks for
# the size first: under I/O the JSON may grow before the read (ERANGE), so it asks again.
stat_of() {
  for i in 1 2 3 4 5; do
    json=$(getfattr --absolute-names --only-values -n user.biofs.stats $mnt 2>/dev/null) && break
  done
  echo "$json" | grep -o "\"$1\":[^,}]*" | head -n 1 | cut -d: -f2 | tr -d '"'
}
fio_verify() {  # $1: extra fio options (--verify_only to check an earlier run)
  extra=$1
  for job in "psync 1 randwrite 4k" "io_uring 1 write 128k" "io_uring 0 randwrite 8k"; do
    set -- $job
    ./fio --name=guest-$1-$2-$3 --directory=$mnt --ioengine=$1 --direct=$2 --rw=$3 --bs=$4 \
      --size=4M --numjobs=2 --iodepth=8 --verify=crc32c --verify_fatal=1 --randseed=7 --verify_state_save=0 \
      --group_reporting --output-format=terse $extra > /tmp/fio.out 2>&1 || { cat /tmp/fio.out; return 1; }
    echo "fio $1 direct=$2 $3 bs=$4 $extra: verified"
  done
}
# Interrupts taken by the QEMU controller's I/O queues (nvme0q1…; q0 is the admin queue).
nvme_irqs() { grep ' nvme0q[1-9]' /proc/interrupts | awk '{for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i} END {print s + 0}'; }

check driver ./passthrough_guest_test "-tc=${1:-*}"
check biofs-bench ./biofs-bench --dev nvme:/dev/ng0n1 --runtime 1 --quiet
check fio-witness ./fio --name=witness --filename=/dev/ng0n1 --ioengine=io_uring_cmd \
  --cmd_type=nvme --rw=write --bs=4k --size=1M --offset=64M --verify=pattern \
  --verify_pattern=0xa5 --verify_only=1 --verify_fatal=1 --output-format=terse

stack() {
  ./mkfs.biofs -f -q nvme:/dev/ng0n1 || return 1
  fs_mount nvme:/dev/ng0n1 "" || return 1
  fio_verify "" || return 1
  transport=$(stat_of transport)
  echo "fuse transport: $transport"
  if [ "$kver" -ge 614 ]; then  # FUSE-over-io_uring came with Linux 6.14
    [ "$transport" = reactor ] || { echo "expected the reactor (FUSE-over-io_uring) with fuse.enable_uring=1"; return 1; }
  else
    echo "Linux $kernel has no FUSE-over-io_uring (6.14 and later do): the stack runs over /dev/fuse"
  fi
  fs_unmount || return 1
  ./fsck.biofs -n nvme:/dev/ng0n1 || return 1
  fs_mount nvme:/dev/ng0n1 "bio_cache=off,tag_batch=off,split_check=fast,fuse_uring=off" || return 1
  fio_verify --verify_only || return 1
  [ "$(stat_of transport)" = /dev/fuse ] || { echo "fuse_uring=off gave $(stat_of transport), not /dev/fuse"; return 1; }
  fs_unmount || return 1
  ./fsck.biofs -n -v nvme:/dev/ng0n1
}
check stack stack

# The stack on nvme:/dev/ng0n1,$1, with the evidence that the option was in force.
option_stack() {
  opt=$1
  ./mkfs.biofs -f -q nvme:/dev/ng0n1 || return 1
  irqs=$(nvme_irqs)
  fs_mount "nvme:/dev/ng0n1,$opt" "" || return 1
  fio_verify "" || return 1
  case $opt in
    fixedbufs)
      n=$(stat_of fixed_buffer_cmds)
      echo "commands through fixed buffers: $n"
      [ "${n:-0}" -gt 0 ] || { echo "no command went through a registered buffer"; return 1; } ;;
    iopoll)  # requests run to completion by their FUSE thread went to its IOPOLL ring
      n=$(stat_of polled)
      echo "requests polled on IOPOLL rings: $n; I/O queue interrupts $(( $(nvme_irqs) - irqs )) for $(stat_of requests) commands"
      [ "${n:-0}" -gt 0 ] || { echo "no request was polled"; return 1; } ;;
    sqpoll)
      grep -l '^iou-sqp-' /proc/$daemon/task/*/comm > /dev/null || { echo "no SQPOLL thread in the daemon"; return 1; }
      echo "SQPOLL threads: $(cat /proc/$daemon/task/*/comm | grep -c '^iou-sqp-')" ;;
  esac
  fs_unmount || return 1
  ./fsck.biofs -n "nvme:/dev/ng0n1,$opt"
}
for opt in regfiles fixedbufs iopoll sqpoll; do
  if [ "$kver" -lt 612 ] && { [ $opt = fixedbufs ] || [ $opt = iopoll ]; }; then
    case " $wanted " in *" stack-$opt "*) echo "SKIP stack-$opt: Linux $kernel has no $opt for NVMe passthrough (6.12 and later do)" ;; esac
    continue
  fi
  check stack-$opt option_stack $opt
done

# sync(2) on a fuseblk mount, the kernel holding the namespace's block device: FUSE_SYNCFS
# reaches the daemon (daemon/syncfs.h), which commits; kill -9 then loses nothing.
fuseblk_sync() {
  ./mkfs.biofs -f -q nvme:/dev/ng0n1 || return 1
  fs_mount nvme:/dev/ng0n1 "blkdev=/dev/nvme0n1,commit=0" || return 1
  grep " $mnt " /proc/mounts
  grep -q "^/dev/nvme0n1 $mnt fuseblk.biofs " /proc/mounts || { echo "not a fuseblk mount of /dev/nvme0n1"; return 1; }
  mkdir $mnt/tree && echo durable > $mnt/tree/file || return 1
  sync
  kill -9 $daemon
  wait $daemon
  umount -l $mnt
  ./fsck.biofs -n nvme:/dev/ng0n1 || return 1
  fs_mount nvme:/dev/ng0n1 "" || return 1
  [ "$(cat $mnt/tree/file)" = durable ] || { echo "sync then kill -9 lost the tree"; return 1; }
  echo "sync, kill -9, mount: the tree is there"
  fs_unmount
}
check fuseblk-sync fuseblk_sync

# Controller resets under write load: each one aborts the commands in flight (the host's
# NVME_SC_HOST_ABORTED_CMD, or -EINTR/-EAGAIN from the char device); the driver sends them
# again and fio's verification finds every block it wrote. The writes go to namespace 2, whose
# drive QEMU throttles (run-in-guest.sh): fio keeps about 256 commands queued there, so every
# reset finds some in flight; on ng0n1 a command is in flight for microseconds and a reset
# caught one only by chance.
slow=/dev/ng0n2  # namespace 2 (run-in-guest.sh)
reset_writes() {  # $1: extra fio options
  ./fio --name=reset --directory=$mnt --ioengine=io_uring --direct=1 --rw=randwrite --bs=16k --size=2M \
    --numjobs=4 --iodepth=64 --verify=crc32c --verify_fatal=1 --randseed=3 --verify_state_save=0 \
    --group_reporting --output-format=terse $1 > /tmp/fio.out 2>&1
}
retry() {
  ./mkfs.biofs -f -q nvme:$slow || return 1
  fs_mount nvme:$slow "" || return 1
  reset_writes --do_verify=0 &
  writer=$!
  resets=0
  while kill -0 $writer 2>/dev/null && [ $resets -lt 10 ]; do
    sleep 0.2
    echo 1 > /sys/class/nvme/nvme0/reset_controller && resets=$((resets+1))
  done
  wait $writer || { cat /tmp/fio.out; return 1; }
  retried=$(stat_of retries)
  echo "controller resets during the writes: $resets, commands retried: $retried"
  [ "$resets" -gt 0 ] || { echo "fio ended before the first reset"; return 1; }
  [ "$retried" -gt 0 ] || { echo "no command was retried, though each reset found commands in flight"; return 1; }
  reset_writes --verify_only || { cat /tmp/fio.out; return 1; }
  echo "fio verified every block after the resets"
  fs_unmount || return 1
  ./fsck.biofs -n nvme:$slow
}
check retry retry

# NVMe over fabrics in one guest: the kernel's target (nvmet, nvmet-tcp) exports a namespace
# over loopback TCP through configfs, `nvme connect` attaches it as a second controller, and
# biofs runs on its passthrough char device like on the local one. Its queue limits are the
# fabric's, read from Identify; the kernel's own for the same namespace are printed beside.
fabric_dev=
fabric_attach() {
  mount -t configfs none /sys/kernel/config 2>/dev/null
  ip link set lo up || return 1
  dd if=/dev/zero of=/tmp/fabric.img bs=1M count=0 seek=256 2>/dev/null || return 1
  t=/sys/kernel/config/nvmet
  nqn=nqn.2026-12.org.biofs:fabric
  mkdir $t/subsystems/$nqn && echo 1 > $t/subsystems/$nqn/attr_allow_any_host || return 1
  mkdir $t/subsystems/$nqn/namespaces/1 || return 1
  echo /tmp/fabric.img > $t/subsystems/$nqn/namespaces/1/device_path
  echo 1 > $t/subsystems/$nqn/namespaces/1/buffered_io
  echo 1 > $t/subsystems/$nqn/namespaces/1/enable || return 1
  mkdir $t/ports/1 || return 1
  echo tcp > $t/ports/1/addr_trtype; echo ipv4 > $t/ports/1/addr_adrfam
  echo 127.0.0.1 > $t/ports/1/addr_traddr; echo 4420 > $t/ports/1/addr_trsvcid
  ln -s $t/subsystems/$nqn $t/ports/1/subsystems/$nqn || return 1
  ./nvme connect -t tcp -a 127.0.0.1 -s 4420 -n $nqn \
    --hostnqn=nqn.2014-08.org.nvmexpress:uuid:5f0c7d3e-8b1a-4c2e-9d6f-3a7b1e2c4d5f --hostid=5f0c7d3e-8b1a-4c2e-9d6f-3a7b1e2c4d5f || { dmesg | tail -n 5; return 1; }
  for c in /sys/class/nvme/nvme*; do
    [ "$(cat $c/transport)" = tcp ] || continue
    ctrl=$(basename $c)
    i=0
    while [ -z "$fabric_dev" ] && [ $i -lt 100 ]; do
      for g in /dev/ng${ctrl#nvme}n*; do [ -e "$g" ] && fabric_dev=$g; done
      i=$((i+1)); sleep 0.1
    done
  done
  [ -n "$fabric_dev" ] || { echo "no passthrough device for the fabric controller"; ls /dev; return 1; }
  blk=/sys/block/$(ls /sys/block | grep "^nvme${ctrl#nvme}n\|^nvme.*c${ctrl#nvme}n" | head -n 1)/queue
  kernel_limits="the kernel's limits for $fabric_dev ($(cat /sys/class/nvme/$ctrl/transport)):\
 max_hw_sectors_kb $(cat $blk/max_hw_sectors_kb), max_segments $(cat $blk/max_segments),\
 virt_boundary_mask $(cat $blk/virt_boundary_mask 2>/dev/null || echo ?)"
}
fabric() {
  fabric_attach || return 1
  ./mkfs.biofs -f -q "nvme:$fabric_dev" || return 1
  fs_mount "nvme:$fabric_dev" verbose || return 1
  fio_verify "" || return 1
  fabric_boundary=$(stat_of virt_boundary_mask)
  biofs_limits="biofs's: mdts $(stat_of mdts_bytes) B, max_sectors $(stat_of max_sectors), max_segments\
 $(stat_of max_segments), virt_boundary_mask $(stat_of virt_boundary_mask)"
  fs_unmount || return 1
  ./fsck.biofs -n "nvme:$fabric_dev" || return 1
  fs_mount "nvme:$fabric_dev" "bio_cache=off,tag_batch=off" || return 1
  fio_verify --verify_only || return 1
  fs_unmount || return 1
  ./fsck.biofs -n -v "nvme:$fabric_dev" || return 1
  echo "$kernel_limits"
  echo "$biofs_limits"
  # biofs keeps 7.x's rule: no virt boundary over a fabric. 6.12 still gave every NVMe queue the
  # 4 KiB PRP boundary (its passthrough copies a buffer that crosses it), so there the two differ.
  if [ "$kver" -ge 700 ]; then
    [ "$(cat $blk/virt_boundary_mask)" = "$fabric_boundary" ] || { echo "biofs's virt boundary is not the kernel's"; return 1; }
  else
    echo "Linux $kernel keeps the PRP virt boundary over fabrics too (7.x drops it, as biofs does)"
  fi
}
check fabric fabric

# One mount over the local controller and the fabric one: the stripe's clones meet two real
# controllers with different limits (PRP boundary and 504 KiB here, none and 4 MiB there).
stripe_local_fabric() {
  [ -n "$fabric_dev" ] || fabric_attach || return 1
  dev="stripe:nvme:/dev/ng0n1+nvme:$fabric_dev"
  ./mkfs.biofs -f -q "$dev" || return 1
  fs_mount "$dev" verbose || return 1
  fio_verify "" || return 1
  fs_unmount || return 1
  ./fsck.biofs -n "$dev" || return 1
  fs_mount "$dev" "" || return 1
  fio_verify --verify_only || return 1
  echo "stripe clones: $(stat_of clones)"
  fs_unmount || return 1
  ./fsck.biofs -n -v "$dev"
}
check stripe-local-fabric stripe_local_fabric
exit $failed
