#!/usr/bin/env bash
# dbench (Debian's dbench 4.0, its client.txt load) on ext4 (loop device) and on biofs mounts,
# each run on a fresh 2 GiB image in WORK_DIR (default /dev/shm), layers alternated per round.
# Prints dbench's throughput and, for biofs and fuse-null, the daemon's CPU seconds.
# usage: dbench-ab.sh ROUNDS SECONDS CLIENTS LAYER...   LAYER: ext4 | biofs[:OPTIONS] | null[:dev]
set -euo pipefail
rounds=$1 secs=$2 clients=$3; shift 3
bin=$(cd "$(dirname "$0")/../../.." && pwd)/build/bin
work=$(mktemp -d "${WORK_DIR:-/dev/shm}/dbench-XXXXXX"); mkdir -p "$work/m"
trap 'mountpoint -q "$work/m" && umount "$work/m"; rm -rf "$work"' EXIT
for r in $(seq "$rounds"); do
  for layer in "$@"; do
    rm -f "$work/img"; truncate -s 2G "$work/img"; pid=""
    if [ "$layer" = ext4 ]; then
      mkfs.ext4 -q -F "$work/img"; mount -o loop "$work/img" "$work/m"
    elif [[ $layer == null* ]]; then  # tools/fuse-null: the FUSE bound, a server doing no work
      transport=${layer#null}; transport=${transport#:}
      ("$bin/fuse-null" "$work/m" ${transport:+--transport "$transport"} &)
      for _ in $(seq 100); do mountpoint -q "$work/m" && break; sleep 0.05; done
      pid=$(pgrep -n -f "fuse-null $work/m")
    else
      opts=${layer#biofs}; opts=${opts#:}
      "$bin/mkfs.biofs" -q "$work/img"
      "$bin/biofs" "emu:$work/img,vwc" "$work/m" ${opts:+-o "$opts"}
      pid=$(pgrep -n -f "emu:$work/img,vwc")
    fi
    t0=0; [ -n "$pid" ] && t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    mb=$(cd "$work/m" && dbench -c /usr/share/dbench/client.txt -D "$work/m" -t "$secs" "$clients" 2>&1 |
         awk '/^Throughput/ {print $2}')
    cpu=""; [ -n "$pid" ] && cpu="daemon cpu $(echo "scale=1; ($(awk '{print $14+$15}' /proc/$pid/stat) - $t0) / 100" | bc) s"
    printf 'round %s %-40s %8s MB/s  %s\n' "$r" "$layer" "$mb" "$cpu"
    umount "$work/m"; [ -n "$pid" ] && while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  done
done
