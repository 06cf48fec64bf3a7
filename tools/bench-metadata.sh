#!/usr/bin/env bash
# Metadata rates, two filesystems A/B (docs/results.md, "Metadata against ext4"): create FILES
# empty files in one directory, stat them after the kernel's dentry and inode caches are dropped (every stat is a lookup that
# reaches the filesystem), then unlink them; then tar -x of a tree into a new directory (the tar
# cliff, docs/results.md "The tar cliff": /usr/include without boost, EXTRACT_TREE=DIR for another, EXTRACT_TREE= to
# leave it out). Runs alternate A, B, B, A per round, each on a fresh sparse image of
# IMAGE_SIZE (2G) on the same disk (WORK_DIR=/dev/shm: in memory). Prints each run, then the medians and B/A per phase, and
# for biofs the daemon's CPU per operation. Needs root and build/bin. The file operations come
# from one Python process (about 1 µs each of its own).
#
# A layer is `ext4` (on a loop device) or `biofs[@BINARY][:OPTIONS]` (on `emu:IMG,$EMU_OPTS`,
# EMU_OPTS=vwc by default; the binary defaults to build/bin/biofs, the options to none), e.g.
#   tools/bench-metadata.sh 5 15000                                   # ext4 against biofs
#   tools/bench-metadata.sh 3 15000 biofs:fuse_uring=off biofs:fuse_uring=on
#   tools/bench-metadata.sh 4 15000 biofs@/tmp/old-biofs biofs        # two builds
# Usage: tools/bench-metadata.sh [ROUNDS] [FILES] [LAYER_A] [LAYER_B]   (default: 3 15000 ext4 biofs)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; files=${2:-15000}; layer_a=${3:-ext4}; layer_b=${4:-biofs}
[ "$layer_a" != "$layer_b" ] || { echo "bench-metadata: the two layers are the same: $layer_a" >&2; exit 2; }
work=$(mktemp -d "${WORK_DIR:-/var/tmp}/biofs-metadata-XXXXXX"); mkdir -p "$work/m"
image_size=${IMAGE_SIZE:-2G}; emu_opts=${EMU_OPTS:-vwc}
tree=${EXTRACT_TREE-/usr/include}
loopdev=""
cleanup() {
  mountpoint -q "$work/m" && { fusermount3 -u "$work/m" 2>/dev/null || umount "$work/m"; }
  [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "$tree" ]; then  # made once, outside the filesystems under test
  tar -C "$tree" --exclude=./boost -cf "$work/tree.tar" . || [ $? = 1 ]  # 1: a file changed as it was read
fi

# tar -x of the tree into DIR/x: seconds, or - without a tree.
extract() {
  [ -n "$tree" ] || { echo -; return; }
  mkdir "$1/x"
  local t0; t0=$(date +%s.%N)
  tar -C "$1/x" -xf "$work/tree.tar"
  printf '%.2f\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
}
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

# Mounts the layer on $work/m, runs the phases and the extract, unmounts; prints "c s u ticks x".
run_layer() {
  local spec=$1 c s u x ticks=""
  rm -f "$work/img"; truncate -s "$image_size" "$work/img"
  if [ "$spec" = ext4 ]; then
    mkfs.ext4 -q -F "$work/img"
    loopdev=$(losetup -f --show "$work/img")
    mount "$loopdev" "$work/m"
    mkdir "$work/m/d"
    read -r c s u < <(phases "$work/m/d")
    x=$(extract "$work/m")
    umount "$work/m"; losetup -d "$loopdev"; loopdev=""
  elif [[ "$spec" == biofs* ]]; then
    local rest=${spec#biofs} bin=$PWD/build/bin/biofs opts=""
    if [[ "$rest" == @* ]]; then bin=${rest#@}; bin=${bin%%:*}; rest=${rest#@"$bin"}; fi
    [[ "$rest" == :* ]] && opts=${rest#:}
    "$PWD/build/bin/mkfs.biofs" -q "$work/img"
    "$bin" "emu:$work/img,$emu_opts" "$work/m" ${opts:+-o "$opts"}
    local pid; pid=$(pgrep -f -n "emu:$work/img,$emu_opts")
    mkdir "$work/m/d"
    local t0; t0=$(cpu "$pid")
    read -r c s u < <(phases "$work/m/d")
    ticks=$(( $(cpu "$pid") - t0 ))
    x=$(extract "$work/m")
    fusermount3 -u "$work/m"
    while pgrep -f "emu:$work/img,$emu_opts" >/dev/null; do sleep 0.1; done
  else
    echo "bench-metadata: unknown layer '$spec' (ext4 or biofs[@BINARY][:OPTIONS])" >&2; exit 2
  fi
  echo "$c $s $u ${ticks:--} $x"
}

results=$work/results.txt
for r in $(seq "$rounds"); do
  for which in A B B A; do
    spec=$layer_a; [ "$which" = B ] && spec=$layer_b
    read -r c s u ticks x < <(run_layer "$spec")
    per_op=""  # daemon CPU per operation (3 per file); ticks are 10 ms
    [ "$ticks" != - ] && per_op="daemon cpu $(echo "scale=1; $ticks * 10000 / (3 * $files)" | bc) us/op"
    printf 'round %s %s %-24s create %7s/s  stat %7s/s  unlink %7s/s  extract %6s s  %s\n' "$r" "$which" "$spec" "$c" "$s" "$u" "$x" "$per_op"
    echo "$which $c $s $u $x" >> "$results"
  done
done

python3 - "$results" "$layer_a" "$layer_b" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
num = lambda v: float("nan") if v == "-" else float(v)
med = {w: [statistics.median(num(r[i]) for r in rows if r[0] == w) for i in (1, 2, 3, 4)] for w in "AB"}
print("medians %-24s create/s    stat/s  unlink/s extract s  (B/A: rates, and the extract's time)" % "")
for w, name in (("A", sys.argv[2]), ("B", sys.argv[3])):
    print("%s %-30s %9.0f %9.0f %9.0f %9.2f" % (w, name, *med[w]))
print("%-32s %9.2f %9.2f %9.2f %9.2f" % ("B/A", *(b / a for b, a in zip(med["B"], med["A"]))))
EOF
