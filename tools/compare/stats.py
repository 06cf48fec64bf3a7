"""A cell's statistics: the reference's diff, the spread, the paired B/A ratios, the pooled groups."""
from biofs_tools import paired_ratio_ci

from .costs import run_alloc_per_io, run_cpu_per_io


def diff_pct(old, new):
    """The reference's diff: (new - old) / old, in percent."""
    return (new - old) / old * 100.0 if old else 0.0


def spread(xs):
    """Range of a list (max - min); 0 for fewer than two values."""
    return max(xs) - min(xs) if len(xs) > 1 else 0.0


def cell_ratios(ra, rb, reps):
    """The B/A ratios of a cell's pairs (ra, rb: side's run by repeat): IOPS, CPU per I/O and the
    allocation span per traced I/O, each paired_ratio_ci's (estimate %, lo, hi, pairs)."""
    def ratio(metric):
        return paired_ratio_ci([metric(ra[r]) for r in reps], [metric(rb[r]) for r in reps])
    return ratio(lambda r: r["iops"]), ratio(run_cpu_per_io), ratio(run_alloc_per_io)


def group_summary(rows):
    """rows: (engine, pattern, [(a, b) per repeat]) -> [(engine, pattern, pairs, est, lo, hi)]:
    the B/A ratio (%) over the group's pairs pooled, with its paired bootstrap 95% interval."""
    groups = {}
    for engine, pattern, pairs in rows:
        groups.setdefault((engine, pattern), []).extend(pairs)
    out = []
    for (engine, pattern), pairs in sorted(groups.items()):
        est, lo, hi, n = paired_ratio_ci([p[0] for p in pairs], [p[1] for p in pairs])
        out.append((engine, pattern, n, est, lo, hi))
    return out
