#!/usr/bin/env bash
# xfstests' generic group through a biofs mount, one command (docs/xfstests.md).
#
#   tools/xfstests.sh XFSTESTS_DIR [--fs biofs|hp] [--tests "generic/001 generic/013 ..."]
#                     [--out DIR] [--opts MOUNT_OPTIONS] [--timeout SECONDS]
#
# XFSTESTS_DIR: a checkout of xfstests (public source, not in Debian's archive: bring your own;
# nothing of it is copied here). The script installs what xfstests needs from the archive,
# builds it in place, installs a mount.fuse.biofs helper, makes TEST and SCRATCH images on the
# emulated namespace (emu:IMG,vwc), and runs the tests one `./check` at a time, because for
# FSTYP=fuse xfstests never runs mkfs or fsck itself: before each test the SCRATCH image is
# formatted afresh, after it `fsck.biofs -n` checks both images (a test is failed when either
# is not clean). --fs hp runs the same tests on libfuse's passthrough_hp over a directory (the
# libfuse build tools/build-libfuse.sh makes), so the two are compared in one command.
# Writes OUT/results.csv (test,status,seconds,reason; status pass, fail or notrun) and
# OUT/summary.md; each test's xfstests output stays under OUT/xfstests/. Default tests: every
# test of the generic group. --timeout: the longest one test may run (900 s; generic/551, a
# random AIO write-and-verify stress, needs more on 2 CPUs). Needs root.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
xfs=${1:?usage: tools/xfstests.sh XFSTESTS_DIR [--fs biofs|hp] [--tests LIST] [--out DIR] [--opts OPTS] [--timeout S]}
shift
fs=biofs tests="" out="" opts="" limit=900
while [ $# -gt 0 ]; do
  case "$1" in
    --fs) fs=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --opts) opts=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    *) echo "xfstests.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$fs" in biofs|hp) ;; *) echo "xfstests.sh: --fs biofs or hp, not '$fs'" >&2; exit 2 ;; esac
[ -f "$xfs/check" ] || { echo "xfstests.sh: $xfs: no xfstests checkout there (no ./check)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "xfstests.sh: needs root (mounts, users, /sbin helper)" >&2; exit 2; }
xfs=$(cd "$xfs" && pwd)
out=$(mkdir -p "${out:-$repo/build/xfstests-$fs}" && cd "${out:-$repo/build/xfstests-$fs}" && pwd)
bin=${BIOFS_BIN:-$repo/build/bin}  # BIOFS_BIN: binaries kept apart from a build that goes on
hp=/opt/biofs-libfuse/bin/passthrough_hp

# What xfstests' README asks of a Debian machine, as far as generic tests on FUSE use it.
need="acl attr automake autoconf bc dbench e2fsprogs fio gawk gcc indent libacl1-dev libaio-dev
  libcap-dev libgdbm-dev libgdbm-compat-dev libtool libtool-bin liburing-dev make psmisc python3
  quota sed uuid-dev uuid-runtime xfsprogs xfslibs-dev sqlite3 libinih-dev libssl-dev"
missing=$(for p in $need; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "== installing: $(echo $missing)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
# The users and groups xfstests' permission tests switch to.
for u in fsgqa fsgqa2; do id "$u" >/dev/null 2>&1 || useradd -m "$u"; done
id 123456-fsgqa >/dev/null 2>&1 || useradd -M 123456-fsgqa 2>/dev/null || true

commit=$(git -C "$xfs" rev-parse HEAD 2>/dev/null || echo "unknown (not a git checkout)")
echo "== xfstests at $commit: building"
if [ ! -x "$xfs/ltp/fsstress" ]; then
  (cd "$xfs" && make -j"$(nproc)" >"$out/build.log" 2>&1) || { echo "xfstests.sh: the xfstests build failed: $out/build.log" >&2; exit 1; }
fi
if [ "$fs" = biofs ] && [ ! -x "$bin/biofs" ]; then
  cmake -S "$repo" -B "$repo/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$repo/build" --target biofs mkfs.biofs fsck.biofs
fi
[ "$fs" = hp ] && [ ! -x "$hp" ] && { echo "xfstests.sh: no $hp (tools/build-libfuse.sh builds it)" >&2; exit 1; }

# Images (or, for hp, directories) and mount points.
work=/var/tmp/biofs-xfstests-$fs
mkdir -p "$work" /mnt/biofs-xfstests-$fs/test /mnt/biofs-xfstests-$fs/scratch
for m in /mnt/biofs-xfstests-$fs/test /mnt/biofs-xfstests-$fs/scratch; do mountpoint -q "$m" && umount "$m"; done
if [ "$fs" = biofs ]; then
  # The sources as /proc/mounts shows them, so that xfstests finds TEST_DEV mounted where it
  # mounted it; without a comma, which xfstests' output filters (sed s,DEV,...,) cannot take.
  # The helper adds the volatile write cache (,vwc) and names the mount by its source.
  test_dev="biofs:emu:$work/test.img" scratch_dev="biofs:emu:$work/scratch.img"
  rm -f "$work/test.img" "$work/scratch.img"
  truncate -s 16G "$work/test.img" "$work/scratch.img"
  "$bin/mkfs.biofs" -q "$work/test.img"
  helper=/sbin/mount.fuse.biofs
  # mount(8) calls: mount.fuse.biofs SOURCE MOUNTPOINT -o OPTIONS (biofs takes mount(8)'s
  # generic options, daemon/mount_options.cc).
  printf '#!/bin/sh\nsrc=$1 mnt=$2; shift 2\nexec %s "${src#biofs:},vwc" "$mnt" -o "fsname=$src" "$@"\n' \
    "$bin/biofs" > "$helper"
  mkfs_scratch() { "$bin/mkfs.biofs" -q -f "$work/scratch.img"; }
  fsck_both() {
    local o1 o2 rc=0
    o1=$("$bin/fsck.biofs" -n "$work/test.img" 2>&1) || { rc=1; echo "TEST: $(echo "$o1" | head -3 | tr '\n' ' ')"; }
    o2=$("$bin/fsck.biofs" -n "$work/scratch.img" 2>&1) || { rc=1; echo "SCRATCH: $(echo "$o2" | head -3 | tr '\n' ' ')"; }
    return $rc
  }
  mount_opts="-o${opts:+$opts,}allow_other,default_permissions"
else
  # Names, not paths (xfstests unmounts by TEST_DEV; a directory path would name the directory,
  # not the mount): the helper serves $work/test for hp-test and $work/scratch for hp-scratch.
  test_dev="hp-test" scratch_dev="hp-scratch"
  rm -rf "$work/test" "$work/scratch"
  mkdir -p "$work/test" "$work/scratch"
  helper=/sbin/mount.fuse.passthrough_hp
  # passthrough_hp DIRECTORY MOUNTPOINT; mount(8)'s -o list goes to its -o.
  printf '#!/bin/sh\nsrc=$1 mnt=$2; shift 2\nulimit -n "$(ulimit -Hn)"\nexec %s --nopassthrough -o "fsname=$src" "$@" "%s/${src#hp-}" "$mnt"\n' \
    "$hp" "$work" > "$helper"
  mkfs_scratch() { rm -rf "${work:?}/scratch" && mkdir -p "$work/scratch"; }
  fsck_both() { return 0; }  # a directory on the host: nothing to check
  mount_opts="-o${opts:+$opts,}allow_other,default_permissions"
fi
chmod +x "$helper"

# xfstests checks that TEST_DEV is mounted as type "fuse" (df -T); a daemon that names its
# subtype (biofs and passthrough_hp both do) shows "fuse.NAME". Its df, seen through this.
printf '#!/bin/sh\n%s -T -P "$@" | sed -E "s/ fuse\\.(biofs|passthrough_hp) / fuse /"\n' "$(type -P df)" > "$out/df-fuse"
chmod +x "$out/df-fuse"

cat > "$out/local.config" <<EOF
export FSTYP=fuse
export FUSE_SUBTYP=.$( [ "$fs" = biofs ] && echo biofs || echo passthrough_hp )
export TEST_DEV='$test_dev'
export TEST_DIR=/mnt/biofs-xfstests-$fs/test
export SCRATCH_DEV='$scratch_dev'
export SCRATCH_MNT=/mnt/biofs-xfstests-$fs/scratch
export MOUNT_OPTIONS='$mount_opts'
export TEST_FS_MOUNT_OPTS='$mount_opts'
export RESULT_BASE='$out/xfstests'
export DF_PROG='$out/df-fuse'
EOF

[ -n "$tests" ] || tests=$(cd "$xfs/tests" && ls generic | grep -E '^[0-9]+$' | sed 's|^|generic/|' | tr '\n' ' ')
echo "test,status,seconds,reason" > "$out/results.csv"
n=0
for t in $tests; do
  n=$((n + 1))
  mkfs_scratch
  start=$SECONDS
  (cd "$xfs" && HOST_OPTIONS="$out/local.config" timeout "$limit" ./check "$t" >"$out/last-check.log" 2>&1) || true
  secs=$((SECONDS - start))
  base="$out/xfstests/$t"
  status=pass reason=""
  if [ -f "$base.notrun" ]; then
    status=notrun reason=$(head -1 "$base.notrun")
  elif [ -f "$base.out.bad" ] || grep -qE "^$t .*(\[failed|- output mismatch|\[expunged)" "$out/last-check.log" ||
       ! grep -q "^Passed all 1 tests" "$out/last-check.log"; then
    status=fail reason=$(grep -m1 -E "\[failed|output mismatch|_check_|not mounted|mount" "$out/last-check.log" | head -c 200 || true)
  fi
  for m in /mnt/biofs-xfstests-$fs/scratch /mnt/biofs-xfstests-$fs/test; do mountpoint -q "$m" && umount "$m"; done
  if ! why=$(fsck_both); then
    status=fail reason="fsck after the test: $why"
  fi
  rm -f "$base.notrun"
  reason=${reason//,/;}
  echo "$t,$status,$secs,${reason//$'\n'/ }" >> "$out/results.csv"
  printf '%-14s %-7s %4ss %s\n' "$t" "$status" "$secs" "$reason"
done

pass=$(grep -c ",pass," "$out/results.csv" || true)
fail=$(grep -c ",fail," "$out/results.csv" || true)
notrun=$(grep -c ",notrun," "$out/results.csv" || true)
{
  echo "# xfstests through $fs"
  echo
  echo "xfstests commit $commit; $n tests; FSTYP=fuse; mount options \`${mount_opts#-o}\`; $( [ "$fs" = biofs ] && echo "images emu:IMG,vwc, 16 GiB each (sparse), fsck.biofs -n of both after every test" || echo "passthrough_hp --nopassthrough over directories on the host")."
  echo
  echo "| pass | fail | not run |"
  echo "| --- | --- | --- |"
  echo "| $pass | $fail | $notrun |"
  echo
  echo "Failures:"
  echo
  grep ",fail," "$out/results.csv" | sed 's/^/- /' || true
} > "$out/summary.md"
cat "$out/summary.md"
