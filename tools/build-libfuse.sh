#!/usr/bin/env bash
# Builds libfuse 3.18 with FUSE-over-io_uring from Debian's own source package, into a prefix
# that CMake finds through pkg-config (CMakeLists.txt adds PREFIX/lib/pkgconfig).
#
# Why: Debian 12 ships libfuse 3.14 (no FUSE-over-io_uring, no FUSE_CAP_DIRECT_IO_ALLOW_MMAP,
# no statx); Debian's 3.18 binary packages (unstable) are built without liburing and libnuma, so
# their io_uring transport is compiled out. The source comes from Debian's archive only:
# `apt-get source` checks it against the signed Sources index (deb-src of unstable), and
# dpkg-source checks the .dsc's hashes. Static library, so the daemon needs no runtime path.
# Also installs libfuse's example passthrough_hp (PREFIX/bin), the reference FUSE filesystem
# that tools/biofs-compare runs as a layer baseline.
#
# tools/libfuse-patches/*.patch are applied on top, as a Debian package carries fixes: our own,
# each saying what it fixes (0001: libfuse 3.18.3's ring thread flushes the SQ ring without the
# lock that replies from other threads take, so such replies can be lost: upstream libfuse
# issue #1443, fixed after 3.18.3; 0002: the session loop tears the rings down when it returns,
# while replies from other threads, which the API allows, may still come, and a read's reply
# may still be landing in a ring's payload buffer: a use-after-free when a connection is
# aborted or unmounted with I/O in flight (upstream libfuse PR #1481/#1522, not merged). The
# loop now stops only the ring threads (no request is received after it returns); the rings
# and their buffers go in fuse_session_destroy(), which the daemon calls once every request
# is answered; 0003: the session option io_uring_sched_idle puts the ring threads in
# SCHED_IDLE, code libfuse carries switched off (`if (0)`): a CPU that runs only its ring
# thread then counts as idle, so the scheduler wakes a requester on the ring's own CPU; 0004:
# fuse_req_uring_waiting(), how many requests wait in the ring queue behind the one being
# handled, which the daemon's run-to-completion rule needs and the API does not tell; 0005: a
# reply from a thread other than the ring's own never waits for the ring's lock, whose holder
# may be waiting for that thread (the block layer's completion thread): when the lock is
# taken, the commit is left to its holder, which submits it before letting go; 0006:
# fuse_session_uring_set_batch_end(), a function each ring thread calls when it has handled a
# batch of requests, where the daemon dispatches the block plug its reads and writes shared).
#
# The archive keeps only its newest fuse3, and the patches fit 3.18. When the archive has
# moved on (a newer series, or a 3.18 the patches no longer apply to), the newest source is
# built unpatched instead, and the build goes on without biofs's FUSE-over-io_uring transport
# (CMakeLists.txt finds the patches' functions missing; the daemon then refuses fuse_uring=on
# in one line and `auto` takes /dev/fuse). BIOFS_LIBFUSE_UNPATCHED=1 asks for that form.
#
# Idempotent: does nothing when PREFIX/.built names the same source version and patches.
# Usage: tools/build-libfuse.sh [PREFIX]     (default /opt/biofs-libfuse; root for apt)
set -euo pipefail

prefix=${1:-/opt/biofs-libfuse}
want_series=3.18        # the libfuse series the daemon is written for
sources=/etc/apt/sources.list.d/biofs-deb-src-unstable.sources

sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo

if [ ! -f "$sources" ]; then
  # The Debian archive this machine already uses (its apt sources), for the release it runs.
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  archive=$(apt-cache policy 2>/dev/null | awk -v s="$codename/main" '$3 == s && $2 ~ /^https?:/ {print $2; exit}')
  if [ -z "$archive" ]; then
    echo "build-libfuse: apt's sources name no Debian archive for '$codename/main' (apt-cache policy), so unstable's fuse3 source cannot be found" >&2
    exit 1
  fi
  $sudo tee "$sources" >/dev/null <<EOF
# Added by biofs tools/build-libfuse.sh: source packages only (libfuse 3.18), never binaries.
Types: deb-src
URIs: $archive
Suites: unstable
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $sudo apt-get update -qq
fi

# The newest fuse3 source of at least the series the daemon is written for.
version=$(apt-cache showsrc fuse3 2>/dev/null | awk '/^Version:/ {print $2}' |
  while read -r v; do dpkg --compare-versions "$v" ge "$want_series" && echo "$v"; done | sort -V | tail -1 || true)
if [ -z "$version" ]; then
  echo "build-libfuse: Debian's archive offers no fuse3 source of ${want_series} or later (apt-cache showsrc fuse3)" >&2
  exit 1
fi
patches_dir="$(cd "$(dirname "$0")" && pwd)/libfuse-patches"
patched=1
case "$version" in "$want_series".*) ;; *) patched=0 ;; esac
[ "${BIOFS_LIBFUSE_UNPATCHED:-0}" = 1 ] && patched=0
stamp="$version patched=$patched custom-io $(cat "$patches_dir"/*.patch 2>/dev/null | sha256sum | cut -c1-16)"
if [ -f "$prefix/.built" ] && [ "$(cat "$prefix/.built")" = "$stamp" ]; then
  exit 0
fi

# What libfuse's meson build needs on Debian 12 (liburing and libnuma enable io_uring).
need=(dpkg-dev meson ninja-build pkg-config liburing-dev libnuma-dev g++ patch)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-libfuse: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d /tmp/biofs-libfuse.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "build-libfuse: fuse3 $version from Debian's source package into $prefix" >&2
(cd "$work" && apt-get source -qq "fuse3=$version" >/dev/null 2>&1) || {
  echo "build-libfuse: apt-get source fuse3=$version failed" >&2
  exit 1
}
src=$(find "$work" -maxdepth 1 -type d -name 'fuse3-*' | head -1)
if [ "$patched" = 1 ]; then
  # All or none: a dry run of the series on a copy first.
  cp -a "$src" "$work/dry"
  for p in "$patches_dir"/*.patch; do
    [ -e "$p" ] || continue
    if ! patch -d "$work/dry" -p1 --quiet --forward <"$p" >/dev/null 2>&1; then
      echo "build-libfuse: $(basename "$p") does not apply to fuse3 $version: building it unpatched" >&2
      patched=0
      break
    fi
  done
  rm -rf "$work/dry"
fi
if [ "$patched" = 1 ]; then
  for p in "$patches_dir"/*.patch; do
    [ -e "$p" ] || continue
    patch -d "$src" -p1 --quiet --forward <"$p"
  done
else
  echo "build-libfuse: fuse3 $version without biofs's ring patches: this build has no FUSE-over-io_uring transport (fuse_uring=auto uses /dev/fuse)" >&2
  stamp=${stamp/patched=1/patched=0}
fi
# A static library (no runtime path for the daemon), no setuid helpers, no init scripts or
# udev rules: only the library, its headers and pkg-config file, and the examples.
uring_opt=""
[ "$patched" = 1 ] && uring_opt="-Denable-io-uring=true"  # the only form that uses it
# The session's custom I/O functions (fuse_session_custom_io), through which the daemon's own
# ring side, fuse_uring=reactor, catches replies: a configuration option from 3.17 on, off by
# default because a custom-io peer need not be the kernel and libfuse trusts what it sends; the
# reactor's peer is the kernel, through the /dev/fuse descriptor of the mount itself.
grep -q "'enable-custom-io'" "$src/meson_options.txt" 2>/dev/null && uring_opt="$uring_opt -Denable-custom-io=true"
meson setup "$work/build" "$src" --prefix="$prefix" --libdir=lib -Dbuildtype=release \
  -Ddefault_library=static -Duseroot=false -Dtests=false -Dutils=false -Dexamples=true \
  -Dinitscriptdir= -Dudevrulesdir="$work/udev" ${uring_opt} >"$work/setup.log" 2>&1 || {
  tail -20 "$work/setup.log" >&2
  exit 1
}
if [ "$patched" = 1 ] && ! grep -q 'liburing linking and SQE128 support.*YES' "$work/setup.log"; then
  echo "build-libfuse: meson did not enable io_uring (needs liburing-dev and libnuma-dev)" >&2
  exit 1
fi
ninja -C "$work/build" >"$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; exit 1; }
$sudo rm -rf "$prefix"
$sudo ninja -C "$work/build" install >/dev/null
if [ -x "$work/build/example/passthrough_hp" ]; then
  $sudo install -D -m 0755 "$work/build/example/passthrough_hp" "$prefix/bin/passthrough_hp"
else
  echo "build-libfuse: fuse3 $version built no example/passthrough_hp: biofs-compare's layer baseline is missing" >&2
fi
echo "$stamp" | $sudo tee "$prefix/.built" >/dev/null
echo "build-libfuse: done ($prefix)" >&2
