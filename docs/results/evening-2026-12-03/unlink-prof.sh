#!/bin/bash
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)  # the biofs checkout this script sits in
# profile an unlink phase of 15000 files on the default stack (tmpfs image): per-thread CPU and perf of the whole system
cd $REPO
w=$(mktemp -d /dev/shm/ul-XXXX); mkdir $w/m; truncate -s 2G $w/img; build/bin/mkfs.biofs -q $w/img
build/bin/biofs "emu:$w/img,vwc" $w/m ${OPTS:+-o $OPTS}
pid=$(pgrep -f -n "emu:$w/img,vwc")
python3 -c "
import os,sys
d=sys.argv[1]
for i in range(15000): os.close(os.open(os.path.join(d,'f%06d'%i), os.O_CREAT|os.O_WRONLY, 0o644))
" $w/m
sync
snap() { for t in /proc/$pid/task/*; do echo "$(cat $t/comm | tr ' ' _) $(awk '{print $14+$15}' $t/stat)"; done | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort; }
snap > $w/s0
perf record -a -g -e cpu-clock -F 4000 -o ${OUT:-/var/tmp}/ul.data -- python3 -c "
import os,sys,time
d=sys.argv[1]
t=time.perf_counter()
for i in range(15000): os.unlink(os.path.join(d,'f%06d'%i))
print('unlinks/s', 15000/(time.perf_counter()-t))
" $w/m 2>/dev/null
snap > $w/s1
join -a2 -e0 -o 0,1.2,2.2 $w/s0 $w/s1 | awk '{d=$3-$2; if (d>0) printf "  %-18s %7.1f us/unlink\n", $1, d*10000/15000}'
fusermount3 -u $w/m; while pgrep -f "emu:$w/img,vwc" >/dev/null; do sleep 0.1; done; rm -rf $w
