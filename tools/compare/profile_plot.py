"""profile.png and profile.svg (biofs-compare --live --profile): per cell one stacked bar per side,
the busy CPU per I/O split into the layers of compare/profile.py (idle left out)."""
import os

from biofs_tools import log

from . import profile

COLORS = {"application": "#9467bd", "kernel": "#8c564b", "fuse_client": "#e377c2", "io_uring": "#bcbd22",
          "transport": "#1f77b4", "fs": "#2ca02c", "blockcore": "#d62728", "nvme": "#ff7f0e", "device": "#17becf",
          "sched": "#7f7f7f", "other": "#c7c7c7"}
BUSY_LAYERS = [k for k in profile.LAYERS if k != "idle"]


def busy_ns_per_io(row):
    """[ns per I/O] of BUSY_LAYERS for one profile row; None without I/Os."""
    if not row["ios"]:
        return None
    return [row["layers"][k] / row["ios"] for k in BUSY_LAYERS]


def plot_profile(rows, out, title):
    bars = [(f"{r['cell']} {r['value']}", busy_ns_per_io(r)) for r in rows]
    bars = [(label, v) for label, v in bars if v is not None]
    if not bars:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("biofs-compare: python3-matplotlib missing: no profile plot (tools/install-deps.sh installs it)")
        return
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.45 * len(bars) + 1.5)))
    ys = list(range(len(bars)))[::-1]
    for y, (label, v) in zip(ys, bars):
        left = 0.0
        for k, ns in zip(BUSY_LAYERS, v):
            ax.barh(y, ns / 1000.0, left=left, color=COLORS[k], height=0.7, label=k if y == ys[0] else None)
            left += ns / 1000.0
    ax.set_yticks(ys)
    ax.set_yticklabels([label for label, _ in bars], fontsize=7)
    ax.set_xlabel("busy CPU per I/O, every CPU (us), by layer (perf cpu-clock samples; compare/profile.py)",
                  fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"profile.{ext}"), dpi=72)
    plt.close(fig)
