"""Progress on stderr: runs done of the total, elapsed time and the ETA."""
import time

from biofs_tools import log


class Progress:
    """Counts runs; the ETA is from the runs timed here (those --resume found are not)."""

    def __init__(self, total, done):
        self.total, self.done, self.t0, self.timed = total, done, time.monotonic(), 0

    def step(self, what):
        self.done += 1
        self.timed += 1
        el = time.monotonic() - self.t0
        eta = el / self.timed * (self.total - self.done)
        log(f"[{self.done}/{self.total}] {what}  elapsed {el / 60:.1f} min, ETA {eta / 60:.1f} min")
