"""One measured biofs run: fio's IOPS and I/Os, the counters it moved, the daemon's CPU by role."""
from biofs_tools import cpu_by_role, read_process_cpu_ns, read_stats, read_thread_cpu

from .counters import counters_delta
from .fio import fio_layout, fio_run
from .mounts import Mount


def measured_run(cfg, side):
    """One fio run of the current cell on a fresh mount with the toggle at `side`: a runs.jsonl
    record's figures (iops, ios, counters, the daemon's CPU per role and how it was read). The
    stats are read outside the CPU window, so their reads are not counted."""
    with Mount(cfg, side):
        if cfg.ram:  # a RAM disk starts empty at every mount: lay the files out before measuring
            fio_layout(cfg.mnt, max(cfg.numjobs), cfg.file_size)
        before = read_stats(cfg.mnt, missing_ok=True)
        pid = before.get("pid")
        t0 = read_thread_cpu(pid) if pid else {}
        p0 = read_process_cpu_ns(pid) if pid else None
        iops, ios = fio_run(cfg, directory=cfg.mnt)
        t1 = read_thread_cpu(pid) if pid else {}
        p1 = read_process_cpu_ns(pid) if pid else None
        after = read_stats(cfg.mnt, missing_ok=True)
    rec = dict(iops=iops, ios=ios, counters=counters_delta(before, after))
    transport = after.get("fuse", {}).get("transport") if isinstance(after.get("fuse"), dict) else None
    if transport:
        rec["fuse_transport"] = transport  # /dev/fuse or io_uring (fuse_uring=), as the stats say
    if t0 and t1:
        rec["cpu"], rec["cpu_info"] = cpu_by_role(t0, t1)
        if p0 is not None and p1 is not None:
            rec["proc_cpu_ns"] = p1 - p0
    return rec
