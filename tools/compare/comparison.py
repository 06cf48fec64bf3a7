"""The comparison's course: image and files prepared, the planned runs (and adaptive pairs) done, the report."""
import json
import os

from biofs_tools import log, run

from .cells import cell_key
from .fio import fio_layout
from .mounts import Ext4, Mount
from .pairing import adapt, plan
from .progress import Progress
from .report import report
from .runner import Runner
from .state import State


def prepare(cfg, todo):
    """Formats a fresh image (ours to create), lays out biofs's files, and the raw file's and the
    scratch namespace's where those layers still run."""
    fresh_image = cfg.own_image and (not cfg.resume or not os.path.exists(cfg.image))
    if todo and fresh_image:
        with open(cfg.image, "wb") as f:
            f.truncate(cfg.device_bytes)
        run([os.path.join(cfg.bin, "mkfs.biofs"), "-f", "-q", cfg.device])
    if todo and any(w[0] == "fs" for w in todo) and (fresh_image or not cfg.own_image) and not cfg.ram:
        with Mount(cfg, cfg.values[1]):
            fio_layout(cfg.mnt, max(cfg.numjobs), cfg.file_size)
    layers_needed = {w[1] for w in todo if w[0] == "layer"}
    if layers_needed & {"raw", "bench"}:
        os.makedirs(cfg.work + "/raw", exist_ok=True)
        with open(cfg.scratch, "wb") as f:  # written, as the biofs image's files are after layout
            zeros = bytes(8 << 20)
            for _ in range(0, cfg.device_bytes, len(zeros)):
                f.write(zeros)
            f.truncate(cfg.device_bytes)
        if "raw" in layers_needed:
            fio_layout(cfg.work + "/raw", max(cfg.numjobs), cfg.file_size)
    return layers_needed


def compare(cfg):
    """Runs what runs.jsonl does not hold yet, then writes the report from all its runs."""
    os.makedirs(cfg.out, exist_ok=True)
    state = State(os.path.join(cfg.out, "runs.jsonl"), cfg.resume)
    with open(os.path.join(cfg.out, "config.json"), "w") as f:
        json.dump({k: v for k, v in vars(cfg).items() if k != "cell"}, f, indent=1, default=str)
    cells, work = plan(cfg)

    def done(w):
        return state.has(kind=w[0], layer=w[1], cell=cell_key(w[2]), side=w[3], rep=w[4])
    todo = [w for w in work if not done(w)]
    log(f"biofs-compare: {len(cells)} cells, {len(work)} runs, {len(work) - len(todo)} already done "
        f"(toggle {cfg.toggle}: {cfg.values[0]} vs {cfg.values[1]}, device {cfg.device})")
    layers_needed = prepare(cfg, todo)
    ext4 = Ext4(cfg) if layers_needed & {"ext4", "hp", "hp_uring"} else None
    try:
        if ext4:
            ext4.setup()
        runner = Runner(cfg, state, Progress(len(work), len(work) - len(todo)), ext4)
        # Adaptive repeats go right after a cell's first --repeats pairs (its last fixed fs run).
        last_fs = {cell_key(w[2]): i for i, w in enumerate(work) if w[0] == "fs"}
        cells_left = len(last_fs)
        for i, w in enumerate(work):
            if not done(w):
                runner.one(*w)
            if cfg.resolution is not None and last_fs.get(cell_key(w[2])) == i:
                adapt(runner, w[2], cells_left, sum(1 for later in work[i + 1:] if not done(later)))
                cells_left -= 1
    finally:
        if ext4:
            ext4.teardown()
        if os.path.exists(cfg.scratch):
            os.unlink(cfg.scratch)
    report(cfg, cells, state.runs)
