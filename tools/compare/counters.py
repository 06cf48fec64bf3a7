"""The mount's counters (user.biofs.stats): what one run moved, one side's sum over its repeats."""
from .histograms import add_hist

# The counters a cell reports, by where the stats object holds them.
COUNTERS = {"hits": ("bio_cache", "alloc_hits"), "misses": ("bio_cache", "alloc_misses"),
            "remote_puts": ("bio_cache", "put_remote"), "splits": ("queue", "splits"),
            "tag_calls": ("queue", "tag_calls"), "tags": ("queue", "tags"),
            "requests": ("queue", "requests"), "plug_flushes": ("queue", "plug_flushes"),
            "ios": ("io", "reads"), "writes": ("io", "writes"), "errors": ("io", "errors"),
            "clones": ("io", "clones")}


def counters_delta(before, after):
    """What one run moved: the counters the tools report per cell, from two stats reads."""
    def g(d, *path):
        for p in path:
            d = d.get(p, {}) if isinstance(d, dict) else {}
        return d if isinstance(d, (int, float)) else 0
    out = {name: g(after, *path) - g(before, *path) for name, path in COUNTERS.items()}
    out["ios"] += out.pop("writes")
    out["rss_bytes"] = g(after, "rss_bytes")
    stages = {}
    for name, h in after.get("stages", {}).items():
        if not isinstance(h, dict):
            continue
        prev = {b[0]: b[1] for b in before.get("stages", {}).get(name, {}).get("buckets", [])}
        d = {lo: n - prev.get(lo, 0) for lo, n in h.get("buckets", [])}
        d = {lo: n for lo, n in d.items() if n > 0}
        if d:
            stages[name] = d
    out["stages"] = stages
    return out


def summarize_counters(runs):
    """Counters of one side of a cell, summed over its repeats: (totals, {stage: histogram})."""
    tot = {}
    stages = {}
    for r in runs:
        for k, v in r["counters"].items():
            if k == "stages":
                for name, b in v.items():
                    add_hist(stages.setdefault(name, {}), b)
            elif k != "rss_bytes":
                tot[k] = tot.get(k, 0) + v
    tot["rss_bytes"] = max((r["counters"].get("rss_bytes", 0) for r in runs), default=0)
    allocs = tot.get("hits", 0) + tot.get("misses", 0)
    tot["hit_rate"] = tot.get("hits", 0) / allocs if allocs else 0.0
    tot["tags_per_call"] = tot.get("tags", 0) / tot["tag_calls"] if tot.get("tag_calls") else 0.0
    return tot, stages
