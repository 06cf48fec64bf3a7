"""biofs_tools: what tools/biofs-compare, tools/biofs-stat and tools/biofs-workload share.

The scripts find this file beside their own (the directory of their real path, so a symlink to
a script works too); whatever installs the scripts installs this file next to them.

    the mount's counters   read_stats, STATS_XATTR (fs/stats.h)
    numbers and sizes      median, parse_size, fmt_ns
    commands and mounts    log, run, umount, LoopExt4
"""
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATS_XATTR = "user.biofs.stats"


# ---- pure helpers -----------------------------------------------------------------------------

def read_stats(mountpoint, missing_ok=False):
    """The mount's counters (the JSON object of fs/stats.h) as a dict. Where they cannot be read
    (not a biofs mount, not JSON): {} with missing_ok, else OSError or ValueError naming the path."""
    try:
        raw = os.getxattr(mountpoint, STATS_XATTR)
    except OSError as e:
        if missing_ok:
            return {}
        raise OSError(f"{mountpoint}: cannot read {STATS_XATTR} ({e.strerror}); is it a biofs mount?") from None
    try:
        return json.loads(raw)
    except ValueError:
        if missing_ok:
            return {}
        raise ValueError(f"{mountpoint}: {STATS_XATTR} is not JSON") from None


def median(xs, empty=None):
    """The median of the values that are not None; `empty` where there are none."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else empty


def parse_size(text):
    """'4k', '256M', '2GiB', '512' -> bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    t = text.strip().lower().rstrip("ib").rstrip("i")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def fmt_ns(ns):
    """Nanoseconds as ns, us (one decimal) or ms (two decimals)."""
    if ns >= 1_000_000:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.1f} us"
    return f"{ns} ns"


# ---- running things ---------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, check=True, **kw):
    """subprocess.run with text output captured; with check, a failure raises RuntimeError with
    the command, its exit status and the end of what it printed."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}")
    return p


def umount(mnt, fuse=True):
    """Unmounts mnt (fusermount3 -u, or umount for a kernel filesystem), retrying for 10 s while it
    is busy, then lazily. True when it came off before the lazy unmount."""
    for _ in range(50):
        cmd = ["fusermount3", "-u", mnt] if fuse else ["umount", mnt]
        if run(cmd, check=False).returncode == 0 or not os.path.ismount(mnt):
            return True
        time.sleep(0.2)
    run(["umount", "-l", mnt], check=False)
    return False


class LoopExt4:
    """ext4 on a loop device over a fresh image file of `size` bytes, mounted at mnt; direct I/O
    on the backing file (as the emulated namespace does) unless direct_io is False."""

    def __init__(self, img, mnt, size, direct_io=True):
        self.img, self.mnt, self.size, self.direct_io = img, mnt, size, direct_io
        self.loop = None

    def setup(self):
        os.makedirs(self.mnt, exist_ok=True)
        with open(self.img, "wb") as f:
            f.truncate(self.size)
        dio = "on" if self.direct_io else "off"
        self.loop = run(["losetup", "-f", "--show", f"--direct-io={dio}", self.img]).stdout.strip()
        run(["mkfs.ext4", "-q", "-F", self.loop])
        run(["mount", self.loop, self.mnt])

    def unmount(self):
        if os.path.ismount(self.mnt):
            umount(self.mnt, fuse=False)

    def fsck_cmd(self):
        return ["e2fsck", "-fn", self.loop]

    def teardown(self):
        self.unmount()
        if self.loop:
            run(["losetup", "-d", self.loop], check=False)
            self.loop = None
        if os.path.exists(self.img):
            os.unlink(self.img)
