#!/usr/bin/env bash
# Installs the Debian 12 packages biofs needs to build, test and benchmark, then libfuse 3.18
# from Debian's source package (tools/build-libfuse.sh). When no newer libfuse can be built,
# it says so in one line and the build goes on with Debian 12's libfuse3-dev (3.14: /dev/fuse
# only, no FUSE-over-io_uring).
# Idempotent: packages already present are left alone and apt is not touched at all.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config   # build
  fuse3 libfuse3-dev                 # fusermount3; Debian's libfuse, the fallback of tools/build-libfuse.sh
  liburing-dev libnuma-dev           # nvme/: io_uring transports; libfuse's io_uring transport
  dpkg-dev meson                     # tools/build-libfuse.sh: libfuse 3.18 from Debian's source
  libtbb-dev                         # blockcore/: scalable allocator
  doctest-dev                        # tests/
  nlohmann-json3-dev                 # daemon/stats.cc, tools/bench: JSON output
  libcli11-dev                       # tools/bench: biofs-bench's options
  libisal-dev                        # fs/crc32c.cc: the metadata checksum (ISA-L)
  uuid-dev                           # fs/mkfs.cc, mkfs.biofs: the filesystem's UUID (libuuid)
  clang libclang-rt-14-dev           # sanitizer and fuzzer builds
  fio                                # benchmarks and comparisons
  valgrind binutils                  # tools/biofs-instructions: callgrind, addr2line
  linux-perf                         # biofs-compare --live --profile: perf record -e cpu-clock
  python3 python3-matplotlib         # tools/biofs-compare, biofs-stat (plots)
  e2fsprogs mount                    # biofs-compare: the ext4-on-loop baseline
  attr acl libcap2-bin rsync         # tests through the mount: xattrs, ACLs, capabilities, cp -a
  bc                                 # tools/bench-smallfiles.sh
  git                                # tools/biofs-workload (its git step; tests/tools runs it --quick)
  qemu-system-x86 busybox-static cpio xz-utils kmod  # tests/qemu: a guest with a real NVMe controller
  nvme-cli                           # tests/qemu: `nvme connect` to the guest's NVMe-oF target
  systemtap-sdt-dev                  # blockcore/usdt.h: the USDT probes (sys/sdt.h)
  blktrace bpftrace                  # tests/blockcore/blk_trace_test, tools/bpf: blkparse, btt, bpftrace
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done

# A newer libfuse from Debian's source package, or one line saying why not (the build then
# takes Debian's libfuse3-dev).
build_libfuse() {
  local out
  if out=$("$(dirname "$0")/build-libfuse.sh" 2>&1); then
    [ -z "$out" ] || printf '%s\n' "$out" >&2
    return 0
  fi
  echo "install-deps: no libfuse >= 3.18 could be built ($(printf '%s\n' "$out" | tail -1)); building with Debian's libfuse3-dev $(dpkg-query -W -f='${Version}' libfuse3-dev 2>/dev/null): /dev/fuse only" >&2
}

if [ ${#missing[@]} -eq 0 ]; then
  build_libfuse
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
build_libfuse
