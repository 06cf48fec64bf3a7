"""The stage clock's histograms, {bucket lower bound ns: count}: midpoints, quantiles, sums."""
import math


def bucket_width(lo):
    """The width of the bucket starting at lo ns: exact below 8 ns, then 8 per power of two
    (percpu_stat.h)."""
    return 1 if lo < 8 else 1 << (lo.bit_length() - 4)


def hist_mid(lo):
    """The midpoint of the bucket starting at lo ns."""
    lo = int(lo)
    return lo + (bucket_width(lo) - 1) / 2.0


def bucket_at(buckets, rank):
    """The lower bound (as the key is) of the bucket holding the rank-th value (1-based), in
    ascending order; None where there are fewer values."""
    seen = 0
    for lo in sorted(buckets, key=int):
        seen += buckets[lo]
        if seen >= rank:
            return lo
    return None


def hist_quantile(buckets, q):
    """q-quantile: its bucket's midpoint in whole ns, as biofs-stat gives it."""
    n = sum(buckets.values())
    if not n:
        return 0
    lo = bucket_at(buckets, max(1, min(n, int(q * n + 0.999999))))
    if lo is None:
        return 0
    lo = int(lo)
    return lo + (bucket_width(lo) - 1) // 2


def hist_sum(buckets, winsor=None):
    """Sum of the values, each taken at its bucket's midpoint (at most 12.5% off each, in either
    direction). With winsor=q, values above the q-quantile count as the q-quantile (a winsorized
    sum: a span during which its thread was descheduled, milliseconds on a busy machine, counts
    as a slow span rather than as a thousand fast ones)."""
    cut = None
    if winsor is not None and buckets:
        n = sum(buckets.values())
        lo = bucket_at(buckets, max(1, min(n, math.ceil(winsor * n))))
        if lo is not None:
            cut = hist_mid(lo)
    return sum((hist_mid(lo) if cut is None else min(hist_mid(lo), cut)) * n for lo, n in buckets.items())


def add_hist(dst, src):
    """Adds histogram src into dst (keys as ints: runs.jsonl's JSON makes them strings)."""
    for lo, n in src.items():
        dst[int(lo)] = dst.get(int(lo), 0) + n
    return dst


def alloc_hist(stages):
    """bio_alloc_hit and bio_alloc_miss together."""
    alloc = {}
    for name in ("bio_alloc_hit", "bio_alloc_miss"):
        add_hist(alloc, stages.get(name, {}))
    return alloc
