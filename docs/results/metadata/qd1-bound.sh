#!/usr/bin/env bash
# Depth-1 4 KiB random reads (fio psync, O_DIRECT) on the disk: the raw file, biofs on an
# emu:IMG,vwc image in the same folder, and tools/fuse-null (a FUSE server that answers a read
# with zeros at once: the FUSE round trip alone, on biofs's transport). Layers alternated per
# round; prints IOPS, fio's mean completion latency, fio's own CPU per I/O (user + system: on
# the raw file, the whole kernel read) and, for the daemons, their CPU per I/O.
# The bound it gives: biofs cannot beat raw latency + null latency per read, nor spend less
# CPU than fuse-null's plus the raw read's.
# usage: qd1-bound.sh ROUNDS SECONDS      (root; files in WORK_DIR, default /var/tmp)
set -euo pipefail
rounds=${1:-3} secs=${2:-5}
bin=$(cd "$(dirname "$0")/../../.." && pwd)/build/bin
work=$(mktemp -d "${WORK_DIR:-/var/tmp}/qd1-bound-XXXXXX"); mkdir -p "$work/m"
trap 'mountpoint -q "$work/m" && umount "$work/m"; rm -rf "$work"' EXIT
fio_read() {  # FILE: prints "IOPS CLAT_US IOS FIO_CPU_US_PER_IO"
  fio --name=r --filename="$1" --size=1G --rw=randread --bs=4k --ioengine=psync --direct=1 \
      --time_based --runtime="$secs" --output-format=json 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys
j=json.load(sys.stdin)["jobs"][0]; r=j["read"]
cpu_s=(j["usr_cpu"]+j["sys_cpu"])/100*j["job_runtime"]/1000
print(r["iops"], r["clat_ns"]["mean"]/1000, r["total_ios"], cpu_s/r["total_ios"]*1e6)'
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
dd if=/dev/urandom of="$work/raw" bs=1M count=1024 status=none
truncate -s 2G "$work/img"; "$bin/mkfs.biofs" -q "$work/img"
"$bin/biofs" "emu:$work/img,vwc" "$work/m"
dd if=/dev/urandom of="$work/m/f" bs=1M count=1024 status=none; umount "$work/m"
for r in $(seq "$rounds"); do
  for layer in raw biofs null; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    pid="" file="$work/m/f"
    case $layer in
      raw) file="$work/raw" ;;
      biofs) "$bin/biofs" "emu:$work/img,vwc" "$work/m"; pid=$(pgrep -n -f "emu:$work/img,vwc") ;;
      null) ("$bin/fuse-null" "$work/m" &)
            for _ in $(seq 100); do mountpoint -q "$work/m" && break; sleep 0.05; done
            pid=$(pgrep -n -f "fuse-null $work/m"); truncate -s 1G "$file" ;;
    esac
    c0=0; [ -n "$pid" ] && c0=$(cpu "$pid")
    read -r iops clat ios fcpu < <(fio_read "$file")
    extra=""; [ -n "$pid" ] && extra=$(echo "scale=1; ($(cpu "$pid") - $c0) * 10000 / $ios" | bc)
    printf 'round %s %-6s %9.0f IOPS  clat %6.1f us  fio %5.1f us/IO  %s\n' "$r" "$layer" "$iops" "$clat" "$fcpu" \
      "${extra:+daemon $extra us/IO}"
    [ -n "$pid" ] && { umount "$work/m"; while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; }
  done
done
