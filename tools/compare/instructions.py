"""--instructions: instructions per I/O under callgrind (tools/biofs-instructions), added to summary.md."""
import csv
import os
import sys

from biofs_tools import REPO, log, median, run


def instructions(cfg):
    """The same toggle and cells in-process under callgrind (tools/biofs-instructions: the
    filesystem's read/write entry points down to the emulated namespace and the null device, no
    FUSE), instructions.csv in --out, and their table appended to summary.md."""
    a, b = cfg.values
    cmd = [sys.executable, os.path.join(REPO, "tools", "biofs-instructions"), "--devices", cfg.instr_devices,
           "--patterns", ",".join(cfg.patterns), "--qdepths", ",".join(str(q) for q in cfg.qdepths),
           "--toggle", f"{cfg.toggle}={a},{b}", "--repeats", "2", "--out", cfg.out, "--bin", cfg.bin,
           "--image-dir", cfg.work]
    log("biofs-compare: instructions per I/O under callgrind: " + " ".join(cmd[1:]))
    run(cmd, timeout=3600)
    with open(os.path.join(cfg.out, "instructions.csv")) as f:
        rows = list(csv.DictReader(f))
    lines = ["", f"Instructions per I/O, in-process (tools/biofs-instructions, callgrind; no FUSE, no kernel): "
             f"{cfg.toggle}={a} / {b}, median of the repeats:", "",
             "| device | pattern | qdepth | instr/IO A / B | B/A | alloc+put instr/IO A / B | alloc share A / B |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    cells = {}
    for r in rows:
        cells.setdefault((r["device"], r["pattern"], r["qdepth"]), {}).setdefault(r["side"], []).append(r)
    for (dev, pat, qd), sides in cells.items():
        if a not in sides or b not in sides:
            continue
        med = lambda side, col: median([float(r[col]) for r in sides[side]])  # noqa: E731
        ia, ib = med(a, "instr_per_io"), med(b, "instr_per_io")
        lines.append(f"| {dev} | {pat} | {qd} | {ia:.0f} / {ib:.0f} | {(ib / ia - 1) * 100:+.2f}% | "
                     f"{med(a, 'alloc_instr_per_io'):.0f} / {med(b, 'alloc_instr_per_io'):.0f} | "
                     f"{med(a, 'alloc_share_pct'):.2f}% / {med(b, 'alloc_share_pct'):.2f}% |")
    with open(os.path.join(cfg.out, "summary.md"), "a") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
