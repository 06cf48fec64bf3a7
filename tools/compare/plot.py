"""plot.png and plot.svg: each cell's IOPS ratio with its interval, and where each side's CPU goes."""
import os

from biofs_tools import log

# The cost panel's segments: the block-layer stages (inside the FUSE and completion threads'
# time), the rest of each thread role.
COST_SEGMENTS = [("block layer (sampled stages)", "#d62728"), ("fuse (rest)", "#1f77b4"),
                 ("completion", "#ff7f0e"), ("commit", "#2ca02c"), ("io_wq + other", "#7f7f7f")]


def cost_segments(cost):
    """ns per I/O for COST_SEGMENTS from a costs.side_cost() dict; None without CPU figures."""
    roles = cost.get("roles") or {}
    if cost.get("cpu") is None or not roles or roles.get("fuse") is None:
        return None
    block = sum(v for v in (cost.get("stages") or {}).values() if v is not None)
    fuse = roles.get("fuse") or 0.0
    return [min(block, fuse), max(0.0, fuse - block), roles.get("completion") or 0.0,
            roles.get("commit") or 0.0, (roles.get("io_wq") or 0.0) + (roles.get("other") or 0.0)]


def ratio_panel(cfg, ax, pts):
    """The IOPS ratios: a bar per cell, its interval as whiskers; grey where it holds 0."""
    ys = list(range(len(pts)))[::-1]
    d = [p[1] for p in pts]
    colors = ["#888888" if p[4] or p[2] <= 0 <= p[3] else "#1f77b4" for p in pts]
    # A few wide intervals must not squash the rest: the axis spans the ratios (at least +-10%,
    # at most +-100%) and longer whiskers are cut at its edge, marked with a '>'.
    lim = min(100.0, max(10.0, 1.3 * max(abs(x) for x in d)))
    center = [max(-lim, min(lim, x)) for x in d]
    lo_end = [max(-lim, p[2]) for p in pts]
    hi_end = [min(lim, p[3]) for p in pts]
    ax.barh(ys, center, color=colors, height=0.6)
    ax.errorbar(center, ys, xerr=[[max(0.0, c - e) for c, e in zip(center, lo_end)],
                                  [max(0.0, e - c) for c, e in zip(center, hi_end)]],
                fmt="none", ecolor="black", capsize=2, linewidth=0.8)
    for y, p in zip(ys, pts):
        if p[3] > lim:
            ax.text(lim, y, ">", va="center", ha="right", fontsize=7)
        if p[2] < -lim:
            ax.text(-lim, y, "<", va="center", ha="left", fontsize=7)
    ax.set_xlim(-lim, lim)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_yticks(ys)
    ax.set_yticklabels([p[0] for p in pts], fontsize=7)
    ax.set_xlabel(f"IOPS {cfg.toggle}={cfg.values[1]} vs {cfg.values[0]} (%); bars: B/A, whiskers: "
                  "paired bootstrap 95% interval; grey: the interval holds 0", fontsize=8)
    ax.set_title(f"biofs {cfg.toggle} ({cfg.medium}, engine/numjobs/qdepth/pattern/bs)", fontsize=9)


def cost_panel(cfg, cx, pts, segs):
    """Per cell two bars, A above B: the daemon's CPU per I/O, stacked by where it goes."""
    labels, yy = [], []
    for i, (k, *_rest) in enumerate(pts):
        for j, side in enumerate(cfg.values):
            y = (len(pts) - 1 - i) * 3 + (1 - j)
            left = 0.0
            for (name, color), v in zip(COST_SEGMENTS, segs[k][j] or [0.0] * len(COST_SEGMENTS)):
                cx.barh(y, v / 1000.0, left=left, color=color, height=0.8,
                        label=name if (i, j) == (0, 0) else None)
                left += v / 1000.0
            labels.append(f"{k} {side}")
            yy.append(y)
    cx.set_yticks(yy)
    cx.set_yticklabels(labels, fontsize=6)
    cx.set_xlabel("daemon CPU per I/O (us), by thread role; red: the sampled block-layer stages", fontsize=8)
    cx.set_title(f"where an I/O's CPU goes, {cfg.toggle}={cfg.values[0]} / {cfg.values[1]}", fontsize=9)
    cx.legend(fontsize=7, loc="best")


def plot(cfg, pts, costs=None):
    """pts: (cell, B/A %, 95% low, 95% high) per cell; low/high None with one pair. costs: cell ->
    (cost A, cost B) from costs.side_cost(): a second panel stacks each side's ns per I/O."""
    pts = [(k, e, e if lo is None else lo, e if hi is None else hi, lo is None) for k, e, lo, hi in pts
           if e is not None]
    if not pts:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("biofs-compare: python3-matplotlib missing: no plot (tools/install-deps.sh installs it)")
        return
    h = max(2.5, 0.28 * len(pts) + 1.2)
    segs = {k: [cost_segments(c) for c in costs[k]] for k, *_ in pts} if costs else {}
    with_costs = any(all(x is not None for x in v) for v in segs.values())
    if with_costs:
        fig, (ax, cx) = plt.subplots(1, 2, figsize=(14, max(h, 0.5 * len(pts) + 1.5)))
    else:
        fig, ax = plt.subplots(figsize=(7.5, h))
    ratio_panel(cfg, ax, pts)
    if with_costs:
        cost_panel(cfg, cx, pts, segs)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(cfg.out, f"plot.{ext}"), dpi=72)
    plt.close(fig)
