"""The CSV files' headers and rows (results.csv's columns are the reference's: keep them as they are)."""
from biofs_tools import ROLES

from .cells import cell_key, key_columns
from .costs import CPU_STAGES, WALL_STAGES
from .histograms import hist_quantile
from .stats import diff_pct

# results.csv: the columns of the CSV attached to the upstream patch "block: enable per-cpu bio
# cache by default" (nullblk_fs_results.csv).
CSV_HEADER = "engine,medium,fs_type,numjobs,qdepth,pattern,bs,repeat_id,IOPS,IOPS_new,diff"
CELLS_HEADER = ("engine,numjobs,qdepth,pattern,bs,repeats,IOPS_median,IOPS_new_median,diff,"
                "diff_min,diff_max,spread,iops_ratio_pct,iops_ci95_low,iops_ci95_high,"
                "cpu_ratio_pct,cpu_ci95_low,cpu_ci95_high,alloc_ratio_pct,alloc_ci95_low,alloc_ci95_high," +
                ",".join(f"{k}_{s}" for s in ("old", "new") for k in
                         ("hit_rate", "remote_puts", "splits", "tags_per_call", "requests", "clones",
                          "errors", "rss_mib")))
LAYERS_HEADER = ("engine,numjobs,qdepth,pattern,bs,raw_file,ext4_loop,biofs_bench_old,"
                 "biofs_bench_new,nvme_io_uring_cmd,biofs_old,biofs_new,hp_dev,hp_dev_cpu_ns_per_io,"
                 "hp_uring,hp_uring_cpu_ns_per_io,biofs_old_cpu_ns_per_io,biofs_new_cpu_ns_per_io")
STAGES_HEADER = "engine,numjobs,qdepth,pattern,bs,side,stage,count,p50_ns,p99_ns"
COST_HEADER = ("engine,numjobs,qdepth,pattern,bs,side,ios,cpu_ns_per_io,cpu_ci95_low,cpu_ci95_high,"
               "alloc_ns_per_io,alloc_share_pct," + ",".join(f"{r}_ns_per_io" for r in ROLES) +
               ",iops_median,repeats,cpu_source,threads_started,threads_exited,proc_cpu_ns_per_io,traced_requests,"
               "alloc_p50_ns,alloc_raw_ns_per_io,fuse_transport," +
               ",".join(f"{s}_ns_per_io,{s}_share_pct" for s in CPU_STAGES) + "," +
               ",".join(f"{s}_ns_per_io" for s in WALL_STAGES))


def fmt_diff(d):
    """A diff as the reference CSV writes it: three decimals and a percent sign."""
    return f"{d:.3f}%"


def fmt_iops(v):
    """IOPS as the reference CSV writes them: up to four decimals, no trailing zeros."""
    s = f"{v:.4f}".rstrip("0").rstrip(".")
    return s if s else "0"


def fmt_opt(v, decimals=1):
    """A figure with the given decimals; empty where there is none."""
    return "" if v is None else f"{v:.{decimals}f}"


def csv_row(c, medium, fs_type, rep, old, new):
    """One results.csv row: a cell's repeat, IOPS of the toggle's first value and its second."""
    return ",".join([c["engine"], medium, fs_type, str(c["numjobs"]), str(c["qdepth"]), c["pattern"],
                     c["bs"], str(rep), fmt_iops(old), fmt_iops(new), fmt_diff(diff_pct(old, new))])


def cells_row(key, n, ma, mb, diffs, spread_pct, ratios, sides):
    """One cells.csv row: the medians, the diffs' range, the B/A ratios with their intervals
    (IOPS, CPU per I/O, allocation span) and each side's summed counters."""
    return ",".join([key_columns(key), str(n), f"{ma:.1f}", f"{mb:.1f}", fmt_diff(diff_pct(ma, mb)),
                     fmt_diff(min(diffs)), fmt_diff(max(diffs)), f"{spread_pct:.3f}%"] +
                    [fmt_opt(v, 3) for ci in ratios for v in ci[:3]] +
                    [f"{t['hit_rate']:.4f},{t.get('remote_puts', 0)},{t.get('splits', 0)},"
                     f"{t['tags_per_call']:.3f},{t.get('requests', 0)},{t.get('clones', 0)},"
                     f"{t.get('errors', 0)},{t['rss_bytes'] / 2**20:.1f}" for t in sides])


def stages_row(key, side, name, buckets):
    """One stages.csv row: a side's stage, its count, median and p99."""
    return (f"{key_columns(key)},{side},{name},{sum(buckets.values())},"
            f"{hist_quantile(buckets, 0.5)},{hist_quantile(buckets, 0.99)}")


def cost_row(c, side, cost):
    """One cost.csv row from costs.side_cost()'s figures."""
    f = fmt_opt
    cols = [key_columns(cell_key(c)), side, str(cost["ios"]), f(cost["cpu"]), f(cost["lo"]), f(cost["hi"]),
            f(cost["alloc"]), f(cost["alloc_share"], 3)]
    cols += [f(cost["roles"][k]) for k in ROLES]
    cols += [f(cost["iops_median"]), str(cost["repeats"]), "+".join(cost["sources"]), str(cost["started"]),
             str(cost["exited"]), f(cost["proc_per_io"]), str(cost["traced"]),
             "" if cost["alloc_p50"] is None else str(cost["alloc_p50"]), f(cost["alloc_raw"]),
             "+".join(cost["transports"])]
    for name in CPU_STAGES:
        cols += [f(cost["stages"][name]), f(cost["shares"][name], 3)]
    cols += [f(cost["wall"][name]) for name in WALL_STAGES]
    return ",".join(cols)
