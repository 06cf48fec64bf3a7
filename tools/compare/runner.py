"""Runs one planned run (biofs at one side of the toggle, or a layer baseline) into runs.jsonl."""
import time

from .cells import cell_key
from .costs import run_cpu_per_io
from .layers import measure_layer
from .measure import measured_run


class Runner:
    """Runs work items into the State (runs.jsonl), a progress line each; keeps their wall times
    (the budget's estimates, pairing.adapt)."""

    def __init__(self, cfg, state, prog, ext4):
        self.cfg, self.state, self.prog, self.ext4 = cfg, state, prog, ext4
        self.seconds = []  # wall time of each run made here, for the budget's estimates

    def one(self, kind, layer, c, side, rep):
        """Runs one work item (plan()'s tuple), records it and prints its progress line."""
        cfg = self.cfg
        t0 = time.monotonic()
        cfg.cell = c
        key = cell_key(c)
        rec = dict(kind=kind, layer=layer, cell=key, side=side, rep=rep)
        if kind == "fs":
            rec.update(measured_run(cfg, side))
            what = f"{key} {cfg.toggle}={side} rep {rep}: {rec['iops']:.0f} IOPS"
            cpu = run_cpu_per_io(rec)
            if cpu is not None:
                what += f", {cpu / 1000:.1f} us CPU/IO"
        else:
            what = measure_layer(cfg, self.ext4, layer, c, key, rep, rec)
        self.state.add(rec)
        self.seconds.append(time.monotonic() - t0)
        self.prog.step(what)

    def fs_run(self, key, side, rep):
        """The recorded biofs run of cell key at side and repeat rep, or None."""
        for r in self.state.runs:
            if r["kind"] == "fs" and r["cell"] == key and r["side"] == side and r["rep"] == rep:
                return r
        return None
