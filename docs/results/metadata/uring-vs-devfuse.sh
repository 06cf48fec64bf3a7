#!/usr/bin/env bash
# Metadata rates through biofs against ext4 on a loop device of the same size (issue 11 §4):
# create FILES empty files in one directory, stat them after the kernel's dentry and inode
# caches are dropped (every stat is a lookup that reaches the filesystem), then unlink them.
# Layers alternate ext4, biofs, biofs, ext4 per round, each on a fresh image on the same disk;
# biofs runs on `emu:IMG,vwc` with its default options (plus BIOFS_OPTS). Prints each run, then
# the medians and biofs/ext4 per phase, and the daemon's CPU per operation. Needs root and
# build/bin. The file operations come from one Python process (about 1 µs each of its own).
# Usage: tools/bench-metadata.sh [ROUNDS] [FILES]   (default: 3 15000)
set -euo pipefail
cd /work/main
rounds=${1:-3}; files=${2:-15000}
bin=$PWD/build/bin; work=$(mktemp -d /var/tmp/biofs-metadata-XXXXXX); mkdir -p "$work/m"
loopdev=""
cleanup() {
  mountpoint -q "$work/m" && { fusermount3 -u "$work/m" 2>/dev/null || umount "$work/m"; }
  [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime, clock ticks

# One pass over the mounted directory: prints "create/s stat/s unlink/s".
phases() {
  python3 - "$1" "$files" <<'EOF'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
names = [os.path.join(d, "f%06d" % i) for i in range(n)]
t0 = time.perf_counter()
for p in names:
    os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
t1 = time.perf_counter()
os.sync()
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("2\n")
t2 = time.perf_counter()
for p in names:
    os.stat(p)
t3 = time.perf_counter()
for p in names:
    os.unlink(p)
t4 = time.perf_counter()
print("%.0f %.0f %.0f" % (n / (t1 - t0), n / (t3 - t2), n / (t4 - t3)))
EOF
}

results=$work/results.txt
for r in $(seq "$rounds"); do
  for layer in devfuse uring uring devfuse; do
    rm -f "$work/img"; truncate -s 2G "$work/img"
    if false; then
      mkfs.ext4 -q -F "$work/img"
      loopdev=$(losetup -f --show "$work/img")
      mount "$loopdev" "$work/m"
      mkdir "$work/m/d"
      read -r c s u < <(phases "$work/m/d")
      umount "$work/m"; losetup -d "$loopdev"; loopdev=""
      ticks=""
    else
      "$bin/mkfs.biofs" -q "$work/img"
      $bin/biofs "emu:$work/img,vwc" "$work/m" -o $( [ $layer = uring ] && echo fuse_uring=on || echo fuse_uring=off )
      pid=$(pgrep -f -n "emu:$work/img,vwc")
      mkdir "$work/m/d"
      t0=$(cpu "$pid")
      read -r c s u < <(phases "$work/m/d")
      ticks=$(( $(cpu "$pid") - t0 ))
      fusermount3 -u "$work/m"
      while pgrep -f "emu:$work/img,vwc" >/dev/null; do sleep 0.1; done
    fi
    # Daemon CPU per operation (3 per file): ticks are 10 ms.
    per_op=${ticks:+$(echo "scale=1; $ticks * 10000 / (3 * $files)" | bc)}
    printf 'round %s %-6s create %7s/s  stat %7s/s  unlink %7s/s  %s\n' "$r" "$layer" "$c" "$s" "$u" \
      "${per_op:+daemon cpu ${per_op} us/op}"
    echo "$layer $c $s $u" >> "$results"
  done
done

python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for layer in ("devfuse", "uring"):
    cols = [[float(r[i]) for r in rows if r[0] == layer] for i in (1, 2, 3)]
    med[layer] = [statistics.median(c) for c in cols]
print("medians      create/s   stat/s  unlink/s")
for layer in ("devfuse", "uring"):
    print("%-10s %9.0f %9.0f %9.0f" % (layer, *med[layer]))
print("%-10s %9.2f %9.2f %9.2f" % ("uring/dev", *(b / e for b, e in zip(med["uring"], med["devfuse"]))))
EOF
