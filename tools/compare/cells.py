"""The comparison's cells (engine x numjobs x qdepth x pattern x bs) and how they are named."""
import itertools


def matrix(cfg):
    """Every cell of the matrix, in the order they run and are reported."""
    return [dict(engine=e, numjobs=j, qdepth=q, pattern=p, bs=b) for e, j, q, p, b in
            itertools.product(cfg.engines, cfg.numjobs, cfg.qdepths, cfg.patterns, cfg.bss)]


def cell_key(c):
    """engine/numjobs/qdepth/pattern/bs: a cell's name in runs.jsonl, the logs and summary.md."""
    return f"{c['engine']}/{c['numjobs']}/{c['qdepth']}/{c['pattern']}/{c['bs']}"


def key_columns(key):
    """A cell's key as the CSV files' first five columns."""
    return key.replace("/", ",")
