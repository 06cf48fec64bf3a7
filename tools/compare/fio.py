"""fio for one cell: the measured run, the files' layout, and the CPUs its jobs run on."""
import json
import re

from biofs_tools import run

CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def fio_cpus(cfg):
    """--fio-cpus, or None (the tests' small config classes do not carry it)."""
    return getattr(cfg, "fio_cpus", None)


def fio_placement(cfg):
    """fio's CPU arguments: with --fio-cpus each job runs on one CPU of the list (fio's
    cpus_allowed, policy split). Unpinned, the scheduler decides, and on a machine whose device
    interrupts all reach one CPU, where fio lands moves a cell's IOPS by 20-40% (docs/results/history.md,
    "The default stack against passthrough_hp, the flush without the lock")."""
    cpus = fio_cpus(cfg)
    return [f"--cpus_allowed={cpus}", "--cpus_allowed_policy=split"] if cpus else []


def fio_run(args, directory=None, filename=None, extra=()):
    """Runs fio for one cell; returns (IOPS, I/Os): reads + writes, all jobs (total_ios: the
    I/Os completed in the measured time, the ramp left out)."""
    cmd = ["fio", "--name=cmp", f"--rw={args.cell['pattern']}", f"--bs={args.cell['bs']}",
           f"--ioengine={args.cell['engine']}", f"--iodepth={args.cell['qdepth']}",
           f"--numjobs={args.cell['numjobs']}", f"--size={args.file_size}",
           f"--runtime={args.runtime}", "--time_based", "--group_reporting",
           f"--direct={0 if args.buffered else 1}", "--output-format=json"]
    if args.ramp:
        cmd.append(f"--ramp_time={args.ramp}")
    if directory:
        cmd += [f"--directory={directory}", "--filename_format=cmp.$jobnum"]
    if filename:
        cmd.append(f"--filename={filename}")
    cmd += fio_placement(args) + list(extra)
    p = run(cmd, timeout=args.runtime * 4 + 120)
    out = p.stdout[p.stdout.find("{"):]
    job = json.loads(out)["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"fio: job error {job['error']}")
    return (job["read"]["iops"] + job["write"]["iops"],
            job["read"].get("total_ios", 0) + job["write"].get("total_ios", 0))


def fio_iops(args, directory=None, filename=None, extra=()):
    """fio_run's IOPS alone."""
    return fio_run(args, directory, filename, extra)[0]


def fio_layout(directory, numjobs, file_size):
    """Writes the cells' files once, so every run reads and overwrites allocated blocks."""
    run(["fio", "--name=cmp", f"--directory={directory}", "--filename_format=cmp.$jobnum",
         f"--numjobs={numjobs}", f"--size={file_size}", "--rw=write", "--bs=1M",
         "--ioengine=psync", "--direct=1", "--output-format=json"], timeout=1800)
