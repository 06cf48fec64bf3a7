"""biofs_tools: what tools/biofs-compare (its modules in tools/compare/), biofs-stat,
biofs-workload and biofs-instructions share.

The scripts find this file beside their own (the directory of their real path, so a symlink to
a script works too); whatever installs the scripts installs this file, and the compare/ folder,
next to them.

    the mount's counters   read_stats, STATS_XATTR (fs/stats.h)
    numbers and sizes      median, parse_size, fmt_ns
    per-thread CPU         read_thread_cpu, thread_role, cpu_by_role, ROLES
    intervals and verdicts paired_ratio_ci, pooled_ratio_ci, half_width, verdict, adaptive_pairs
    commands and mounts    log, run, umount, LoopExt4
"""
import json
import math
import os
import random
import re
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


def debian_archive():
    """The Debian archive this machine's apt sources use for its release ('' if none): the
    first http(s) URI `apt-cache policy` lists for CODENAME/main."""
    try:
        with open("/etc/os-release") as f:
            codename = next((l.split("=", 1)[1].strip().strip('"') for l in f if l.startswith("VERSION_CODENAME=")), "")
        out = subprocess.run(["apt-cache", "policy"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] == f"{codename}/main" and f[1].startswith(("http://", "https://")):
            return f[1]
    return ""


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


# ---- per-thread CPU, from /proc ----------------------------------------------------------------
#
# This VM has no hardware performance counters (perf_event_open offers only software events), so
# CPU time is the scheduler's per-thread clock: the first field of /proc/PID/task/TID/schedstat,
# nanoseconds on a CPU (user and kernel: the system calls a thread makes, the faults it takes),
# or, where a kernel has no schedstat, utime + stime of /proc/PID/task/TID/stat in clock ticks
# (1/SC_CLK_TCK s, 10 ms here: too coarse for a short run, and said so in the source column).

# Thread roles by name (comm, at most 15 characters). The daemon names its own threads
# (biofs-cq, biofs-nullcq, biofs-commit, biofs-trim); libfuse's /dev/fuse workers are fuse_worker
# (with libfuse 3.14 they inherit the main thread's name, biofs); FUSE-over-io_uring queue threads
# are fuse-reactor-N (the reactor, fuse_uring=on) or fuse-ring-N (libfuse's, fuse_uring=libfuse); iou-wrk-N / iou-sqp-N are the kernel's io_uring workers and SQPOLL threads on
# the daemon's rings (file I/O or commands that could not complete inline), which belong to the
# process and are counted with it.
ROLES = ("fuse", "completion", "commit", "io_wq", "other")


def thread_role(comm):
    """The role of a daemon thread from its name: fuse, completion, commit, io_wq or other."""
    if comm in ("biofs", "fuse_worker") or comm.startswith(("fuse-ring-", "fuse-reactor-", "fuse_worker")):
        return "fuse"
    if comm.startswith("biofs-cq") or comm.startswith("biofs-nullcq"):
        return "completion"
    if comm.startswith("biofs-commit"):
        return "commit"
    if comm.startswith("iou-wrk-") or comm.startswith("iou-sqp-"):
        return "io_wq"
    return "other"


def parse_task_stat(text):
    """(comm, utime + stime in ticks, start time in ticks) from a /proc/.../stat line (the comm
    may hold spaces and parentheses: the fields start after the last ')')."""
    comm = text[text.index("(") + 1:text.rindex(")")]
    f = text[text.rindex(")") + 2:].split()
    # f[0] is field 3 (state): utime, stime are fields 14 and 15, starttime field 22.
    return comm, int(f[11]) + int(f[12]), int(f[19])


def read_thread_cpu(pid, proc="/proc"):
    """Every thread of pid now: {tid: (comm, start_ticks, cpu_ns, source)}, source 'schedstat'
    (ns on a CPU) or 'ticks' (utime + stime). A thread that ends while being read is left out;
    {} when the process is gone."""
    hz = os.sysconf("SC_CLK_TCK")
    base = f"{proc}/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return {}
    out = {}
    for tid in tids:
        try:
            with open(f"{base}/{tid}/stat") as f:
                comm, ticks, start = parse_task_stat(f.read())
        except (OSError, ValueError, IndexError):
            continue
        ns, source = None, "schedstat"
        try:
            with open(f"{base}/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
        if ns is None or (ns == 0 and ticks > 0):  # no schedstat, or sched_info off ("0 0 0")
            ns, source = ticks * 1_000_000_000 // hz, "ticks"
        out[int(tid)] = (comm, start, ns, source)
    return out


def read_process_cpu_ns(pid, proc="/proc"):
    """The whole process's utime + stime (/proc/PID/stat, clock ticks, as ns): coarse, but it keeps
    the time of threads that have exited. None when the process is gone."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            _, ticks, _ = parse_task_stat(f.read())
    except (OSError, ValueError, IndexError):
        return None
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def cpu_by_role(before, after):
    """CPU ns per role between two read_thread_cpu() reads. A thread present at both counts its
    difference; one that started in between (absent before, or its tid reused: another start
    time) counts everything it has at the end; one that ended in between is not seen (its time
    since `before` is lost; `exited` counts them). Returns ({role: ns}, info) with info:
    threads (at the end), started, exited, source ('schedstat', 'ticks' or 'mixed'), by_name
    ({thread name, trailing digits as N: ns}: fuse-ring-N, iou-wrk-N, ...)."""
    roles = {r: 0 for r in ROLES}
    names = {}
    started = 0
    sources = set()
    for tid, (comm, start, ns, source) in after.items():
        b = before.get(tid)
        if b and b[1] == start:
            base = b[2]
        else:
            base = 0
            started += 1
        roles[thread_role(comm)] += max(0, ns - base)
        name = comm.rstrip("0123456789") + "N" if comm[-1:].isdigit() else comm
        names[name] = names.get(name, 0) + max(0, ns - base)
        sources.add(source)
    exited = sum(1 for tid, b in before.items() if tid not in after or after[tid][1] != b[1])
    source = sources.pop() if len(sources) == 1 else ("mixed" if sources else "none")
    return roles, dict(threads=len(after), started=started, exited=exited, source=source, by_name=names)


# ---- intervals and verdicts ---------------------------------------------------------------------
#
# A percentile bootstrap, pure Python (random.Random with a fixed seed, so a report is the same
# every time it is made from the same runs). The units resampled are the repeats: for a paired
# comparison, the pairs (A and B of one repeat ran back to back, A/B then B/A), so what the
# neighbours did to both sides of a pair cancels in its ratio.
#
# A plain percentile bootstrap is too narrow for a handful of units (with 3 it covers far less
# than 95%: it uses the normal quantile and the plug-in variance). So the interval is the
# "expanded" percentile interval (Hesterberg, "What teachers should know about the bootstrap",
# 2015): the percentiles taken at alpha' with z(alpha'/2) = sqrt(n/(n-1)) * t(alpha/2, n-1).
# With 2 or 3 units that reaches the bootstrap's extremes, the range of the units' values; from
# about 10 on it is close to the plain one. Simulated (normal log-ratios), it covers the true
# ratio 73% of the time with 3 pairs (the range of three), 92% with 5, 96% with 10, 95% with 20:
# MIN_PAIRS_95 is the fewest pairs the adaptive mode calls resolved.
MIN_PAIRS_95 = 5

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261202
# Student's t, 97.5% quantile, for 1..30 degrees of freedom.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042)


def t975(df):
    """Student's t 97.5% quantile: the table to 30 degrees of freedom, then Cornish-Fisher."""
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959963984540054
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df)


def expanded_alpha(n):
    """The two-sided tail probability for the 95% expanded percentile interval of n units."""
    z = math.sqrt(n / (n - 1)) * t975(n - 1)
    return 2.0 * statistics.NormalDist().cdf(-z)


def _percentiles(values, alpha):
    values = sorted(values)
    n = len(values)
    lo = values[max(0, min(n - 1, int(math.floor(alpha / 2 * n))))]
    hi = values[max(0, min(n - 1, int(math.ceil((1.0 - alpha / 2) * n)) - 1))]
    return lo, hi


def bootstrap(stat, n, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED):
    """Bootstrap 95% interval (expanded percentile, see above) of stat(indices) over n units
    resampled with replacement: (lo, hi); None for fewer than two units (one has no interval)."""
    if n < 2:
        return None
    rng = random.Random(seed)
    vals = [stat([rng.randrange(n) for _ in range(n)]) for _ in range(resamples)]
    return _percentiles(vals, expanded_alpha(n))


def paired_ratio_ci(a, b, **kw):
    """B/A over paired repeats, in percent (+10.0 = B is 10% higher): the geometric mean of the
    per-pair ratios b[i]/a[i] minus 1, and its paired bootstrap 95% interval (pairs resampled).
    Pairs with a value <= 0 or None are left out. Returns (estimate, lo, hi, pairs); lo and hi
    are None with fewer than two pairs; estimate None with none."""
    logs = [math.log(y / x) for x, y in zip(a, b) if x and y and x > 0 and y > 0]
    if not logs:
        return None, None, None, 0
    pct = lambda m: (math.exp(m) - 1.0) * 100.0  # noqa: E731
    est = pct(sum(logs) / len(logs))
    ci = bootstrap(lambda idx: sum(logs[i] for i in idx) / len(idx), len(logs), **kw)
    if ci is None:
        return est, None, None, len(logs)
    return est, pct(ci[0]), pct(ci[1]), len(logs)


def pooled_ratio_ci(nums, dens, **kw):
    """sum(nums) / sum(dens) over repeats (e.g. CPU ns over I/Os: every I/O weighs the same) and
    its bootstrap 95% interval over the repeats. Returns (estimate, lo, hi); None where there is
    nothing, lo and hi None with one repeat."""
    pairs = [(x, y) for x, y in zip(nums, dens) if x is not None and y]
    if not pairs:
        return None, None, None

    def ratio(idx):
        d = sum(pairs[i][1] for i in idx)
        return sum(pairs[i][0] for i in idx) / d if d else 0.0
    est = ratio(range(len(pairs)))
    ci = bootstrap(ratio, len(pairs), **kw)
    return (est, None, None) if ci is None else (est, ci[0], ci[1])


def half_width(lo, hi):
    """Half the width of an interval, in its units; infinity where there is none."""
    return math.inf if lo is None or hi is None else (hi - lo) / 2.0


def verdict(est, lo, hi, pairs=None):
    """The reading of a ratio's interval (percent): "effect +X% [lo, hi]" where the interval
    excludes 0, else "no effect larger than Y% at this resolution" (Y the larger |bound|). With
    `pairs` below MIN_PAIRS_95 it says that the interval is the pairs' range, not 95%."""
    if est is None:
        return "no data"
    if lo is None or hi is None:
        return f"{est:+.2f}% from one pair: no interval"
    few = f" ({pairs} pairs: range, not 95%)" if pairs is not None and pairs < MIN_PAIRS_95 else ""
    if lo > 0 or hi < 0:
        return f"effect {est:+.2f}% [{lo:+.2f}%, {hi:+.2f}%]{few}"
    return f"no effect larger than {max(abs(lo), abs(hi)):.2f}% at this resolution [{lo:+.2f}%, {hi:+.2f}%]{few}"


def adaptive_pairs(pairs, run_pair, resolution, min_pairs, max_pairs, deadline, clock=time.monotonic):
    """Adds paired repeats to `pairs` (a list, extended in place) until the 95% interval of every
    metric's B/A ratio has a half-width <= resolution (percentage points), or max_pairs are done,
    or the clock passes deadline (None: no deadline; a pair is not started when the last one
    took longer than the time left). Never resolved with fewer than max(min_pairs, MIN_PAIRS_95)
    pairs. pairs[i] is {metric: (a, b)} for repeat i + 1 (a None side: not measured); run_pair(rep)
    runs repeat rep (1-based) and returns its pair. Returns (reason, widths): reason 'resolved',
    'max-repeats' or 'budget', widths {metric: half-width} at the stop."""
    last = 0.0
    while True:
        widths = {}
        for m in sorted({k for p in pairs for k in p}):
            vals = [p[m] for p in pairs if m in p and p[m][0] is not None and p[m][1] is not None]
            if not vals:
                continue  # a metric no run measured (CPU where /proc could not be read) has no say
            _, lo, hi, _ = paired_ratio_ci([v[0] for v in vals], [v[1] for v in vals])
            widths[m] = half_width(lo, hi)
        if len(pairs) >= max(MIN_PAIRS_95, min_pairs) and widths and all(w <= resolution for w in widths.values()):
            return "resolved", widths
        if len(pairs) >= max_pairs:
            return "max-repeats", widths
        now = clock()
        if deadline is not None and (now >= deadline or now + last > deadline):
            return "budget", widths
        pairs.append(run_pair(len(pairs) + 1) or {})
        last = clock() - now


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


def daemon_pid(mnt, names):
    """The pid of the daemon serving mnt: pgrep on the mount's command line, then the one whose
    arguments hold mnt exactly and whose program is one of names."""
    p = run(["pgrep", "-f", re.escape(mnt)], check=False)
    for pid in p.stdout.split():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if args and os.path.basename(args[0]) in names and mnt in args[1:]:
            return int(pid)
    return None


def wait_gone(pid, seconds=30):
    """Waits for a daemon to exit after its unmount (it may still be flushing)."""
    end = time.monotonic() + seconds
    while pid and time.monotonic() < end:
        if not os.path.exists(f"/proc/{pid}"):
            return
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.1)


def wait_mounted(mnt, seconds=15):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.ismount(mnt):
            return True
        time.sleep(0.05)
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


PASSTHROUGH_HP_DEFAULT = "/opt/biofs-libfuse/bin/passthrough_hp"  # tools/build-libfuse.sh


class PassthroughHp:
    """libfuse's example passthrough_hp serving `source` at `mnt` (the reference FUSE
    filesystem), with --nopassthrough so every read and write goes through the daemon as biofs's
    do; uring: over FUSE-over-io_uring (-o io_uring) instead of /dev/fuse."""

    def __init__(self, binary, source, mnt, uring=False):
        self.binary, self.source, self.mnt, self.uring = binary, source, mnt, uring
        self.pid = None

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        cmd = [self.binary, "--nopassthrough"] + (["-o", "io_uring"] if self.uring else []) + [self.source, self.mnt]
        run(cmd, timeout=60)  # it daemonizes before it mounts
        if not wait_mounted(self.mnt):
            raise RuntimeError(f"passthrough_hp: {self.mnt} not mounted after 15 s")
        self.pid = daemon_pid(self.mnt, (os.path.basename(self.binary),))
        return self

    def __exit__(self, *exc):
        if os.path.ismount(self.mnt):
            umount(self.mnt)
        wait_gone(self.pid)
