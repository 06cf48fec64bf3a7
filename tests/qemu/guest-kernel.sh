#!/usr/bin/env bash
# Fetches Debian's stock kernel (the package linux-image-amd64 points at) and unpacks it into
# CACHE_DIR: CACHE_DIR/vmlinuz and CACHE_DIR/modules/ with the NVMe driver, FUSE and everything
# they depend on, plus CACHE_DIR/modules.order (insmod order). Idempotent.
# Usage: tests/qemu/guest-kernel.sh CACHE_DIR
set -euo pipefail
cache=${1:?usage: guest-kernel.sh CACHE_DIR}
[ -s "$cache/vmlinuz" ] && grep -qx fuse.ko "$cache/modules.order" 2>/dev/null && exit 0
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then
  apt-get update -qq >/dev/null 2>&1 || true
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
[ -n "$pkg" ] || { echo "guest-kernel: cannot find the kernel package behind linux-image-amd64 (apt-get update?)" >&2; exit 1; }
chmod 777 "$work"  # apt downloads as the _apt user
(cd "$work" && apt-get download -qq "$pkg" >/dev/null) || { echo "guest-kernel: apt-get download $pkg failed" >&2; exit 1; }
dpkg-deb -x "$work"/*.deb "$work/root"
kver=$(ls "$work/root/lib/modules")
cp "$work/root/boot/vmlinuz-$kver" "$cache/vmlinuz"
moddir="$work/root/lib/modules/$kver"
depmod -b "$work/root" "$kver"  # the package ships no modules.dep: it is made at install time

# Resolve nvme's dependencies from modules.dep; print module paths, dependencies first.
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
nvme=$(awk -F: '$1 ~ /\/nvme\/host\/nvme\.ko/ {print $1; exit}' "$moddir/modules.dep")
[ -n "$nvme" ] || { echo "guest-kernel: no nvme module in $pkg" >&2; exit 1; }
resolve "$nvme"
fuse=$(awk -F: '$1 ~ /\/fs\/fuse\/fuse\.ko/ {print $1; exit}' "$moddir/modules.dep")
[ -n "$fuse" ] || { echo "guest-kernel: no fuse module in $pkg" >&2; exit 1; }
resolve "$fuse"

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
mv "$cache/modules.order.tmp" "$cache/modules.order"
echo "$pkg" > "$cache/kernel.package"
echo "guest-kernel: $pkg, modules: $(tr '\n' ' ' < "$cache/modules.order")" >&2
