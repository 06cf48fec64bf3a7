"""summary.md: the verdicts per cell, where each side's CPU goes, the pooled groups, the stages."""
from biofs_tools import MIN_PAIRS_95, ROLES, fmt_ns, verdict

from .costs import CPU_STAGES
from .fio import fio_cpus
from .histograms import hist_quantile
from .pairing import stop_text
from .stats import group_summary

STAGE_ORDER = ["bio_alloc_hit", "bio_alloc_miss", "split", "tag", "plug_flush", "submit", "complete",
               "reply", "request_total"]


def io_mode(cfg):
    """How the cells' I/O met the kernel: direct, or buffered with the page cache kept across
    opens (keep_cache=on, the mount's default) or dropped at each open (keep_cache=off)."""
    if not cfg.buffered:
        return "direct"
    opts = (cfg.mount_opts or "").split(",")
    return "buffered (keep_cache=off: page cache dropped at each open)" if "keep_cache=off" in opts \
        else "buffered (keep_cache=on: page cache kept across opens)"


def header_lines(cfg, verdicts):
    """The title and the paragraph saying what the figures are."""
    a, b = cfg.values
    adaptive = (f" Adaptive: pairs added until the interval's half-width is <= {cfg.resolution:g}% "
                f"(at most {cfg.max_repeats} pairs" + (f", budget {cfg.budget:g} s" if cfg.budget else "") + ")."
                ) if cfg.resolution is not None else ""
    return [f"# biofs-compare: {cfg.toggle}={a} (A, IOPS) vs {cfg.toggle}={b} (B, IOPS_new)", "",
            "Mode: remount (a fresh mount per side and run; `--live` flips a live toggle inside one run). "
            f"device `{cfg.device}`, {io_mode(cfg)} I/O, {cfg.repeats} repeats "
            f"of {cfg.runtime} s, file {cfg.file_size} per job"
            + (f", fio's jobs on CPUs {fio_cpus(cfg)}" if fio_cpus(cfg) else "") +
            ". B/A: geometric mean of the per-repeat "
            "ratios, [95% interval] by a paired bootstrap over the repeats (A/B, B/A order). "
            "CPU/IO: the daemon's CPU time (all threads, /proc schedstat) per completed fio I/O; "
            "alloc share: the stage clock's bio allocation span over that CPU (cost.csv); alloc span "
            "B/A: that span per traced I/O, paired per repeat as the others." + adaptive +
            (f" With fewer than {MIN_PAIRS_95} pairs an interval is the range of the pairs' ratios (with 3, it "
             "holds the true ratio about 3 times in 4), and the verdict says so." if any(
                 v[1] < MIN_PAIRS_95 for v in verdicts) else ""), ""]


def verdict_lines(cfg, verdicts):
    """Per cell: the IOPS, CPU-per-I/O and allocation-span ratios, and why adaptive pairs stopped."""
    us = lambda ns: "-" if ns is None else f"{ns / 1000:.2f} us"  # noqa: E731
    pc = lambda v: "-" if v is None else f"{v:.2f}%"  # noqa: E731
    lines = ["| cell | pairs | IOPS A / B | IOPS B/A | CPU/IO A / B | CPU/IO B/A | alloc share A / B | "
             "alloc span B/A |" + (" stopped |" if cfg.resolution is not None else ""),
             "| --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if cfg.resolution is not None else "")]
    for key, n, ma, mb, iops_ci, cpu_ci, costs, alloc_ci in verdicts:
        line = (f"| {key} | {n} | {ma:.0f} / {mb:.0f} | {verdict(*iops_ci)} | "
                f"{us(costs[0]['cpu'])} / {us(costs[1]['cpu'])} | {verdict(*cpu_ci)} | "
                f"{pc(costs[0]['alloc_share'])} / {pc(costs[1]['alloc_share'])} | {verdict(*alloc_ci)} |")
        if cfg.resolution is not None:
            stop = cfg.stops.get(key)
            line += f" {stop_text(stop, cfg.resolution) if stop else '-'} |"
        lines.append(line)
    return lines


def cpu_lines(cfg, verdicts):
    """Per cell and side: CPU per I/O by thread role, and the stages inside it with their share."""
    lines = ["", "Where an I/O's CPU goes (ns per completed I/O: the daemon's threads by role, then the "
             "block-layer stages inside them, from the sampled stage clocks, with their share of the total):", "",
             "| cell | side | CPU/IO | " + " | ".join(ROLES) + " | " + " | ".join(CPU_STAGES) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in ROLES) + " | " +
             " | ".join("---" for _ in CPU_STAGES) + " |"]
    ns = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
    for key, n, ma, mb, iops_ci, cpu_ci, costs, alloc_ci in verdicts:
        for side, cost in zip(cfg.values, costs):
            roles = cost.get("roles") or {}
            stages = cost.get("stages") or {}
            share = lambda v: ("-" if v is None or not cost["cpu"]  # noqa: E731
                               else f"{v:.0f} ({v / cost['cpu'] * 100:.1f}%)")
            lines.append(f"| {key} | {side} | {ns(cost['cpu'])} | " + " | ".join(ns(roles.get(r)) for r in ROLES) +
                         " | " + " | ".join(share(stages.get(st)) for st in CPU_STAGES) + " |")
    return lines


def group_lines(groups):
    """Per engine and pattern: the IOPS ratio over its cells' pairs pooled."""
    lines = ["", "Per engine and pattern, the pairs of its cells pooled:", "",
             "| engine | pattern | pairs | IOPS B/A |", "| --- | --- | --- | --- |"]
    for engine, pattern, n, est, lo, hi in group_summary(groups):
        lines.append(f"| {engine} | {pattern} | {n} | {verdict(est, lo, hi, n)} |")
    return lines


def stage_lines(cfg, all_stages):
    """The sampled stages over all cells, per side: count, median, p99."""
    a, b = cfg.values
    names = sorted({n for _, n in all_stages}, key=lambda n: STAGE_ORDER.index(n) if n in STAGE_ORDER else 99)
    if not names:
        return []
    lines = ["", "Sampled stages, all cells together (count, median, p99; each includes one clock read):", "",
             f"| stage | {cfg.toggle}={a} | {cfg.toggle}={b} |", "| --- | --- | --- |"]
    for n in names:
        cols = []
        for side in (a, b):
            h = all_stages.get((side, n), {})
            cols.append(f"{sum(h.values())}, {fmt_ns(hist_quantile(h, 0.5))}, {fmt_ns(hist_quantile(h, 0.99))}"
                        if h else "-")
        lines.append(f"| {n} | {cols[0]} | {cols[1]} |")
    return lines


def summary_lines(cfg, verdicts, groups, all_stages):
    """summary.md's lines. verdicts: per cell (key, pairs, IOPS median A, IOPS median B, IOPS
    ratio, CPU ratio, (cost A, cost B) from costs.side_cost(), allocation ratio), each ratio
    paired_ratio_ci's; groups: stats.group_summary's rows; all_stages: (side, stage) -> histogram."""
    return (header_lines(cfg, verdicts) + verdict_lines(cfg, verdicts) + cpu_lines(cfg, verdicts) +
            group_lines(groups) + stage_lines(cfg, all_stages))
