#!/bin/bash
# usage: guard-try.sh BIN OPTS HOGS  -> psync QD1 randread, io_uring QD64 randread, creates/s, guard boosts
BIN=$1 OPTS=$2 HOGS=$3
B=$(cd "$(dirname "$0")/../../.." && pwd)/build/bin; w=$(mktemp -d /dev/shm/gt-XXXX); mkdir $w/m; truncate -s 2G $w/img; $B/mkfs.biofs -q $w/img
if [ -n "$FG" ]; then $BIN emu:$w/img,vwc $w/m -f -o $OPTS & pid=$!; for i in $(seq 50); do mountpoint -q $w/m && break; sleep 0.1; done; else $BIN emu:$w/img,vwc $w/m -o $OPTS; pid=$(pgrep -n -f "emu:$w/img,vwc"); fi
fio --name=pre --filename=$w/m/f --size=256M --rw=write --bs=1M --direct=1 --output=/dev/null
hp=""; for i in $(seq $HOGS); do (while :; do :; done) & hp="$hp $!"; done
line="$(basename $(dirname $(dirname $BIN)))/$OPTS hogs=$HOGS"
for cell in "psync 1 randread" "io_uring 1 randread" "io_uring 64 randread"; do set -- $cell
  iops=$(fio --name=t --filename=$w/m/f --size=256M --rw=$3 --bs=4k --direct=1 --ioengine=$1 --iodepth=$2 --runtime=3 --time_based --output-format=terse --terse-version=3 | cut -d';' -f8)
  line="$line $1-QD$2 $iops"
done
mkdir $w/m/d
r=$(timeout 120 python3 - $w/m/d <<'P'
import os,sys,time
d=sys.argv[1]; n=3000; names=[os.path.join(d,"f%d"%i) for i in range(n)]
t=time.perf_counter()
for p in names: os.close(os.open(p,os.O_CREAT|os.O_EXCL|os.O_WRONLY,0o644))
print("create/s %.0f"%(n/(time.perf_counter()-t)))
P
)
[ -n "$hp" ] && kill $hp 2>/dev/null; wait $hp 2>/dev/null
b=$(getfattr --only-values -n user.biofs.stats $w/m 2>/dev/null | python3 -c 'import json,sys; f=json.load(sys.stdin)["fuse"]; print("boosts", f.get("guard_boosts","-"), "boosted", f.get("guard_boosted","-"))')
echo "$line $r $b"
fusermount3 -u $w/m; while kill -0 $pid 2>/dev/null; do sleep 0.1; done; rm -rf $w
