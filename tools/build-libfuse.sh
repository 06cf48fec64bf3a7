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
# Stock: no patch is applied. biofs's own FUSE-over-io_uring server side (daemon/fuse_reactor.h)
# uses only libfuse's public API (the session's custom I/O); libfuse's ring transport is built
# in as the A/B baseline (fuse_uring=libfuse). Any fuse3 source of 3.18 or later will do: the
# newest the archive offers.
#
# Idempotent: does nothing when PREFIX/.built names the same source version and options.
# Usage: tools/build-libfuse.sh [PREFIX]     (default /opt/biofs-libfuse; root for apt)
set -euo pipefail

prefix=${1:-/opt/biofs-libfuse}
want_series=3.18        # the oldest libfuse series with FUSE-over-io_uring
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

# The newest fuse3 source of at least that series.
version=$(apt-cache showsrc fuse3 2>/dev/null | awk '/^Version:/ {print $2}' |
  while read -r v; do dpkg --compare-versions "$v" ge "$want_series" && echo "$v"; done | sort -V | tail -1 || true)
if [ -z "$version" ]; then
  echo "build-libfuse: Debian's archive offers no fuse3 source of ${want_series} or later (apt-cache showsrc fuse3)" >&2
  exit 1
fi
stamp="$version stock io-uring custom-io"
if [ -f "$prefix/.built" ] && [ "$(cat "$prefix/.built")" = "$stamp" ]; then
  exit 0
fi

# What libfuse's meson build needs on Debian 12 (liburing and libnuma enable io_uring).
need=(dpkg-dev meson ninja-build pkg-config liburing-dev libnuma-dev g++)
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
# A static library (no runtime path for the daemon), no setuid helpers, no init scripts or
# udev rules: only the library, its headers and pkg-config file, and the examples.
uring_opt="-Denable-io-uring=true"  # libfuse's ring: fuse_uring=libfuse
# The session's custom I/O functions (fuse_session_custom_io), through which the daemon's own
# ring side, the reactor (fuse_uring=on), catches replies: a configuration option from 3.17 on, off by
# default because a custom-io peer need not be the kernel and libfuse trusts what it sends; the
# reactor's peer is the kernel, through the /dev/fuse descriptor of the mount itself.
grep -q "'enable-custom-io'" "$src/meson_options.txt" 2>/dev/null && uring_opt="$uring_opt -Denable-custom-io=true"
meson setup "$work/build" "$src" --prefix="$prefix" --libdir=lib -Dbuildtype=release \
  -Ddefault_library=static -Duseroot=false -Dtests=false -Dutils=false -Dexamples=true \
  -Dinitscriptdir= -Dudevrulesdir="$work/udev" ${uring_opt} >"$work/setup.log" 2>&1 || {
  tail -20 "$work/setup.log" >&2
  exit 1
}
if ! grep -q 'liburing linking and SQE128 support.*YES' "$work/setup.log"; then
  # The reactor (fuse_uring=on) needs none of it; only the baseline fuse_uring=libfuse is lost.
  echo "build-libfuse: meson did not enable libfuse's io_uring transport (needs liburing-dev and libnuma-dev): fuse_uring=libfuse will be refused" >&2
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
