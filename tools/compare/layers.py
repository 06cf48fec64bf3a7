"""The layer baselines beside biofs: a plain file, ext4, passthrough_hp, the NVMe namespace, biofs-bench."""
import json
import os

from biofs_tools import PassthroughHp, cpu_by_role, parse_size, read_thread_cpu, run

from .fio import fio_iops, fio_run


def bench_iops(cfg, c):
    """biofs-bench io on the scratch namespace, --ab the toggle: medians of A and B."""
    cmd = [os.path.join(cfg.bin, "biofs-bench"), "--dev", f"emu:{cfg.scratch}", "--rw", c["pattern"],
           "--bs", str(parse_size(c["bs"])), "--depth", str(c["qdepth"]), "--threads", str(c["numjobs"]),
           "--runtime", str(cfg.runtime), "--ab", f"{cfg.toggle}={','.join(cfg.values)}",
           "--repeats", str(cfg.layer_repeats), "--json", "--quiet"]
    p = run(cmd, timeout=cfg.runtime * 4 * cfg.layer_repeats + 120)
    for line in p.stdout.splitlines():
        if '"kind":"median"' in line.replace(" ", ""):
            m = json.loads(line)
            return m["iops_a"], m["iops_b"]
    raise RuntimeError("biofs-bench printed no median line")


def hp_run(cfg, ext4, layer, rec):
    """passthrough_hp (the reference FUSE filesystem) over the ext4 layer's files, a fresh mount
    per run, its daemon's CPU read as biofs's is; hp_uring: over FUSE-over-io_uring."""
    with PassthroughHp(cfg.hp, ext4.mnt, cfg.work + "/hp.mnt", uring=layer == "hp_uring") as hp:
        cpu0 = read_thread_cpu(hp.pid) if hp.pid else {}
        rec["iops"], rec["ios"] = fio_run(cfg, directory=hp.mnt)
        cpu1 = read_thread_cpu(hp.pid) if hp.pid else {}
    if cpu0 and cpu1 and rec["ios"]:
        rec["cpu_ns_per_io"] = sum(cpu_by_role(cpu0, cpu1)[0].values()) / rec["ios"]


def measure_layer(cfg, ext4, layer, c, key, rep, rec):
    """One run of a layer baseline for cell c (cfg.cell), its figures into rec (a runs.jsonl
    record); returns the progress line."""
    if layer == "raw":
        rec["iops"] = fio_iops(cfg, directory=cfg.work + "/raw")
        return f"{key} raw file rep {rep}: {rec['iops']:.0f} IOPS"
    if layer == "ext4":
        rec["iops"] = fio_iops(cfg, directory=ext4.mnt)
        return f"{key} ext4 loop rep {rep}: {rec['iops']:.0f} IOPS"
    if layer in ("hp", "hp_uring"):
        hp_run(cfg, ext4, layer, rec)
        cpu = f", {rec['cpu_ns_per_io'] / 1000:.1f} us CPU/IO" if "cpu_ns_per_io" in rec else ""
        return f"{key} passthrough_hp ({'io_uring' if layer == 'hp_uring' else '/dev/fuse'}) rep {rep}: " \
               f"{rec['iops']:.0f} IOPS{cpu}"
    if layer == "nvme":
        rec["iops"] = fio_iops(cfg, filename=cfg.nvme,
                               extra=["--ioengine=io_uring_cmd", "--cmd_type=nvme", "--size=100%"])
        return f"{key} io_uring_cmd rep {rep}: {rec['iops']:.0f} IOPS"
    a, b = bench_iops(cfg, c)  # bench
    rec.update(iops=a, iops_b=b)
    return f"{key} biofs-bench: {a:.0f} / {b:.0f} IOPS"
