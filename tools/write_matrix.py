"""write_matrix: biofs-workload --write-matrix, large and fsync'd writes on every target.

What a volatile write cache must not make slower (issue 50): 1 MiB sequential and random writes
at depth 1 (psync, io_uring) and 8 (io_uring), direct, and 4 KiB random writes each followed by
an fsync, on

    biofs          emu:IMAGE,vwc          (the emulated namespace's volatile write cache)
    biofs-through  emu:IMAGE,vwc=through  (no cache of its own: a write completes when the host has it)
    hp             passthrough_hp --nopassthrough over ext4 on a loop device (every write
                   through the daemon, as biofs's)
    ext4           ext4 on a loop device (direct I/O on its backing file)
    raw            a plain file in the work directory

each on a fresh image of the same size in the same directory, so on the same disk. Each round
sets every target up in turn (the order rotates), lays its file out with one untimed sequential
pass, then runs every cell for --cell-seconds. Per cell and target: MB/s, mean latency and, for
the daemons, their CPU (utime + stime of the process, /proc/PID/stat) per I/O.
Written to --out: writes.csv (CSV_HEADER) and writes.md (median per cell, printed at the end).
"""
import json
import os
import re
import subprocess
import time

from biofs_tools import (LoopExt4, PassthroughHp, daemon_pid, log, median, read_process_cpu_ns, run, umount,
                         wait_gone)

CSV_HEADER = "target,round,cell,mb_s,lat_ms,ios,daemon_cpu_s,exit_status"
TARGETS = ("biofs", "biofs-through", "hp", "ext4", "raw")
DAEMONS = ("biofs", "biofs-through", "hp")

# name: fio arguments. The file is laid out first, so every cell overwrites allocated blocks.
CELLS = {
    "seq 1M psync QD1": ["--rw=write", "--bs=1M", "--ioengine=psync", "--direct=1"],
    "seq 1M io_uring QD1": ["--rw=write", "--bs=1M", "--ioengine=io_uring", "--direct=1", "--iodepth=1"],
    "seq 1M io_uring QD8": ["--rw=write", "--bs=1M", "--ioengine=io_uring", "--direct=1", "--iodepth=8"],
    "rand 1M psync QD1": ["--rw=randwrite", "--bs=1M", "--ioengine=psync", "--direct=1"],
    "rand 1M io_uring QD1": ["--rw=randwrite", "--bs=1M", "--ioengine=io_uring", "--direct=1", "--iodepth=1"],
    "rand 1M io_uring QD8": ["--rw=randwrite", "--bs=1M", "--ioengine=io_uring", "--direct=1", "--iodepth=8"],
    "fsync 4k psync QD1": ["--rw=randwrite", "--bs=4k", "--ioengine=psync", "--direct=0", "--fsync=1"],
}


def fio_result(json_text):
    """(MB/s, mean latency in ms, I/Os) of the write side of a fio JSON report's first job."""
    w = json.loads(json_text)["jobs"][0]["write"]
    lat = w.get("lat_ns", {}).get("mean")
    return w["bw_bytes"] / 1e6, (lat / 1e6 if lat is not None else None), w["total_ios"]


def csv_line(r):
    f = lambda v, d=3: "" if v is None else f"{v:.{d}f}"
    # MB/s to 3 decimals: a slow cell (fsync on a loaded disk: 24 KB/s) must not print as 0.
    return ",".join([r["target"], str(r["round"]), r["cell"], f(r["mb_s"]), f(r["lat_ms"]),
                     str(r["ios"] or ""), f(r["cpu"]), str(r["status"])])


def cpu_per_io_ms(rows):
    """The median over rounds of daemon CPU per I/O, in ms; None without daemon CPU."""
    return median([r["cpu"] / r["ios"] * 1e3 for r in rows if r["cpu"] is not None and r["ios"]])


def table(rows, targets):
    """writes.md's table: one line per cell, median MB/s per target, biofs against the others,
    the daemons' CPU per I/O."""
    by = {}
    for r in rows:
        if r["status"] == 0:
            by.setdefault((r["cell"], r["target"]), []).append(r)
    others = [t for t in targets if t != "biofs"] if "biofs" in targets else []
    daemons = [t for t in targets if t in DAEMONS]
    head = ["cell"] + [f"{t} MB/s" for t in targets] + [f"biofs/{t}" for t in others]
    head += [f"{t} lat ms" for t in targets] + [f"{t} CPU ms/IO" for t in daemons]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for cell in CELLS:
        mbs = {t: median([r["mb_s"] for r in by.get((cell, t), [])]) for t in targets}
        if all(v is None for v in mbs.values()):
            continue
        lat = {t: median([r["lat_ms"] for r in by.get((cell, t), [])]) for t in targets}
        line = [cell] + [f"{mbs[t]:.0f}" if mbs[t] is not None else "-" for t in targets]
        line += [f"{mbs['biofs'] / mbs[t]:.2f}x" if mbs["biofs"] and mbs[t] else "-" for t in others]
        line += [f"{lat[t]:.2f}" if lat[t] is not None else "-" for t in targets]
        for t in daemons:
            c = cpu_per_io_ms(by.get((cell, t), []))
            line.append(f"{c:.3f}" if c is not None else "-")
        out.append("| " + " | ".join(line) + " |")
    return out


def proc_cpu(pid):
    """The daemon's utime + stime in seconds, or None (no daemon, or gone)."""
    ns = read_process_cpu_ns(pid) if pid is not None else None
    return ns / 1e9 if ns is not None else None


class Target:
    """A place to write: setup() leaves self.dir (where the file goes) and self.pid (the daemon,
    or None); teardown() undoes it."""
    pid = None

    def __init__(self, name, cfg, work):
        self.name, self.cfg, self.work = name, cfg, work
        self.img = os.path.join(work, "hp-ext4.img" if name == "hp" else f"{name}.img")
        self.mnt = os.path.join(work, f"{name}.mnt")
        self.loop = None
        self.hp = None

    def setup(self):
        size = self.cfg.image_bytes
        if self.name == "raw":
            self.dir = os.path.join(self.work, "raw")
            os.makedirs(self.dir, exist_ok=True)
        elif self.name in ("ext4", "hp"):
            self.loop = LoopExt4(self.img, os.path.join(self.work, "hp-ext4.mnt") if self.name == "hp" else self.mnt, size)
            self.loop.setup()
            self.dir = self.loop.mnt
            if self.name == "hp":
                self.hp = PassthroughHp(self.cfg.hp, self.loop.mnt, self.mnt).__enter__()
                self.dir, self.pid = self.mnt, self.hp.pid
        else:
            with open(self.img, "wb") as f:
                f.truncate(size)
            run([os.path.join(self.cfg.bin, "mkfs.biofs"), "-q", self.img])
            os.makedirs(self.mnt, exist_ok=True)
            emu = "vwc" if self.name == "biofs" else "vwc=through"
            cmd = [os.path.join(self.cfg.bin, "biofs"), f"emu:{self.img},{emu}", self.mnt]
            if self.cfg.mount_opts:
                cmd += ["-o", self.cfg.mount_opts]
            run(cmd, timeout=60)
            self.dir, self.pid = self.mnt, daemon_pid(self.mnt, ("biofs",))

    def teardown(self):
        if self.hp:
            self.hp.__exit__(None, None, None)
            self.hp = None
        if self.loop:
            self.loop.teardown()
            self.loop = None
        if self.name in ("biofs", "biofs-through") and os.path.ismount(self.mnt):
            umount(self.mnt)
            wait_gone(self.pid)
        if self.name == "raw":
            run(["rm", "-rf", self.dir], check=False)
        if os.path.exists(self.img):
            os.unlink(self.img)


def fio(path, size, args, seconds=None):
    cmd = ["fio", "--name=w", f"--filename={path}", f"--size={size}", "--output-format=json"] + args
    if seconds:
        cmd += ["--time_based", f"--runtime={seconds}"]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=(seconds or 300) + 300)


def one_target(cfg, name, rnd, work, emit):
    t = Target(name, cfg, work)
    try:
        t.setup()
        path = os.path.join(t.dir, "wm.dat")
        lay = fio(path, cfg.file_size, ["--rw=write", "--bs=1M", "--ioengine=psync", "--direct=1"])
        if lay.returncode != 0:
            raise RuntimeError(f"laying out {path}: {lay.stderr.strip()[-300:]}")
        for cell, args in CELLS.items():
            if not re.search(cfg.cell_match, cell):
                continue
            c0 = proc_cpu(t.pid)
            p = fio(path, cfg.file_size, args, cfg.cell_seconds)
            c1 = proc_cpu(t.pid)
            r = dict(target=name, round=rnd, cell=cell, mb_s=None, lat_ms=None, ios=None, cpu=None,
                     status=p.returncode)
            if p.returncode == 0:
                try:
                    r["mb_s"], r["lat_ms"], r["ios"] = fio_result(p.stdout)
                except (ValueError, KeyError, IndexError):
                    r["status"] = 2
            if c0 is not None and c1 is not None:
                r["cpu"] = c1 - c0
            emit(r)
            cpu = f", daemon CPU {r['cpu'] / r['ios'] * 1e3:.3f} ms/IO" if r["cpu"] is not None and r["ios"] else ""
            mb = f"{r['mb_s']:.0f} MB/s" if r["mb_s"] is not None else "failed: " + p.stderr.strip()[-200:]
            log(f"[round {rnd}/{cfg.rounds}] {name} {cell}: {mb}{cpu}")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log(f"[round {rnd}/{cfg.rounds}] {name}: setup failed, its cells are not run: {e}")
        for cell in (c for c in CELLS if re.search(cfg.cell_match, c)):
            emit(dict(target=name, round=rnd, cell=cell, mb_s=None, lat_ms=None, ios=None, cpu=None, status=-1))
    finally:
        t.teardown()


def write_matrix(cfg, round_order):
    os.makedirs(cfg.out, exist_ok=True)
    targets = [t for t in cfg.targets if t != "hp" or cfg.hp]
    if len(targets) < len(cfg.targets):
        log("biofs-workload: no passthrough_hp binary found (give --hp PATH): hp left out")
    csv_path = os.path.join(cfg.out, "writes.csv")
    with open(csv_path, "w") as f:
        f.write(CSV_HEADER + "\n")
    rows = []

    def emit(r):
        rows.append(r)
        with open(csv_path, "a") as f:
            f.write(csv_line(r) + "\n")

    t0 = time.monotonic()
    for rnd in range(1, cfg.rounds + 1):
        for name in round_order(targets, rnd):
            one_target(cfg, name, rnd, cfg.work, emit)
        log(f"biofs-workload: round {rnd}/{cfg.rounds} done, elapsed {(time.monotonic() - t0) / 60:.1f} min")
    lines = ["# biofs-workload --write-matrix", "",
             f"{cfg.rounds} round{'s' if cfg.rounds > 1 else ''}, targets rotated, each cell {cfg.cell_seconds} s "
             f"over a {cfg.file_size} file laid out first, on {cfg.image_size} images in one directory. "
             "biofs: `emu:IMAGE,vwc`; biofs-through: `emu:IMAGE,vwc=through`; mount options "
             f"{cfg.mount_opts or '(the defaults)'}; hp: passthrough_hp --nopassthrough over ext4 on a loop "
             "device; ext4: on a loop device (direct I/O); raw: a plain file. Medians over the rounds; "
             "ratios > 1 mean biofs is faster; CPU is the daemon's utime+stime per I/O.", ""]
    lines += table(rows, targets)
    with open(os.path.join(cfg.out, "writes.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["status"] == 0 for r in rows) else 3
