"""A/B pairing: the planned runs in A/B, B/A order, and a cell's adaptive pairs (--resolution)."""
import time

from biofs_tools import adaptive_pairs, log

from .cells import cell_key, matrix
from .costs import run_cpu_per_io


def pair_order(values, rep):
    """The toggle's two values in the order repeat rep runs them: A/B on odd repeats, B/A on even."""
    return values if rep % 2 else values[::-1]


def plan(cfg):
    """The cells and the work: (kind, layer, cell, side, rep) per run. Per cell its --repeats pairs
    in A/B, B/A order, then its layer baselines; biofs-bench once per cell shape; fio on the raw
    namespace (--nvme) last."""
    cells = matrix(cfg)
    work, last = [], []
    for c in cells:
        for rep in range(1, cfg.repeats + 1):
            for v in pair_order(cfg.values, rep):
                work.append(("fs", "", c, v, rep))
        for layer in cfg.layers:
            if layer == "bench":
                continue
            if layer == "nvme" and c["engine"] != "io_uring":
                continue
            for rep in range(1, cfg.layer_repeats + 1):
                # fio on the raw namespace overwrites it: after every biofs run, in case it is
                # the namespace biofs runs on.
                (last if layer == "nvme" else work).append(("layer", layer, c, "", rep))
    if "bench" in cfg.layers:
        seen = set()
        for c in cells:
            k = (c["numjobs"], c["qdepth"], c["pattern"], c["bs"])
            if k not in seen:
                seen.add(k)
                work.append(("layer", "bench", dict(c, engine="bench"), "", 1))
    return cells, work + last


def stop_text(stop, resolution):
    """Why a cell's adaptive repeats stopped, as the summary says it."""
    w = ", ".join(f"{m} +-{v:.2f}%" for m, v in sorted(stop["widths"].items()))
    why = {"resolved": f"interval half-width <= {resolution:g}% reached",
           "max-repeats": f"--max-repeats reached before +-{resolution:g}%",
           "budget": f"--budget ran out before +-{resolution:g}%"}[stop["reason"]]
    return f"{why} ({w})" if w else why


def adapt(runner, c, cells_left, fixed_left):
    """Adds pairs to cell c (runner: a runner.Runner) until its intervals are narrow enough, or
    --max-repeats, or its share of --budget: what is left, less the estimated time of the runs
    still planned, over the cells still to do (this one included)."""
    cfg, key = runner.cfg, cell_key(c)
    a, b = cfg.values
    # A cell that stopped before under the same limits (runs.jsonl's "stop" record) stays
    # stopped on --resume: a budget is not spent twice. Other limits: it goes on from its pairs.
    limits = dict(resolution=cfg.resolution, max_repeats=cfg.max_repeats, budget=cfg.budget)
    for r in runner.state.runs:
        if r["kind"] == "stop" and r["cell"] == key and r.get("limits") == limits:
            cfg.stops[key] = dict(reason=r["reason"], pairs=r["pairs"], widths=r["widths"])
            log(f"{key}: {r['pairs']} pairs, stopped before: {stop_text(cfg.stops[key], cfg.resolution)}")
            return

    def pair(rep):
        ra, rb = runner.fs_run(key, a, rep), runner.fs_run(key, b, rep)
        if not ra or not rb:
            return None
        return {"iops": (ra["iops"], rb["iops"]), "cpu": (run_cpu_per_io(ra), run_cpu_per_io(rb))}

    def run_pair(rep):
        for v in pair_order(cfg.values, rep):
            if not runner.state.has(kind="fs", layer="", cell=key, side=v, rep=rep):
                runner.prog.total += 1
                runner.one("fs", "", c, v, rep)
        return pair(rep)

    pairs = [p for p in (pair(rep) for rep in range(1, cfg.repeats + 1)) if p]
    deadline = None
    if cfg.budget is not None:
        now = time.monotonic()
        per_run = sum(runner.seconds) / len(runner.seconds) if runner.seconds else 0.0
        left = cfg.t_end - now - fixed_left * per_run
        deadline = now + max(0.0, left) / max(1, cells_left)
    reason, widths = adaptive_pairs(pairs, run_pair, cfg.resolution, cfg.repeats, cfg.max_repeats, deadline)
    cfg.stops[key] = dict(reason=reason, pairs=len(pairs), widths=widths)
    runner.state.add(dict(kind="stop", layer="", cell=key, side="", rep=len(pairs), limits=limits,
                          **cfg.stops[key]))
    log(f"{key}: {len(pairs)} pairs, stopped: {stop_text(cfg.stops[key], cfg.resolution)}")
