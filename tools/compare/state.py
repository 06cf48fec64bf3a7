"""runs.jsonl: one finished run per line; --resume skips what is there."""
import json
import os


class State:
    """The runs of runs.jsonl, kept across --resume (without it the file starts empty)."""

    def __init__(self, path, resume):
        self.path = path
        self.runs = []
        if resume and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if line:
                        try:
                            self.runs.append(json.loads(line))
                        except ValueError:
                            pass  # a line cut short by an interruption: that run is redone
            with open(path, "w") as f:  # rewritten whole, so no cut line is left to append to
                f.write("".join(json.dumps(r) + "\n" for r in self.runs))
        elif os.path.exists(path):
            os.unlink(path)
        self.done = {self.key(r) for r in self.runs}

    @staticmethod
    def key(r):
        return (r["kind"], r.get("layer", ""), r["cell"], r.get("side", ""), r["rep"])

    def has(self, **k):
        return self.key(k) in self.done

    def add(self, r):
        with open(self.path, "a") as f:
            f.write(json.dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.runs.append(r)
        self.done.add(self.key(r))
