#!/usr/bin/env bash
# Boots a Debian kernel (tests/qemu/guest-kernel.sh; unstable's by default) under QEMU (TCG:
# software emulation) with an emulated NVMe controller over a raw image file, runs one command
# inside, and exits with its status.
# The guest sees the namespace as /dev/nvme0n1 and its passthrough char device /dev/ng0n1; the
# same controller's namespace 2 (/dev/ng0n2, 64 MiB) is on a drive QEMU throttles to 200 commands
# a second, so that its commands stay in flight long enough for a controller reset to catch them.
# The command's binary and every shared library it needs are copied into the initramfs.
#
# Usage: tests/qemu/run-in-guest.sh [--kernel unstable|backports|stable] [--disk-mb N] [--lba 512|4096] \
#          [--timeout S] [--cache DIR] [--append ARGS] [--add FILE]... -- BINARY [ARGS...]
# --add puts more programs (with their libraries) beside BINARY in /test, for a BINARY that is
# a script running several of them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
disk_mb=256 lba=512 timeout_s=600 cache="$here/../../build/qemu-cache" kernel=unstable append=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) kernel=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    --disk-mb) disk_mb=$2; shift 2 ;;
    --lba) lba=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --add) extra+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "run-in-guest: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ $# -ge 1 ] || { echo "run-in-guest: no command given (… -- BINARY ARGS)" >&2; exit 2; }
bin=$(command -v "$1") || { echo "run-in-guest: '$1' not found" >&2; exit 2; }
shift
for tool in qemu-system-x86_64 busybox cpio; do
  command -v "$tool" >/dev/null || { echo "run-in-guest: $tool missing (tools/install-deps.sh)" >&2; exit 2; }
done

"$here/guest-kernel.sh" "$cache" "$kernel"
kcache="$cache/$kernel"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,modules,test}

cp "$(command -v busybox)" "$root/bin/busybox"
for app in sh mount umount insmod sleep poweroff cat ls echo mkdir mv grep kill uname awk cut tr head tail ip ln dd dmesg sync; do ln -s busybox "$root/bin/$app"; done
cp "$kcache"/modules/*.ko "$root/modules/"
cp "$kcache/modules.order" "$root/modules.order"

# The binary and its shared libraries, each at its own path.
copy_with_path() { mkdir -p "$root$(dirname "$1")"; cp -L "$1" "$root$1"; }
for prog in "$bin" "${extra[@]}"; do
  cp "$prog" "$root/test/$(basename "$prog")"
  for lib in $( (ldd "$prog" 2>/dev/null || true) | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}'); do
    copy_with_path "$lib"
  done
done

# The command line, quoted for the guest's sh.
cmd="/test/$(basename "$bin")"
for a in "$@"; do cmd+=" '${a//\'/\'\\\'\'}'"; done

cat > "$root/init" <<INIT
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
for m in \$(cat /modules.order); do
  args=""
  [ "\$m" = nvme.ko ] && args="poll_queues=1"  # so IORING_SETUP_IOPOLL has queues to poll
  insmod /modules/\$m \$args 2>/dev/null || echo "guest: insmod \$m failed"
done
i=0
while { [ ! -e /dev/ng0n1 ] || [ ! -e /dev/ng0n2 ]; } && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done
[ -e /dev/ng0n1 ] && [ -e /dev/ng0n2 ] || echo "guest: /dev/ng0n1 and /dev/ng0n2 did not appear"
# The kernel numbers namespaces in the order its parallel scan finds them: namespace 1 is made
# /dev/ng0n1 (and /dev/nvme0n1) whatever number it got.
if [ "\$(cat /sys/block/nvme0n1/nsid 2>/dev/null)" = 2 ]; then
  for d in ng0n nvme0n; do mv /dev/\${d}1 /dev/\${d}x; mv /dev/\${d}2 /dev/\${d}1; mv /dev/\${d}x /dev/\${d}2; done
  echo "guest: namespace 2 was found first; /dev/ng0n1 is namespace 1 again"
fi
cd /test
$cmd
echo "BIOFS_GUEST_EXIT=\$?"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"

truncate -s "${disk_mb}M" "$work/nvme.img"
truncate -s 64M "$work/slow.img"
log="$work/console.log"
set +e
# One host thread for both vCPUs: with multi-threaded TCG a 7.2 guest once oopsed at boot on an
# int3 left by the kernel's text patching (sched_clock_cpu), which another vCPU still ran.
timeout "$timeout_s" qemu-system-x86_64 -accel tcg,thread=single -m 1024 -smp 2 -nographic -no-reboot \
  -kernel "$kcache/vmlinuz" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 $append" \
  -drive "file=$work/nvme.img,if=none,id=nvm,format=raw" \
  -drive "file=$work/slow.img,if=none,id=slow,format=raw,throttling.iops-total=200" \
  -device "nvme,id=nvme0,serial=biofs0001,drive=nvm,logical_block_size=$lba,physical_block_size=$lba" \
  -device "nvme-ns,bus=nvme0,nsid=2,drive=slow,logical_block_size=$lba,physical_block_size=$lba" \
  </dev/null > "$log" 2>&1
qemu_rc=$?
set -e
cp "$log" "$cache/last-console.log"  # the raw console, for a guest that said nothing useful
# What the guest printed: everything after the firmware's screen, without terminal codes.
sed -e 's/\r$//' -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e 's/\x1bc//g' "$log" |
  sed -n '/Booting from ROM/,$p' | tail -n +2 | grep -v '^BIOFS_GUEST_EXIT=' || true
rc=$(sed -n 's/^BIOFS_GUEST_EXIT=\([0-9]*\).*/\1/p' "$log" | tail -n 1)
if [ -z "$rc" ]; then
  if [ "$qemu_rc" = 124 ]; then echo "run-in-guest: the guest did not finish in ${timeout_s}s" >&2; else echo "run-in-guest: the guest ended without reporting (qemu exit $qemu_rc)" >&2; fi
  exit 1
fi
exit "$rc"
