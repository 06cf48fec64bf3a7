#!/usr/bin/env bash
# Where a metadata operation's time goes (issue 48's first step; docs/results.md, "Metadata per
# operation"): for ext4 on a loop device, biofs (emu:IMG,vwc), passthrough_hp (over a
# directory of an ext4 loop mount) and fuse-null (a FUSE server doing no work, on biofs's
# transport: the bound), each of five operations on FILES files:
#   create   open(O_CREAT|O_EXCL) + close of an empty file
#   stat     stat() after the kernel's dentry and inode caches are dropped
#   unlink   unlink()
#   tar-x    tar -x of /usr/include (EXTRACT_TREE), per file in the archive
#   tar-c    tar -c of that tree from a fresh mount (cold caches), per file, data read through
# and prints per layer and operation: wall time per operation, FUSE requests per operation by
# opcode (the kernel's fuse:fuse_request_send tracepoint, tools/bpf/fuse-ops.bt), the kernel's
# round trip per request, and the daemon's CPU per request (utime+stime over the phase).
# One run per layer, in the order given; root; images on WORK_DIR (/var/tmp).
#   tools/bench-fuse-ops.sh [FILES] [LAYERS]     (default: 5000 "ext4 biofs hp null"; biofs:OPTIONS
#                                                 mounts with -o OPTIONS, e.g. biofs:writeback_cache;
#                                                 null:dev serves /dev/fuse, not the reactor)
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-5000}
layers=${2:-ext4 biofs hp null}
hp=${PASSTHROUGH_HP:-/opt/biofs-libfuse/bin/passthrough_hp}
tree=${EXTRACT_TREE:-/usr/include}
work=$(mktemp -d "${WORK_DIR:-/var/tmp}/biofs-fuse-ops-XXXXXX")
mkdir -p "$work/m" "$work/lower"
loopdev=""
tracer=""
cleanup() {
  [ -n "$tracer" ] && kill -INT "$tracer" 2>/dev/null
  mountpoint -q "$work/m" && { fusermount3 -u "$work/m" 2>/dev/null || umount "$work/m"; }
  mountpoint -q "$work/lower" && umount "$work/lower"
  [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
tar -C "$tree" --exclude=./boost -cf "$work/tree.tar" . 2>/dev/null || [ $? = 1 ]
entries=$(tar -tf "$work/tree.tar" | wc -l)
cpu() { [ -n "$1" ] && awk '{print $14 + $15}' "/proc/$1/stat" || echo 0; }
drop_caches() { sync; echo 2 > /proc/sys/vm/drop_caches; }

mount_layer() {  # LAYER: mounts on $work/m (formatting when FRESH=1), sets $pid (the daemon, or empty)
  local layer=$1
  pid=""
  case $layer in
    ext4)
      [ "${FRESH:-0}" = 1 ] && { rm -f "$work/img"; truncate -s 2G "$work/img"; mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$work/img"; }
      loopdev=$(losetup -f --show "$work/img"); mount "$loopdev" "$work/m" ;;
    biofs*)  # biofs[:OPTIONS]
      [ "${FRESH:-0}" = 1 ] && { rm -f "$work/img"; truncate -s 2G "$work/img"; build/bin/mkfs.biofs -q "$work/img"; }
      local opts=${layer#biofs}; opts=${opts#:}
      build/bin/biofs "emu:$work/img,vwc" "$work/m" ${opts:+-o "$opts"}
      pid=$(pgrep -n -f "biofs emu:$work/img") ;;
    null*)  # null[:dev]: tools/fuse-null, a server doing no work on biofs's reactor (or /dev/fuse)
      local transport=${layer#null}; transport=${transport#:}
      (build/bin/fuse-null "$work/m" ${transport:+--transport "$transport"} &)
      for _ in $(seq 100); do mountpoint -q "$work/m" && break; sleep 0.05; done
      pid=$(pgrep -n -f "fuse-null $work/m") ;;
    hp)
      if [ "${FRESH:-0}" = 1 ]; then
        rm -f "$work/img"; truncate -s 2G "$work/img"; mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$work/img"
      fi
      loopdev=$(losetup -f --show "$work/img"); mount "$loopdev" "$work/lower"
      (ulimit -n "$(ulimit -Hn)"; "$hp" --nopassthrough "$work/lower" "$work/m" &)
      for _ in $(seq 100); do mountpoint -q "$work/m" && break; sleep 0.05; done
      pid=$(pgrep -n -f "passthrough_hp --nopassthrough $work/lower") ;;
  esac
}
unmount_layer() {
  if [ "$1" = ext4 ]; then umount "$work/m"; else fusermount3 -u "$work/m"; fi
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  if mountpoint -q "$work/lower"; then umount "$work/lower"; fi
  if [ -n "$loopdev" ]; then losetup -d "$loopdev"; loopdev=""; fi
}

# Runs "$@" as one phase: prints "SECONDS TICKS" and leaves the tracer's counts in $work/bt.out.
phase() {
  local fuse=$1; shift
  if [ "$fuse" = 1 ]; then
    # A background job of a script ignores SIGINT; bpftrace needs it to print its maps and end.
    python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
      bpftrace tools/bpf/fuse-ops.bt > "$work/bt.out" 2>&1 &
    tracer=$!
    # BEGIN runs once every probe is attached
    for _ in $(seq 400); do grep -q "^Tracing" "$work/bt.out" 2>/dev/null && break; sleep 0.05; done
  fi
  local c0 t0 t1 c1 own
  c0=$(cpu "$pid"); t0=$(date +%s.%N)
  own=$("$@")  # a command that times itself prints its seconds (py_phase: without Python's start)
  t1=$(date +%s.%N); c1=$(cpu "$pid")
  if [ "$fuse" = 1 ]; then kill -INT "$tracer"; wait "$tracer" || true; tracer=""; fi
  echo "${own:-$(echo "$t1 - $t0" | bc)} $((c1 - c0))"
}

py_phase() {  # create|stat|unlink DIR: prints the loop's seconds
  /usr/bin/python3 - "$1" "$2" "$files" <<'EOF'
import os, sys, time
what, d, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
for i in range(n):
    p = os.path.join(d, "f%06d" % i)
    if what == "create":
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif what == "stat":
        os.stat(p)
    else:
        os.unlink(p)
print(time.perf_counter() - t0)
EOF
}
tar_c() { tar -C "$work/m/x" -cf - . | cat > /dev/null; }
tar_x() { tar -C "$work/m/x" -xf "$work/tree.tar"; }

report() {  # LAYER OP OPS SECONDS TICKS FUSE
  /usr/bin/python3 - "$@" "$work/bt.out" <<'EOF'
import re, sys
layer, op, ops, secs, ticks, fuse, bt = sys.argv[1:8]
ops, secs, ticks = int(ops), float(secs), int(ticks)
names = {1: "LOOKUP", 2: "FORGET", 3: "GETATTR", 4: "SETATTR", 5: "READLINK", 6: "SYMLINK", 8: "MKNOD", 9: "MKDIR",
         10: "UNLINK", 11: "RMDIR", 12: "RENAME", 13: "LINK", 14: "OPEN", 15: "READ", 16: "WRITE", 17: "STATFS",
         18: "RELEASE", 20: "FSYNC", 21: "SETXATTR", 22: "GETXATTR", 23: "LISTXATTR", 24: "REMOVEXATTR",
         25: "FLUSH", 27: "OPENDIR", 28: "READDIR", 29: "RELEASEDIR", 34: "ACCESS", 35: "CREATE", 39: "IOCTL",
         42: "BATCH_FORGET", 43: "FALLOCATE", 44: "READDIRPLUS", 45: "RENAME2", 46: "LSEEK", 52: "STATX"}
line = f"{layer:6s} {op:7s} {secs / ops * 1e6:8.1f} us/op"
if fuse == "1":
    text = open(bt).read()
    req = {int(k): int(v) for k, v in re.findall(r"@requests\[(\d+)\]: (\d+)", text)}
    rt = {int(k): int(v) for k, v in re.findall(r"@roundtrip_ns\[(\d+)\]: (\d+)", text)}
    total = sum(req.values())
    by = sorted(req.items(), key=lambda kv: -kv[1])
    ops_text = " ".join(f"{names.get(k, k)} {v / ops:.2f}" for k, v in by if v / ops >= 0.01)
    rtt = sum(rt.values()) / total / 1000 if total else 0
    cpu = ticks * 10000 / total if total else 0
    line += f"  {total / ops:5.2f} req/op  round trip {rtt:6.1f} us/req  daemon {cpu:5.1f} us/req  [{ops_text}]"
print(line)
EOF
}

echo "files $files, tar entries $entries (${tree}, boost left out)"
# Each layer twice: first timed with nothing attached (wall, daemon CPU), then again on a fresh
# image with the tracer attached, for the request counts (a tracepoint hit costs the request
# about a microsecond: not in the timed pass).
one_pass() {  # LAYER TRACE: prints "OP OPS SECONDS TICKS" per operation, the counts in $work/bt.OP
  local layer=$1 trace=$2
  FRESH=1 mount_layer "$layer"
  mkdir "$work/m/d"
  local s t
  run_op() {  # OP OPS command...
    local op=$1 n=$2; shift 2
    read -r s t < <(phase "$trace" "$@")
    [ "$trace" = 1 ] && mv "$work/bt.out" "$work/bt.$op"
    echo "$op $n $s $t"
  }
  run_op create "$files" py_phase create "$work/m/d"
  drop_caches
  run_op stat "$files" py_phase stat "$work/m/d"
  run_op unlink "$files" py_phase unlink "$work/m/d"
  mkdir "$work/m/x"
  run_op tar-x "$entries" tar_x
  if [[ $layer == null* ]]; then
    sync; echo 3 > /proc/sys/vm/drop_caches  # its tree lives in the server: cold caches, same mount
  else
    unmount_layer "$layer"
    drop_caches
    mount_layer "$layer"
  fi
  run_op tar-c "$entries" tar_c
  unmount_layer "$layer"
}
for layer in $layers; do
  fuse=1; [ "$layer" = ext4 ] && fuse=0
  one_pass "$layer" 0 > "$work/timed"
  [ "$fuse" = 1 ] && one_pass "$layer" 1 > /dev/null
  while read -r op n s t; do
    [ "$fuse" = 1 ] && cp "$work/bt.$op" "$work/bt.out"
    report "$layer" "$op" "$n" "$s" "$t" "$fuse"
  done < "$work/timed"
done
