#!/usr/bin/env bash
# Fetches the Debian kernel that linux-image-amd64 points at in one suite of the archive this
# machine already uses, and unpacks it into CACHE_DIR/SUITE: vmlinuz, modules/ with the NVMe
# driver (PCI and TCP host), the NVMe target over TCP, FUSE and everything they depend on, and
# modules.order (insmod order). Idempotent: a suite already unpacked is not fetched again.
#
# SUITE: unstable (the newest kernel: the main configuration), backports (the release's
# long-term backport), stable (the release's own). The suite's package index is read with a
# private apt state under CACHE_DIR/apt, so the machine's own apt sources never change.
# Usage: tests/qemu/guest-kernel.sh CACHE_DIR [unstable|backports|stable]   (default unstable)
set -euo pipefail
cache_root=${1:?usage: guest-kernel.sh CACHE_DIR [unstable|backports|stable]}
suite_name=${2:-unstable}
cache="$cache_root/$suite_name"
modules_wanted="nvme.ko fuse.ko nvme-tcp.ko nvmet-tcp.ko"
have_all() {
  [ -s "$cache/vmlinuz" ] || return 1
  local m
  for m in $modules_wanted; do grep -qx "$m" "$cache/modules.order" "$cache/modules.builtin" 2>/dev/null || return 1; done
}
have_all && exit 0

. /etc/os-release
case "$suite_name" in
  unstable) suite=unstable ;;
  backports) suite="$VERSION_CODENAME-backports" ;;
  stable) suite=$VERSION_CODENAME ;;
  *) echo "guest-kernel: unknown suite '$suite_name' (unstable, backports or stable)" >&2; exit 2 ;;
esac
# The Debian archive this machine already uses (its apt sources), for the release it runs.
archive=$(apt-cache policy 2>/dev/null | awk -v s="$VERSION_CODENAME/main" '$3 == s && $2 ~ /^https?:/ {print $2; exit}')
[ -n "$archive" ] || { echo "guest-kernel: apt's sources name no Debian archive for '$VERSION_CODENAME/main' (apt-cache policy)" >&2; exit 1; }

apt_dir="$cache_root/apt/$suite_name"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$cache"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive $suite main" > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir" -o "Dir::Cache::archives=$apt_dir/archives"
          -o Dir::State::status=/dev/null -o Debug::NoLocking=1)
apt-get "${apt_opts[@]}" update -qq >/dev/null 2>&1 ||
  { echo "guest-kernel: apt-get update of $suite failed" >&2; exit 1; }
pkg=$(apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$pkg" ] || { echo "guest-kernel: $suite offers no linux-image-amd64" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 777 "$work"  # apt downloads as the _apt user
# Since 7.x the image package is a frame over linux-binary-* (vmlinuz) and linux-modules-*.
pkgs=("$pkg" $(apt-cache "${apt_opts[@]}" depends "$pkg" 2>/dev/null |
               awk '/Depends: linux-(binary|modules|base)-[0-9]/ {print $2}' | sort -u))
(cd "$work" && apt-get "${apt_opts[@]}" download -qq "${pkgs[@]}" >/dev/null 2>&1) ||
  { echo "guest-kernel: apt-get download ${pkgs[*]} ($suite) failed" >&2; exit 1; }
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
kver=$(ls "$work/root/lib/modules" 2>/dev/null || ls "$work/root/usr/lib/modules")
moddir="$work/root/lib/modules/$kver"
[ -d "$moddir" ] || moddir="$work/root/usr/lib/modules/$kver"  # merged /usr
vmlinuz="$work/root/boot/vmlinuz-$kver"
[ -f "$vmlinuz" ] || vmlinuz="$moddir/vmlinuz"  # 7.x: beside the modules
[ -f "$vmlinuz" ] || { echo "guest-kernel: no vmlinuz in $pkg" >&2; exit 1; }
cp "$vmlinuz" "$cache/vmlinuz"
depmod -b "$(dirname "$(dirname "$moddir")")/.." "$kver" 2>/dev/null || true
[ -s "$moddir/modules.dep" ] || { echo "guest-kernel: depmod made no modules.dep for $pkg" >&2; exit 1; }

# Resolve each wanted module's dependencies from modules.dep; module paths, dependencies first.
declare -A seen=()
order=()
resolve() {
  local path=$1 deps dep
  [ -n "${seen[$path]:-}" ] && return
  seen[$path]=1
  deps=$(awk -v p="$path:" '$1 == p { $1 = ""; print }' "$moddir/modules.dep")
  for dep in $deps; do resolve "$dep"; done
  order+=("$path")
}
builtin=()
for m in $modules_wanted; do
  if grep -q "/$m\$" "$moddir/modules.builtin" 2>/dev/null; then builtin+=("$m"); continue; fi  # 7.x: FUSE is built in
  path=$(awk -F: -v m="/${m%.ko}.ko" 'index($1, m) && ($1 ~ /\.ko(\.xz|\.zst)?$/) {
           n = split($1, parts, "/"); f = parts[n]; sub(/\.(xz|zst)$/, "", f); if ("/" f == m) {print $1; exit}}' "$moddir/modules.dep")
  [ -n "$path" ] || { echo "guest-kernel: no module $m in $pkg" >&2; exit 1; }
  resolve "$path"
done

rm -rf "$cache/modules"
mkdir -p "$cache/modules"
: > "$cache/modules.order.tmp"
for path in "${order[@]}"; do
  name=$(basename "$path")
  case "$name" in
    *.xz) xz -dc "$moddir/$path" > "$cache/modules/${name%.xz}"; name=${name%.xz} ;;
    *.zst) zstd -qdc "$moddir/$path" > "$cache/modules/${name%.zst}"; name=${name%.zst} ;;
    *) cp "$moddir/$path" "$cache/modules/$name" ;;
  esac
  echo "$name" >> "$cache/modules.order.tmp"
done
printf '%s\n' "${builtin[@]}" > "$cache/modules.builtin"
mv "$cache/modules.order.tmp" "$cache/modules.order"
echo "$pkg" > "$cache/kernel.package"
echo "guest-kernel: $pkg ($suite), modules: $(tr '\n' ' ' < "$cache/modules.order")" >&2
