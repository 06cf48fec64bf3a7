"""Cost per I/O: the daemon's CPU (by thread role) and the block-layer stages, per run and per side."""
from biofs_tools import ROLES, median, pooled_ratio_ci

from .histograms import alloc_hist, hist_quantile, hist_sum

# cost.csv's stages: bio_alloc is bio_alloc_hit and bio_alloc_miss together. The first five are
# spans of the submitting thread's work (a CPU share); the last three are wall time.
CPU_STAGES = ["bio_alloc", "split", "tag", "plug_flush", "submit"]
WALL_STAGES = ["complete", "reply", "request_total"]

# The stage means in cost.csv are 99% winsorized: the top 1% of a stage's traced spans (there, on
# this shared 2-CPU machine, 0.7-0.9% of the allocation spans above 10 us made 56-82% of its raw
# sum: threads descheduled mid-span) count as the 99th percentile.
STAGE_WINSOR = 0.99


def stage_costs(stages):
    """Per-stage ns per traced I/O from one side's stage histograms ({stage: {lo: count}}, summed
    over its runs): each stage's sum (winsorized at STAGE_WINSOR) over the traced requests
    (request_total's count; where none was traced, the traced bio allocations'). Returns
    ({stage: ns}, traced) with bio_alloc = bio_alloc_hit + bio_alloc_miss, for CPU_STAGES +
    WALL_STAGES, and bio_alloc_raw: bio_alloc's plain (not winsorized) sum over the traced."""
    alloc = alloc_hist(stages)
    traced = sum(stages.get("request_total", {}).values()) or sum(alloc.values())
    out = {}
    for name in CPU_STAGES + WALL_STAGES:
        b = alloc if name == "bio_alloc" else stages.get(name, {})
        out[name] = hist_sum(b, STAGE_WINSOR) / traced if traced else 0.0
    out["bio_alloc_raw"] = hist_sum(alloc) / traced if traced else 0.0
    return out, traced


def run_cpu_ns(r):
    """The daemon's CPU ns in one run (all roles), or None for a run recorded without it."""
    return sum(r["cpu"].values()) if isinstance(r.get("cpu"), dict) else None


def run_cpu_per_io(r):
    """One run's daemon CPU ns per fio I/O, None where either is missing."""
    c = run_cpu_ns(r)
    return c / r["ios"] if c is not None and r.get("ios") else None


def run_alloc_per_io(r):
    """One run's bio_alloc span per traced I/O (winsorized, as cost.csv's), None where untraced."""
    costs, traced = stage_costs(r.get("counters", {}).get("stages", {}))
    return costs["bio_alloc"] if traced else None


def side_cost(runs, stages):
    """A cell's side over its runs (the repeats used), stages summed over them: cost.csv's figures.
    cpu (ns per I/O, all runs' CPU over all their I/Os) with its bootstrap interval lo..hi; roles
    and stages (CPU_STAGES) in ns per I/O, shares in percent of cpu; None where not measured."""
    est, lo, hi = pooled_ratio_ci([run_cpu_ns(r) for r in runs], [r.get("ios") or 0 for r in runs])
    ok = [r for r in runs if run_cpu_ns(r) is not None and r.get("ios")]
    ok_ios = sum(r["ios"] for r in ok)
    proc = [r for r in ok if r.get("proc_cpu_ns") is not None]
    costs, traced = stage_costs(stages)
    ns = {name: costs[name] if traced else None for name in CPU_STAGES + WALL_STAGES}
    share = lambda v: v / est * 100.0 if est and v is not None else None  # noqa: E731
    info = [r.get("cpu_info", {}) for r in ok]
    return dict(
        cpu=est, lo=lo, hi=hi, alloc=ns["bio_alloc"], alloc_share=share(ns["bio_alloc"]),
        roles={k: sum(r["cpu"].get(k, 0) for r in ok) / ok_ios if ok_ios else None for k in ROLES},
        stages={name: ns[name] for name in CPU_STAGES},
        shares={name: share(ns[name]) for name in CPU_STAGES},
        wall={name: ns[name] for name in WALL_STAGES},
        ios=sum(r.get("ios") or 0 for r in runs), iops_median=median([r["iops"] for r in runs], None),
        repeats=len(runs), sources=sorted({i.get("source", "") for i in info} - {""}),
        started=sum(i.get("started", 0) for i in info), exited=sum(i.get("exited", 0) for i in info),
        proc_per_io=sum(r["proc_cpu_ns"] for r in proc) / sum(r["ios"] for r in proc) if proc else None,
        traced=traced, alloc_p50=hist_quantile(alloc_hist(stages), 0.5) if traced else None,
        alloc_raw=costs["bio_alloc_raw"] if traced else None,
        transports=sorted({r["fuse_transport"] for r in runs if r.get("fuse_transport")}))
