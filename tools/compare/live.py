"""biofs-compare --live: a live toggle's two values interleaved inside one run (issue 44 §2).

    biofs-compare --live --toggle NAME=A,B [--image PATH --image-size SIZE | --device DEV]
                  [--cells io_uring/64/randread,...] [--pairs 40] [--target PCT --min-pairs 20]
                  [--window 0.05] [--settle 0.01]
                  [--file-size 256M] [--mount-opts OPTS] [--bin DIR] [--out DIR] [--seed N]
                  [--fio-cpus LIST|auto|none] [--profile SECONDS]

One mount and one fio per cell (ENGINE/QDEPTH/PATTERN, 4 KiB direct, time-based). While fio
runs, the toggle flips between A and B (daemon/live_toggles.h, `user.biofs.set`) in --pairs
pairs of windows, each pair's order drawn at random (fixed seed); after each flip a --settle gap
whose I/Os are not counted, then a --window whose I/Os, time and CPU the daemon itself counts
(one stats snapshot at each end: the filesystem's bios, one per fio I/O, whatever the device
then sees of them; its CLOCK_MONOTONIC; its process CPU).
Neighbouring windows share the machine's drift, so a pair's ratio cancels most of it.

Verdict per cell, for IOPS and CPU per I/O: B/A is the Hodges-Lehmann estimate over the pairs'
ratios (the median of their Walsh averages); its interval is Wilcoxon's signed-rank interval at
95% / k, where k is the number of intervals the run prints (Bonferroni: the chance that any of
them misses is at most 5%). The random order within each pair is what makes it valid: a
disturbance of the machine falls on A or on B with equal chance. --target PCT: a cell stops
adding pairs once both its intervals are within +-PCT (after --min-pairs), so the time goes to
the cells that need it. Written to --out: live.csv (one row per window) and live.md (the
verdicts), printed at the end. --profile S: after a cell's windows, S seconds of `perf record
-e cpu-clock -a -g` per side, every sample on every CPU given to a layer (compare/profile.py:
how), as ns per I/O in profile.csv, live.md and profile.png (a stacked bar per side). Toggles
that cannot change live are refused by the daemon in one line; use the remount mode
(biofs-compare without --live) for them.
"""
import argparse
import math
import os
import random
import signal
import statistics
import subprocess
import tempfile
import time

from biofs_tools import (daemon_pid, log, parse_size, read_stats,
                         run, umount)

from . import profile
from .profile_plot import plot_profile
from .toggles import toggle_pairs

LIVE_CSV_HEADER = "cell,pair,side,value,seconds,ios,cpu_ns,commands"
PROFILE_CSV_HEADER = "cell,side,value,ios,busy_ns,daemon_cpu_ns,daemon_sampled_ns," + ",".join(f"{k}_ns" for k in profile.LAYERS)
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- pure helpers (tests/tools import these) ------------------------------------------------------

def pair_orders(pairs, seed):
    """For each pair, the order its two windows run in: ("A", "B") or ("B", "A"), at random."""
    rng = random.Random(seed)
    return [("A", "B") if rng.random() < 0.5 else ("B", "A") for _ in range(pairs)]


# Exact null distribution of Wilcoxon's signed-rank statistic up to this many pairs; the normal
# approximation (with its variance) beyond, where the two differ by less than one Walsh average.
EXACT_SIGNED_RANK_MAX = 60


def signed_rank_drop(n, alpha):
    """How many Walsh averages to leave out at each end for a two-sided 1-alpha interval over n
    pairs: the largest k with P(W+ <= k-1) <= alpha/2 under symmetry about 0 (W+: the signed-rank
    sum). 0 when n pairs cannot give an interval at that level."""
    if n <= EXACT_SIGNED_RANK_MAX:
        m = n * (n + 1) // 2
        count = [1] + [0] * m  # subsets of the ranks 1..n by their sum: W+'s 2^n outcomes
        for rank in range(1, n + 1):
            for s in range(m, rank - 1, -1):
                count[s] += count[s - rank]
        k, below = 0, 0
        while below + count[k] <= alpha / 2 * 2 ** n:
            below += count[k]
            k += 1
        return k
    mean, sd = n * (n + 1) / 4.0, math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    return max(0, int(math.floor(mean - z * sd + 0.5)))


def signed_rank_ci(a, b, intervals=1):
    """B/A in percent over pairs: the Hodges-Lehmann estimate (the median of the Walsh averages
    of the pairs' log ratios) and the Wilcoxon signed-rank interval at 95% / intervals
    (Bonferroni). Each pair's order is drawn at random, so a disturbance of the machine (a slow
    stretch, a neighbour's burst) lands on A or on B with equal chance: under no effect the log
    ratios are symmetric about 0 and independent in sign, which is all this interval assumes;
    one disturbed window moves it by one rank, not by its size. Returns (est, lo, hi, n); lo and
    hi None where the pairs are too few for the level."""
    logs = [math.log(y / x) for x, y in zip(a, b) if x and y and x > 0 and y > 0]
    n = len(logs)
    if not n:
        return None, None, None, 0
    walsh = sorted((logs[i] + logs[j]) / 2.0 for i in range(n) for j in range(i, n))
    m = len(walsh)
    pct = lambda x: (math.exp(x) - 1.0) * 100.0  # noqa: E731
    est = pct(walsh[m // 2] if m % 2 else (walsh[m // 2 - 1] + walsh[m // 2]) / 2.0)
    k = signed_rank_drop(n, 0.05 / max(1, intervals))
    if k == 0:
        return est, None, None, n
    return est, pct(walsh[k - 1]), pct(walsh[m - k]), n


def window_rates(rows):
    """{pair: {side: (IOPS, CPU ns per I/O)}} from live.csv rows of one cell."""
    out = {}
    for r in rows:
        if r["ios"] and r["seconds"]:
            cpu = r["cpu_ns"] / r["ios"] if r["cpu_ns"] is not None else None
            out.setdefault(r["pair"], {})[r["side"]] = (r["ios"] / r["seconds"], cpu)
    return out


def live_verdicts(rows, cells, intervals):
    """[(cell, metric, est, lo, hi, n)] for IOPS and CPU/IO of each cell, pairs in run order."""
    out = []
    for cell in cells:
        rates = window_rates([r for r in rows if r["cell"] == cell])
        pairs = [rates[p] for p in sorted(rates) if "A" in rates[p] and "B" in rates[p]]
        for m, metric in ((0, "IOPS"), (1, "CPU/IO")):
            a = [p["A"][m] for p in pairs]
            b = [p["B"][m] for p in pairs]
            out.append((cell, metric) + signed_rank_ci(a, b, intervals))
    return out


def resolved(verdicts, target):
    """Whether every interval of these verdicts is at most +-target percent wide (half its
    width): the precision the run stops at. Stopping on the width, never on whether an interval
    holds 0, leaves the intervals' coverage nearly as it is (for symmetric log ratios an
    interval's width and its position are close to independent)."""
    return all(lo is not None and (hi - lo) / 2.0 <= target for _, _, _, lo, hi, _ in verdicts)


def verdict_line(est, lo, hi, n):
    if est is None:
        return "no data"
    if lo is None:
        return f"{est:+.2f}% ({n} pairs: too few for an interval)"
    if lo > 0 or hi < 0:
        return f"effect {est:+.2f}% [{lo:+.2f}%, {hi:+.2f}%]"
    return f"no effect larger than {max(abs(lo), abs(hi)):.2f}% [{lo:+.2f}%, {hi:+.2f}%]"


def busy_ns(layers):
    """The sampled CPU time of every layer but idle."""
    return sum(ns for k, ns in layers.items() if k != "idle")


def block_share(layers):
    """The block layer's share of the CPU an I/O costs (every layer but idle), percent; None
    with no samples."""
    busy = busy_ns(layers)
    return 100.0 * layers["blockcore"] / busy if busy else None


def commands_per_io(rows, cell, side):
    """The device's commands per fio I/O over a side's windows: 1 where each bio is a command of
    its own, below 1 where bios merged, above where they split; None without I/Os."""
    ios = sum(r["ios"] for r in rows if r["cell"] == cell and r["side"] == side)
    return sum(r.get("commands", 0) for r in rows if r["cell"] == cell and r["side"] == side) / ios if ios else None


def profile_table(rows, cfg):
    """live.md's per-layer lines: ns per I/O of every layer, A beside B, per cell; the block
    layer's share; the samples against the measured busy time, every CPU's and the daemon's
    (the check that the bars add up)."""
    if not rows:
        return []
    out = ["", f"Where the time goes, every CPU ({cfg.profile:g} s of perf cpu-clock samples per side after the "
                "windows; ns per I/O; idle included, so a row sums to the CPUs' time per I/O; compare/profile.py "
                "says how each sample was assigned). block %: blockcore's share of the busy CPU (all but idle); "
                "sampled/measured: the busy samples against every CPU's busy time over the same seconds "
                "(/proc/stat), and the daemon's samples against its process CPU time (its stats' cpu_ns); IOPS "
                "while sampled, against the windows' (what perf costs):", "",
           "| cell | side | " + " | ".join(profile.LAYERS) + " | block % | sampled/measured | daemon's | IOPS sampled |",
           "|" + " --- |" * (len(profile.LAYERS) + 6)]
    for r in rows:
        per = [f"{r['layers'][k] / r['ios']:.0f}" if r["ios"] else "-" for k in profile.LAYERS]
        share = block_share(r["layers"])
        ratio = lambda a, b: f"{a / b:.3f}" if b else "-"  # noqa: E731
        busy = busy_ns(r["layers"])
        out.append(f"| {r['cell']} | {r['value']} | " + " | ".join(per) +
                   f" | {'-' if share is None else f'{share:.1f}'} | {ratio(busy, r['busy_ns'])} | "
                   f"{ratio(r['daemon_sampled_ns'], r['daemon_cpu_ns'])} | "
                   f"{r['ios'] / r['seconds'] if r['seconds'] else 0:.0f} |")
    return out


# ---- the run --------------------------------------------------------------------------------------

def busy_cpu_ns():
    """Every CPU's busy time (/proc/stat: all but idle and iowait), ns."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def daemon_snapshot(mnt):
    """(the filesystem's bios, the daemon's clock in ns, its CPU time in ns, the device's
    commands), all from one stats snapshot: a window is timed and charged by the daemon at the
    instants it counted, whatever the wait for the xattr read under a full queue. A bio per fio
    I/O (4 KiB direct), whether the device then sees it alone, merged into a neighbour
    (nomerges) or split."""
    st = read_stats(mnt)
    return st["io"]["fs_bios"], st["time_ns"], st["cpu_ns"], st["io"]["reads"] + st["io"]["writes"]


def window_counters(mnt):
    """(the daemon's snapshot instant in s, (its bios, its CPU ns, every CPU's busy ns))."""
    ios, t_ns, cpu, _ = daemon_snapshot(mnt)
    return t_ns / 1e9, (ios, cpu, busy_cpu_ns())


def set_toggle(mnt, name, value):
    try:
        os.setxattr(mnt, "user.biofs.set", f"{name}={value}".encode())
    except OSError as e:
        why = read_stats(mnt, missing_ok=True).get("live", {}).get("last_refusal") or e.strerror
        raise RuntimeError(f"{name}={value} cannot be set live: {why}") from None


def run_cell(cfg, cell, orders, emit, emit_profile):
    engine, qd, pattern = cell.split("/")
    total = 1.1 * len(orders) * 2 * (cfg.window + cfg.settle) + 30  # + the snapshots' own time
    path = os.path.join(cfg.mnt, "live.dat")
    run(["fio", "--name=lay", f"--filename={path}", f"--size={cfg.file_size}", "--rw=write", "--bs=1M",
         "--direct=1", "--ioengine=psync"], timeout=600)
    fio = subprocess.Popen(["fio", "--name=live", f"--filename={path}", f"--size={cfg.file_size}",
                            f"--rw={pattern}", "--bs=4k", "--direct=1", f"--ioengine={engine}",
                            f"--iodepth={qd}", "--time_based", f"--runtime={int(total)}", "--norandommap",
                            "--randrepeat=0"] + ([f"--cpus_allowed={cfg.fio_cpus}"] if cfg.fio_cpus else []),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # fio starts and reaches its depth
        values = {"A": cfg.a, "B": cfg.b}
        rows = []
        for pair, order in enumerate(orders, 1):
            for side in order:
                set_toggle(cfg.mnt, cfg.name, values[side])
                time.sleep(cfg.settle)
                ios0, t0, cpu0, cmd0 = daemon_snapshot(cfg.mnt)
                time.sleep(cfg.window)
                ios1, t1, cpu1, cmd1 = daemon_snapshot(cfg.mnt)
                rows.append(dict(cell=cell, pair=pair, side=side, value=values[side], seconds=(t1 - t0) / 1e9,
                                 ios=ios1 - ios0, cpu_ns=cpu1 - cpu0, commands=cmd1 - cmd0))
                emit(rows[-1])
            if fio.poll() is not None:
                raise RuntimeError(f"fio ended early: {fio.stderr.read()[-300:]}")
            # Checked every 10 pairs: the interval costs O(pairs^2) to compute.
            if pair >= cfg.min_pairs and pair % 10 == 0 and resolved(live_verdicts(rows, [cell], cfg.intervals),
                                                                    cfg.target):
                break
        if cfg.profile:
            for side in ("A", "B"):
                set_toggle(cfg.mnt, cfg.name, values[side])
                time.sleep(cfg.settle)
                got = profile.record_window(cfg.profile, os.path.join(cfg.out, "perf.data"),
                                            lambda: window_counters(cfg.mnt))
                if got is None:
                    log("biofs-compare --live: perf record failed (is perf installed, and may it see every CPU?)")
                    break
                samples, (ios0, cpu0, busy0), (ios1, cpu1, busy1), seconds = got
                sources = profile.resolve_sources(samples, profile.daemon_binaries(samples, cfg.pid), REPO_ROOT)
                emit_profile(dict(cell=cell, side=side, value=values[side], ios=ios1 - ios0, daemon_cpu_ns=cpu1 - cpu0,
                                  busy_ns=busy1 - busy0, seconds=seconds,
                                  layers=profile.layer_ns(samples, cfg.pid, sources=sources),
                                  daemon_sampled_ns=sum(x.period for x in samples if x.pid == cfg.pid)))
    finally:
        fio.send_signal(signal.SIGINT)
        try:
            fio.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fio.kill()


def default_fio_cpus(given, allowed=None):
    """fio's CPU list for the live mode: one CPU of its own by default. Unpinned on the 2-CPU
    VM, fio and the daemon's threads move between placements that hold for seconds (IOPS
    90K in one, 135K in the other at depth 64), and windows in different placements vary by
    10-14%; with fio on the last CPU they vary by 1.6% (docs/results.md, "fio's CPU")."""
    if given == "none":
        return ""
    if given != "auto":
        return given
    cpus = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
    return str(cpus[-1]) if len(cpus) >= 2 else ""


def parse_args(argv):
    p = argparse.ArgumentParser(prog="biofs-compare --live", description=__doc__.split("\n")[0])
    p.add_argument("--toggle", default="bio_cache")
    p.add_argument("--image", default="/tmp/biofs-live.img")
    p.add_argument("--image-size", default="1G")
    p.add_argument("--device", default=None, help="default emu:IMAGE")
    p.add_argument("--cells", default="io_uring/64/randread,io_uring/1/randread,io_uring/64/randwrite,io_uring/1/randwrite")
    p.add_argument("--pairs", type=int, default=40, help="the most pairs per cell")
    p.add_argument("--target", type=float, default=0,
                   help="stop a cell once every interval of it is at most +-PCT wide (0: run every pair)")
    p.add_argument("--min-pairs", type=int, default=20, help="with --target, the fewest pairs per cell")
    # Short windows close together cancel more of the machine's drift than long ones: on the
    # 2-CPU VM, A/A at depth 64 over the same 65 s, 0.05 s windows gave intervals a third as
    # wide as 0.3 s ones (docs/results.md, "Window length"). A toggle whose effect takes longer
    # than the settle gap to set in (a cache that fills slowly) needs a longer --settle.
    p.add_argument("--window", type=float, default=0.05)
    p.add_argument("--settle", type=float, default=0.01)
    p.add_argument("--file-size", default="256M")
    p.add_argument("--mount-opts", default="")
    p.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "build", "bin"))
    p.add_argument("--out", default="biofs-live-out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--fio-cpus", default="auto",
                   help="fio's CPUs (fio --cpus_allowed), e.g. 0; auto: the last CPU this may use where it "
                        "may use two or more; none: where the scheduler puts it")
    p.add_argument("--profile", type=float, default=0,
                   help="after the windows, SECONDS of perf cpu-clock samples per side, by layer (compare/profile.py)")
    a = p.parse_args(argv)
    name, _, pair = a.toggle.partition("=")
    if pair:
        a.a, a.b = pair.split(",", 1)
    else:
        known = toggle_pairs(a.bin)
        if name not in known:
            p.error(f"--toggle {name}: no default pair (give NAME=A,B)")
        a.a, a.b = known[name][:2]
    a.name = name
    a.cells = [c for c in a.cells.split(",") if c]
    if a.pairs < 6:
        p.error("--pairs: at least 6 (the fewest a signed-rank interval at 95% needs)")
    if not a.target:
        a.min_pairs = a.pairs
    a.min_pairs = max(6, min(a.min_pairs, a.pairs))
    a.intervals = 2 * len(a.cells)
    a.fio_cpus = default_fio_cpus(a.fio_cpus)
    return a


def main(argv):
    cfg = parse_args(argv)
    os.makedirs(cfg.out, exist_ok=True)
    cfg.mnt = tempfile.mkdtemp(prefix="biofs-live-mnt.")
    made_image = False
    if not cfg.device:
        if not os.path.exists(cfg.image):
            with open(cfg.image, "wb") as f:
                f.truncate(parse_size(cfg.image_size))
            made_image = True
        cfg.device = f"emu:{cfg.image}"
    rows = []
    csv_path = os.path.join(cfg.out, "live.csv")
    with open(csv_path, "w") as f:
        f.write(LIVE_CSV_HEADER + "\n")

    def emit(r):
        rows.append(r)
        with open(csv_path, "a") as f:
            f.write(f"{r['cell']},{r['pair']},{r['side']},{r['value']},{r['seconds']:.6f},{r['ios']},{r['cpu_ns']},{r['commands']}\n")

    prof_rows = []
    prof_path = os.path.join(cfg.out, "profile.csv")
    if cfg.profile:
        with open(prof_path, "w") as f:
            f.write(PROFILE_CSV_HEADER + "\n")

    def emit_profile(r):
        prof_rows.append(r)
        with open(prof_path, "a") as f:
            f.write(f"{r['cell']},{r['side']},{r['value']},{r['ios']},{r['busy_ns']},{r['daemon_cpu_ns']},{r['daemon_sampled_ns']}," +
                    ",".join(str(r["layers"][k]) for k in profile.LAYERS) + "\n")

    t0 = time.monotonic()
    try:
        if made_image:
            run([os.path.join(cfg.bin, "mkfs.biofs"), "-q", cfg.image])
        for i, cell in enumerate(cfg.cells):
            opts = [f"{cfg.name}={cfg.a}"] + ([cfg.mount_opts] if cfg.mount_opts else [])
            run([os.path.join(cfg.bin, "biofs"), cfg.device, cfg.mnt, "-o", ",".join(opts)], timeout=60)
            cfg.pid = daemon_pid(cfg.mnt, ("biofs",))
            try:
                most = f"{cfg.min_pairs}-{cfg.pairs} pairs (until +-{cfg.target:g}%)" if cfg.target else f"{cfg.pairs} pairs"
                log(f"biofs-compare --live: {cell}: {most} of {cfg.window} s windows, {cfg.name}={cfg.a},{cfg.b}")
                run_cell(cfg, cell, pair_orders(cfg.pairs, cfg.seed + i), emit, emit_profile)
            finally:
                umount(cfg.mnt)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log(f"biofs-compare --live: {e}")
        return 1
    finally:
        if os.path.isdir(cfg.mnt) and not os.path.ismount(cfg.mnt):
            os.rmdir(cfg.mnt)
        if made_image:
            os.unlink(cfg.image)
    k = cfg.intervals
    stop = (f"{cfg.min_pairs} to {cfg.pairs} pairs, each cell stopping once its intervals are within "
            f"+-{cfg.target:g}%") if cfg.target else f"{cfg.pairs} pairs"
    lines = [f"# biofs-compare --live: {cfg.name}={cfg.a} (A) vs {cfg.b} (B)", "",
             f"Mode: live (one mount and one fio per cell; {stop} of {cfg.window} s windows in random "
             f"order, {cfg.settle} s settle after each flip). Device `{cfg.device}`, 4 KiB direct I/O. B/A: the "
             f"Hodges-Lehmann estimate of the pairs' ratios; intervals: Wilcoxon signed-rank at 95%/{k} each "
             f"(Bonferroni over the {k} intervals below). {time.monotonic() - t0:.0f} s.", "",
             "| cell | pairs | IOPS A | IOPS B | IOPS B/A | CPU/IO A | CPU/IO B | CPU/IO B/A | commands/IO A / B |",
             "|" + " --- |" * 9]
    for cell in cfg.cells:
        rates = window_rates([r for r in rows if r["cell"] == cell])
        med = lambda side, m: sorted(v[side][m] for v in rates.values() if side in v and v[side][m] is not None)  # noqa: E731
        mid = lambda xs: xs[len(xs) // 2] if xs else None  # noqa: E731
        verdicts = live_verdicts(rows, [cell], k)
        v = {metric: verdict_line(*rest) for c, metric, *rest in verdicts}
        ia, ib, ca, cb = mid(med("A", 0)), mid(med("B", 0)), mid(med("A", 1)), mid(med("B", 1))
        f = lambda x, d: f"{x:.{d}f}" if x is not None else "-"  # noqa: E731
        lines.append(f"| {cell} | {verdicts[0][5]} | {f(ia, 0)} | {f(ib, 0)} | {v['IOPS']} | {f(ca and ca / 1000, 2)} us | "
                     f"{f(cb and cb / 1000, 2)} us | {v['CPU/IO']} | "
                     f"{f(commands_per_io(rows, cell, 'A'), 3)} / {f(commands_per_io(rows, cell, 'B'), 3)} |")
    lines += profile_table(prof_rows, cfg)
    plot_profile(prof_rows, cfg.out, f"biofs {cfg.name}={cfg.a} / {cfg.b}: where an I/O's CPU goes ({cfg.device})")
    with open(os.path.join(cfg.out, "live.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
