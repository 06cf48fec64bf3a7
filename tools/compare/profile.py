"""Where an I/O's time goes, every layer (issue 44 §4): `perf record -e cpu-clock -a -g` over a
window, every sample on every CPU given to one layer.

How a sample is assigned, in this order:
1. idle: the idle task (swapper), or a stack whose leaf is the idle loop.
2. sched: a kernel frame that sleeps or wakes (schedule, try_to_wake_up, futex), on any thread.
3. On the application's threads (fio): the FUSE client (the kernel's fuse module) or io_uring by
   the first kernel frame that names one, else kernel (any kernel frame), else application.
4. On the daemon's threads (by process id where known, else by thread name), the first frame
   from the leaf that names a layer decides. A kernel frame: the image file's host I/O (VFS,
   the filesystem under it, the page cache: device), the kernel's fuse module (fuse_client: the
   server's side of /dev/fuse or of its ring), io_uring. A frame in the daemon's own binary by
   its *source file*: the sample's
   address is looked up with `addr2line -i` and the innermost inlined frame whose file is in the
   tree names the layer (blockcore/ → blockcore, fs/ → fs, nvme/ → nvme, nvme/emu_* and the ram
   and null devices → device, daemon/ → transport). An LTO build inlines across layers, so a
   function's name alone would give a block-layer helper inlined into the reactor to the reactor;
   its source line does not. A frame in libfuse is the transport's; a plain pread/pwrite the
   device's (the daemon's only file I/O is the emulated namespace's); a frame in liburing is
   io_uring's (its user-space half: the rings' memory, io_uring_enter); a frame the binary has no
   line for falls back to its symbol name (the rules below).
   With no such frame (the daemon is built without frame pointers, so a stack that starts in the
   kernel or in libc loses its callers): the write cache's thread is the device's, the FUSE
   threads' the transport's, the rest other.
5. other: everything else (kernel threads, other processes).
"""
import collections
import os
import re
import subprocess
import time

LAYERS = ("application", "kernel", "fuse_client", "io_uring", "transport", "fs", "blockcore", "nvme", "device",
          "sched", "idle", "other")
DAEMON_LAYERS = ("transport", "fs", "blockcore", "nvme", "device")

# Samples per second per CPU: 1 kHz gives 4000 a side in 2 s on two CPUs (a share of 1% to about
# +-0.3%) at a quarter of perf's default rate, which slowed fio by a quarter at 4 kHz with -g.
SAMPLE_HZ = 1000

Sample = collections.namedtuple("Sample", "comm pid period frames time", defaults=(None,))  # frames: leaf first
Frame = collections.namedtuple("Frame", "sym dso ip")

# A source file of the tree → its layer; the first prefix that matches decides.
_SOURCE_LAYERS = [
    ("nvme/emu_", "device"), ("blockcore/brd", "device"), ("blockcore/null_blk", "device"),
    ("blockcore/", "blockcore"), ("fs/", "fs"), ("nvme/", "nvme"), ("devices/", "device"), ("daemon/", "transport"),
]
# A user-space frame with no source line: checked in this order, the first rule that matches decides.
_USER_RULES = [
    ("sched", re.compile(r"pthread_cond_(wait|timedwait|signal|broadcast)|__futex")),
    ("device", re.compile(r"\bEmu[A-Z]\w*|emu_|biofs::copy_(from|to)_iovecs|^(__libc_)?p(read|write)v?(64)?(v2)?$")),
    ("nvme", re.compile(r"\bNvme[A-Z]\w*|\bnvme_")),
    ("fs", re.compile(r"\b(Filesystem|FileIo|Inode\w*|Extent\w*|Journal|IoBatch|BlockIo|Kiocb|Super|Namei|Dir)\b")),
    ("blockcore", re.compile(r"\bbio_|\bblk_|sbitmap|\bBioSet\b|\bRequestQueue\b|\bRequest\b|bvec_|submit_bio")),
    ("transport", re.compile(r"FuseReactor|fuse_|data_request|\bop_[a-z]+\b")),
]
_SCHED = re.compile(r"^(__)?schedule\b|finish_task_switch|try_to_wake_up|futex_(wait|wake)|^__futex")
_FUSE_KERNEL = re.compile(r"^fuse_")
_IO_URING_KERNEL = re.compile(r"^io_|^__io_|io_uring")
_KERNEL_APP_RULES = [("fuse_client", _FUSE_KERNEL), ("io_uring", _IO_URING_KERNEL)]
# On the daemon's threads the kernel also does the emulated namespace's host I/O (a read or
# write of the image file, plain or through io_uring): the device's, decided before io_uring.
_KERNEL_DAEMON_RULES = [
    ("device", re.compile(r"^(iomap_|ext4_|xfs_|btrfs_|filemap_|shmem_|generic_perform_write|generic_file_|"
                          r"blkdev_|submit_bio|vfs_(read|write)|do_iter_)")),
    ("fuse_client", _FUSE_KERNEL), ("io_uring", _IO_URING_KERNEL),
]
_IDLE = re.compile(r"do_idle|default_idle|cpu_idle|pvm_safe_halt|native_safe_halt|mwait_idle")


def _is_kernel(dso):
    return (dso or "").startswith("[kernel")


def layer_of_source(rel):
    """The layer of a source file given relative to the tree's root, or None (a system header)."""
    for prefix, layer in _SOURCE_LAYERS:
        if rel.startswith(prefix):
            return layer
    return None


def _daemon_frame_layer(frame, sources):
    """The layer one user-space frame of a daemon thread names, or None."""
    for rel in sources.get((frame.dso, frame.ip), ()):
        layer = layer_of_source(rel)
        if layer:
            return layer
    sym = frame.sym or ""
    for layer, rx in _USER_RULES:
        if rx.search(sym):
            return layer
    if "libfuse" in (frame.dso or ""):
        return "transport"
    if "liburing" in (frame.dso or ""):
        return "io_uring"
    return None


def classify(sample, is_daemon, is_app, sources=None):
    """The layer of one sample. is_daemon/is_app: whether its thread is the daemon's or the
    application's; sources: {(dso, ip): [source file relative to the tree, innermost first]}."""
    sources = sources or {}
    frames = sample.frames
    if sample.comm.startswith("swapper") or (frames and _IDLE.search(frames[0].sym or "")):
        return "idle"
    for f in frames:
        if _is_kernel(f.dso):
            if _SCHED.search(f.sym or ""):
                return "sched"
            for layer, rx in _KERNEL_APP_RULES if is_app else _KERNEL_DAEMON_RULES if is_daemon else ():
                if rx.search(f.sym or ""):
                    return layer
            continue
        if is_daemon:
            layer = _daemon_frame_layer(f, sources)
            if layer:
                return layer
    if is_app:
        return "kernel" if any(_is_kernel(f.dso) for f in frames) else "application"
    if is_daemon:
        if sample.comm.startswith("biofs-wcache"):
            return "device"
        return "transport" if sample.comm.startswith(("fuse-", "fuse_")) else "other"
    return "other"


def parse_perf_script(text):
    """[Sample] from `perf script -F comm,pid,tid,time,period,ip,sym,dso` (pid/tid and time may
    be absent; time in seconds)."""
    samples, cur = [], None
    for line in text.splitlines():
        if not line.strip():
            if cur:
                samples.append(cur)
                cur = None
            continue
        if not line[0].isspace():
            f = line.split()
            period = int(f[-1]) if f[-1].isdigit() else 0
            ids = [x for x in f[1:-1] if not x.endswith(":")]
            stamp = [float(x[:-1]) for x in f[1:-1] if x.endswith(":")]
            pid = int(ids[0].split("/")[0]) if ids and ids[0].split("/")[0].isdigit() else None
            cur = Sample(f[0], pid, period, [], stamp[0] if stamp else None)
            continue
        if cur is None:
            continue
        m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            cur.frames.append(Frame(m.group(2), m.group(3), int(m.group(1), 16)))
    if cur:
        samples.append(cur)
    return samples


def parse_addr2line(text, root):
    """{address: [source file relative to root, innermost first]} from `addr2line -i -a`'s output
    (an address line, then one file:line line per inlined frame); files outside root are kept
    as they are (a system header names no layer)."""
    out, cur = {}, None
    root = root.rstrip("/") + "/"
    for line in text.splitlines():
        line = line.strip()
        if re.fullmatch(r"0x[0-9a-f]+", line):
            cur = out.setdefault(int(line, 16), [])
            continue
        if cur is None or not line or line.startswith("??"):
            continue
        path = line.rsplit(":", 1)[0].split(" (")[0]
        cur.append(os.path.relpath(path, root) if path.startswith(root) else path)
    return out


def resolve_sources(samples, binaries, root):
    """{(dso, ip): [source files]} for every frame in one of `binaries` (the daemon's), via one
    `addr2line -i` per binary. A caller's frame holds a return address: its call is the byte
    before. {} where addr2line is missing."""
    wanted = collections.defaultdict(set)
    for s in samples:
        for i, f in enumerate(s.frames):
            if f.dso in binaries:
                wanted[f.dso].add((f.ip, f.ip - 1 if i else f.ip))
    out = {}
    for dso, pairs in wanted.items():
        lookups = sorted({look for _, look in pairs})
        try:
            p = subprocess.run(["addr2line", "-i", "-a", "-e", dso], input="\n".join(f"{a:#x}" for a in lookups),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired):
            continue
        files = parse_addr2line(p.stdout, root)
        for ip, look in pairs:
            out[(dso, ip)] = files.get(look, [])
    return out


def layer_ns(samples, daemon_pid=None, daemon_comms=("biofs", "fuse"), app_comms=("fio",), sources=None):
    """{layer: ns} summed over the samples (each weighs its period). A thread is the daemon's by
    its process id where daemon_pid is given, else by its name."""
    out = {k: 0 for k in LAYERS}
    for s in samples:
        is_daemon = s.pid == daemon_pid if daemon_pid is not None and s.pid is not None else \
            s.comm.startswith(daemon_comms)
        is_app = not is_daemon and s.comm.startswith(app_comms)
        out[classify(s, is_daemon, is_app, sources)] += s.period
    return out


def daemon_binaries(samples, daemon_pid):
    """The daemon's own binary as perf names it: the dso of its threads' frames not in the
    kernel or a shared library."""
    return {f.dso for s in samples if s.pid == daemon_pid for f in s.frames
            if f.dso and not _is_kernel(f.dso) and ".so" not in f.dso and f.dso.startswith("/")}


def record_window(seconds, path, read_counters, lead=1.0):
    """`perf record -e cpu-clock -a -g` on CLOCK_MONOTONIC around a window of `seconds`: perf
    starts, after `lead` seconds read_counters() is called, the window runs, read_counters()
    again. read_counters returns (its instant on CLOCK_MONOTONIC in seconds, anything).
    Returns (the samples between the two instants, counters before, counters after, the
    seconds between them), or None
    where perf is missing or refuses. Only the window's samples count, so they and the counters
    cover the same time (perf's own start and end are outside it)."""
    try:
        p = subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F", str(SAMPLE_HZ),
                              "-a", "-g",
                              "-o", path, "--", "sleep", str(lead + seconds + 0.5)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except OSError:
        return None
    time.sleep(lead)
    t0, before = read_counters()
    time.sleep(seconds)
    t1, after = read_counters()
    try:
        if p.wait(timeout=lead + seconds + 60) != 0:
            return None
        s = subprocess.run(["perf", "script", "-i", path, "-F", "comm,pid,tid,time,period,ip,sym,dso"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        p.kill()
        return None
    finally:
        for f in (path, path + ".old"):  # tens of MB each: the samples are what is kept
            if os.path.exists(f):
                os.unlink(f)
    return [x for x in parse_perf_script(s.stdout) if x.time is None or t0 <= x.time <= t1], before, after, t1 - t0
