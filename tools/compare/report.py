"""The report from runs.jsonl's runs: the CSV files, summary.md (also printed) and the plot."""
import os

from biofs_tools import median

from .cells import cell_key, key_columns
from .costs import run_cpu_per_io, side_cost
from .counters import summarize_counters
from .csv_files import (CELLS_HEADER, COST_HEADER, CSV_HEADER, LAYERS_HEADER, STAGES_HEADER, cells_row, cost_row,
                        csv_row, stages_row)
from .histograms import add_hist
from .plot import plot
from .stats import cell_ratios, diff_pct, spread
from .summary import summary_lines


def write(cfg, name, lines):
    """Writes lines to --out/name, one per line."""
    with open(os.path.join(cfg.out, name), "w") as f:
        f.write("\n".join(lines) + "\n")


def layers_row(c, key, layer_runs, reps, ra, rb, ma, mb):
    """One layers.csv row: the layer baselines' medians beside biofs's, with CPU per I/O."""
    def lmed(layer, field="iops"):
        rs = layer_runs.get((layer, key if layer != "bench" else cell_key(dict(c, engine="bench"))), [])
        return f"{median([r[field] for r in rs], 0.0):.1f}" if rs else ""

    def cpu_med(rr):
        xs = [v for v in (run_cpu_per_io(rr[r]) for r in reps) if v is not None]
        return f"{median(xs):.0f}" if xs else ""
    return ",".join([key_columns(key), lmed("raw"), lmed("ext4"), lmed("bench"), lmed("bench", "iops_b"),
                     lmed("nvme"), f"{ma:.1f}", f"{mb:.1f}", lmed("hp"), lmed("hp", "cpu_ns_per_io"),
                     lmed("hp_uring"), lmed("hp_uring", "cpu_ns_per_io"), cpu_med(ra), cpu_med(rb)])


def report(cfg, cells, runs):
    """Writes results.csv, cells.csv, layers.csv, stages.csv, cost.csv, summary.md (printed too)
    and the plot for the cells with at least one pair."""
    fs_runs, layer_runs = {}, {}
    for r in runs:
        if r["kind"] == "fs":
            fs_runs.setdefault((r["cell"], r["side"]), []).append(r)
        elif r["kind"] == "layer":
            layer_runs.setdefault((r["layer"], r["cell"]), []).append(r)
    a, b = cfg.values
    fs_type = "biofs" + ("-buffered" if cfg.buffered else "")
    rows, cell_rows, layer_rows = [CSV_HEADER], [CELLS_HEADER], [LAYERS_HEADER]
    stage_rows, cost_rows = [STAGES_HEADER], [COST_HEADER]
    plot_pts, groups, verdicts = [], [], []
    all_stages = {}  # (side, stage) -> histogram over every cell
    for c in cells:
        key = cell_key(c)
        ra = {r["rep"]: r for r in fs_runs.get((key, a), [])}
        rb = {r["rep"]: r for r in fs_runs.get((key, b), [])}
        reps = sorted(set(ra) & set(rb))
        if not reps:
            continue
        pairs = [(ra[r]["iops"], rb[r]["iops"]) for r in reps]
        rows += [csv_row(c, cfg.medium, fs_type, rep, old, new) for rep, (old, new) in zip(reps, pairs)]
        diffs = [diff_pct(old, new) for old, new in pairs]
        ma, mb = median([p[0] for p in pairs], 0.0), median([p[1] for p in pairs], 0.0)
        iops_ci, cpu_ci, alloc_ci = cell_ratios(ra, rb, reps)
        groups.append((c["engine"], c["pattern"], pairs))
        plot_pts.append((key,) + tuple(iops_ci[:3]))
        sides, costs = [], []
        for side, rr in ((a, ra), (b, rb)):
            tot, stages = summarize_counters([rr[r] for r in reps])
            sides.append(tot)
            cost = side_cost([rr[r] for r in reps], stages)
            cost_rows.append(cost_row(c, side, cost))
            costs.append(cost)
            for name, buckets in stages.items():
                add_hist(all_stages.setdefault((side, name), {}), buckets)
                stage_rows.append(stages_row(key, side, name, buckets))
        verdicts.append((key, len(reps), ma, mb, iops_ci, cpu_ci, costs, alloc_ci))
        cell_rows.append(cells_row(key, len(reps), ma, mb, diffs, spread(diffs), (iops_ci, cpu_ci, alloc_ci), sides))
        layer_rows.append(layers_row(c, key, layer_runs, reps, ra, rb, ma, mb))
    for name, lines in (("results.csv", rows), ("cells.csv", cell_rows), ("layers.csv", layer_rows),
                        ("stages.csv", stage_rows), ("cost.csv", cost_rows)):
        write(cfg, name, lines)
    summ = summary_lines(cfg, verdicts, groups, all_stages)
    write(cfg, "summary.md", summ)
    print("\n".join(summ))
    plot(cfg, plot_pts, {v[0]: v[6] for v in verdicts})
