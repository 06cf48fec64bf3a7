"""biofs-compare's main: the work folders, the comparison, --instructions, the exit status."""
import os
import shutil
import subprocess
import tempfile
import time

from biofs_tools import log, umount

from .args import parse_args
from .comparison import compare
from .instructions import instructions


def main(argv, doc):
    """Runs biofs-compare with arguments argv (doc: the tool's docstring, its --help); returns
    the exit status: 0, 1 on a failed run (--resume goes on), 130 when interrupted."""
    cfg = parse_args(argv, doc)
    cfg.out = os.path.abspath(cfg.out)
    cfg.mnt = tempfile.mkdtemp(prefix="biofs-compare-mnt.")
    cfg.work = tempfile.mkdtemp(prefix="biofs-compare-work.", dir=os.path.dirname(os.path.abspath(cfg.image)))
    cfg.scratch = cfg.work + "/scratch.img"
    cfg.cell = None
    cfg.stops = {}
    cfg.t_end = time.monotonic() + cfg.budget if cfg.budget is not None else None
    try:
        compare(cfg)
        if cfg.instructions:
            instructions(cfg)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log(f"biofs-compare: {e}")
        log("biofs-compare: finished runs are in runs.jsonl; rerun with --resume to continue")
        return 1
    except KeyboardInterrupt:
        log("biofs-compare: interrupted; rerun with --resume to continue")
        return 130
    finally:
        if os.path.ismount(cfg.mnt):
            umount(cfg.mnt)
        shutil.rmtree(cfg.mnt, ignore_errors=True)
        shutil.rmtree(cfg.work, ignore_errors=True)
    return 0
