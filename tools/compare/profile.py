"""Where an I/O's time goes, every layer (issue 44 §4, a first form): `perf record -e cpu-clock
-a -g` over a window, every sample on every CPU given to one layer by its thread and stack.

How a sample is assigned: idle for the idle task; else the stack is walked from the leaf to the
root and the first frame whose symbol names a layer decides (so a memcpy or a kernel copy
counts for the layer that called it); a stack that names none goes by its thread.

    application   fio's own user code (a fio thread's stack with no kernel frame)
    kernel        fio's system calls, the VFS and the rest of the kernel on fio's threads
    fuse_client   the kernel's FUSE client (fuse_* kernel functions)
    io_uring      io_uring in the kernel (io_* submission and completion, on any thread)
    transport     the daemon's FUSE side: the reactor, libfuse, daemon/ (FuseReactor, fuse_*)
    fs            fs/ (Filesystem, FileIo, Inode, Extent*, Journal, IoBatch, BlockIo, Kiocb)
    blockcore     blockcore/ (bio_*, blk_*, sbitmap*, BioSet, RequestQueue, Request)
    nvme          the NVMe driver (Nvme*, nvme_*)
    device        the emulated namespace (Emu*, the write cache's thread) and its host I/O
    sched         scheduling and wake-ups (schedule, finish_task_switch, try_to_wake_up, futex)
    idle          nothing to run
    other         everything else (kernel threads, other processes, a daemon frame of no layer)
"""
import re
import subprocess

LAYERS = ("application", "kernel", "fuse_client", "io_uring", "transport", "fs", "blockcore", "nvme", "device",
          "sched", "idle", "other")

# A user-space frame of the daemon: checked in this order, the first rule that matches decides.
_USER_RULES = [
    ("sched", re.compile(r"pthread_cond_(wait|timedwait|signal|broadcast)|__futex")),
    # In the daemon only the emulated namespace (and its write cache) reads and writes files with
    # plain system calls: its inline commands on a file in memory (nvme/emu_ns.h).
    ("device", re.compile(r"\bEmu[A-Z]\w*|emu_|biofs::copy_(from|to)_iovecs|^(__libc_)?p(read|write)v?(64)?(v2)?$")),
    ("nvme", re.compile(r"\bNvme[A-Z]\w*|\bnvme_")),
    ("fs", re.compile(r"\b(Filesystem|FileIo|Inode\w*|Extent\w*|Journal|IoBatch|BlockIo|Kiocb|Super|Namei|Dir)\b")),
    ("blockcore", re.compile(r"\bbio_|\bblk_|sbitmap|\bBioSet\b|\bRequestQueue\b|\bRequest\b|bvec_|submit_bio")),
    ("transport", re.compile(r"FuseReactor|fuse_|data_request|\bop_[a-z]+\b")),
]
# A kernel frame: sleeping and waking on any thread; on the application's threads also the
# FUSE client and io_uring.
_SCHED = re.compile(r"^(__)?schedule\b|finish_task_switch|try_to_wake_up|futex_(wait|wake)|^__futex")
_KERNEL_APP_RULES = [
    ("fuse_client", re.compile(r"^fuse_")),
    ("io_uring", re.compile(r"^io_|^__io_|io_uring")),
]
_IDLE = re.compile(r"do_idle|default_idle|cpu_idle|pvm_safe_halt|native_safe_halt|mwait_idle")


def _is_kernel(dso):
    return (dso or "").startswith("[kernel")


def classify(comm, frames, daemon_comms=("biofs", "fuse"), app_comms=("fio",)):
    """The layer of one sample. comm: its thread's name; frames: [(symbol, dso)] leaf first;
    daemon_comms: prefixes of the daemon's thread names; app_comms: the application's.
    Kernel frames decide only sleeping and waking (and, on the application's threads, the FUSE
    client and io_uring); a daemon thread's kernel work counts for the user frame that asked for
    it (the emulated namespace's host I/O is the device's, the reactor's io_uring_enter the
    transport's)."""
    if comm.startswith("swapper") or (frames and _IDLE.search(frames[0][0] or "")):
        return "idle"
    is_app = any(comm.startswith(a) for a in app_comms)
    for sym, dso in frames:
        sym = sym or ""
        if _is_kernel(dso):
            if _SCHED.search(sym):
                return "sched"
            if is_app:
                for layer, rx in _KERNEL_APP_RULES:
                    if rx.search(sym):
                        return layer
            continue
        if is_app:
            continue
        for layer, rx in _USER_RULES:
            if rx.search(sym):
                return layer
        if "libfuse" in (dso or ""):
            return "transport"
    if is_app:
        return "kernel" if any(_is_kernel(d) for _, d in frames) else "application"
    if comm.startswith("biofs-wcache"):
        return "device"
    if any(comm.startswith(d) for d in daemon_comms):
        return "transport" if comm.startswith(("fuse-", "fuse_")) else "other"
    return "other"


def parse_perf_script(text):
    """[(comm, period_ns, [(symbol, dso)])] from `perf script -F comm,tid,period,ip,sym,dso`."""
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
            cur = (f[0], period, [])
            continue
        if cur is None:
            continue
        m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            cur[2].append((m.group(1), m.group(2)))
    if cur:
        samples.append(cur)
    return samples


def layer_ns(samples, daemon_comms=("biofs", "fuse"), app_comms=("fio",)):
    """{layer: ns} summed over the samples (each weighs its period)."""
    out = {k: 0 for k in LAYERS}
    for comm, period, frames in samples:
        out[classify(comm, frames, daemon_comms, app_comms)] += period
    return out


def record(seconds, path):
    """perf record -e cpu-clock -a -g for `seconds` into path; the parsed samples, or None
    where perf is missing or refuses."""
    try:
        p = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-a", "-g", "-o", path, "--", "sleep",
                            str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=seconds + 60)
        if p.returncode != 0:
            return None
        s = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,period,ip,sym,dso"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_perf_script(s.stdout)
