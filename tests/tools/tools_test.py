#!/usr/bin/python3
"""Tests of tools/biofs-compare, tools/biofs-stat, tools/biofs-workload and their shared module
tools/biofs_tools.py.

    tools_test.py TestClass.test_name

Pure tests (every class but Mount) need nothing; the Mount tests need root, /dev/fuse, fio and
the built binaries (BIOFS_BIN_DIR, default build/bin) and exit 77 (ctest: skipped) without them.
tests/tools/CMakeLists.txt registers each test_ method as its own ctest entry,
tools_test.NAME without the test_ (label fuse for Mount, unit for the rest).
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")
BIN = os.environ.get("BIOFS_BIN_DIR", os.path.join(REPO, "build", "bin"))


def load_tool(name):
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), os.path.join(TOOLS, name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


compare = load_tool("biofs-compare")
workload = load_tool("biofs-workload")
sys.path.insert(0, TOOLS)
import biofs_tools  # noqa: E402

# Rows of the reference results (the CSV attached to "block: enable per-cpu bio cache by
# default", nullblk_fs_results.csv), as they are there.
REFERENCE_ROWS = """\
engine,medium,fs_type,numjobs,qdepth,pattern,bs,repeat_id,IOPS,IOPS_new,diff
io_uring,null_blk,ext4,1,1,randread,4k,1,441198.8267,444427.4858,0.732%
io_uring,null_blk,ext4,1,1,randread,4k,2,438292.0236,444626.8791,1.445%
libaio,null_blk,ext4,64,1,randread,4k,1,662702.9531,626737.4842,-5.427%
libaio,null_blk,ext4,64,1,randread,4k,2,664373.2418,649577.2615,-2.227%
sync,null_blk,ext4,64,1,read,4k,1,1424210.093,1401115.659,-1.622%
sync,null_blk,ext4,1,64,read,4k,1,588193.8269,609792.1069,3.672%
"""


class CompareMath(unittest.TestCase):
    def test_header_is_the_reference_header(self):
        self.assertEqual(compare.CSV_HEADER, REFERENCE_ROWS.splitlines()[0])

    def test_diff_is_computed_as_the_reference_does(self):
        for line in REFERENCE_ROWS.splitlines()[1:]:
            f = line.split(",")
            c = dict(engine=f[0], numjobs=int(f[3]), qdepth=int(f[4]), pattern=f[5], bs=f[6])
            row = compare.csv_row(c, f[1], f[2], int(f[7]), float(f[8]), float(f[9]))
            self.assertEqual(row, line)

    def test_group_summary_pools_the_pairs_of_a_group(self):
        rows = [("io_uring", "randread", [(100.0, 110.0), (200.0, 220.0)]),
                ("io_uring", "randread", [(50.0, 55.0)]),
                ("sync", "read", [(100.0, 103.0), (100.0, 97.0), (100.0, 101.0)])]
        out = {(e, p): (n, est, lo, hi) for e, p, n, est, lo, hi in compare.group_summary(rows)}
        n, est, lo, hi = out[("io_uring", "randread")]
        self.assertEqual(n, 3)
        self.assertAlmostEqual(est, 10.0)
        self.assertAlmostEqual(lo, 10.0)
        self.assertAlmostEqual(hi, 10.0)
        n, est, lo, hi = out[("sync", "read")]
        self.assertEqual(n, 3)
        self.assertLess(lo, 0.0)
        self.assertGreater(hi, 0.0)

    def test_stage_histogram_difference_and_quantiles(self):
        before = {"stages": {"tag": {"buckets": [[128, 5], [1024, 1]]}}}
        after = {"stages": {"tag": {"buckets": [[128, 15], [1024, 1], [8192, 10]]}},
                 "bio_cache": {"alloc_hits": 9}, "queue": {"tags": 8, "tag_calls": 2}}
        d = compare.counters_delta(before, after)
        self.assertEqual(d["stages"], {"tag": {128: 10, 8192: 10}})
        self.assertEqual(d["hits"], 9)
        self.assertEqual(compare.hist_quantile(d["stages"]["tag"], 0.5), 128 + 7)  # [128, 143]
        self.assertEqual(compare.hist_quantile(d["stages"]["tag"], 0.99), 8192 + 511)

    def test_buffered_cells_say_whether_the_page_cache_was_kept(self):
        class Cfg:
            buffered, mount_opts = False, "keep_cache=off"
        self.assertEqual(compare.io_mode(Cfg), "direct")
        Cfg.buffered = True
        self.assertIn("keep_cache=off", compare.io_mode(Cfg))
        Cfg.mount_opts = "bio_cache=off"
        self.assertIn("keep_cache=on", compare.io_mode(Cfg))


class Shared(unittest.TestCase):
    def test_shared_helpers_format_and_parse(self):
        self.assertEqual([biofs_tools.fmt_ns(n) for n in (0, 999, 1000, 12345, 999_999, 1_000_000, 2_345_678)],
                         ["0 ns", "999 ns", "1.0 us", "12.3 us", "1000.0 us", "1.00 ms", "2.35 ms"])
        self.assertEqual([biofs_tools.parse_size(t) for t in ("512", "4k", "4K", "256M", "2G", "2GiB", "1.5g", "1t")],
                         [512, 4096, 4096, 256 << 20, 2 << 30, 2 << 30, 3 << 29, 1 << 40])
        self.assertEqual(biofs_tools.median([3, None, 1, 2]), 2)
        self.assertEqual(biofs_tools.median([4.0, 1.0]), 2.5)
        self.assertIsNone(biofs_tools.median([]))
        self.assertEqual(biofs_tools.median([None], 0.0), 0.0)

    def test_shared_read_stats_names_a_path_that_is_no_biofs_mount(self):
        tmp = tempfile.mkdtemp(prefix="biofs-tools-test.")
        try:
            with self.assertRaises(OSError) as e:
                biofs_tools.read_stats(tmp)
            self.assertIn(tmp, str(e.exception))
            self.assertIn(biofs_tools.STATS_XATTR, str(e.exception))
            self.assertEqual(biofs_tools.read_stats(tmp, missing_ok=True), {})
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_shared_scripts_find_the_module_from_any_directory_and_through_a_link(self):
        tmp = tempfile.mkdtemp(prefix="biofs-tools-test.")
        try:
            for name in ("biofs-stat", "biofs-compare", "biofs-workload"):
                link = os.path.join(tmp, name)
                os.symlink(os.path.join(TOOLS, name), link)
                for cmd in ([os.path.join(TOOLS, name), "--help"], [link, "--help"]):
                    p = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       timeout=60, env=dict(os.environ, PYTHONPATH=""))
                    self.assertEqual(p.returncode, 0, p.stderr)
                    self.assertIn(name, p.stdout)
            # The tools share one module's helpers rather than copies of them.
            self.assertIs(compare.read_stats, biofs_tools.read_stats)
            self.assertIs(workload.parse_size, compare.parse_size)
            self.assertIs(workload.umount, compare.umount)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class WorkloadMath(unittest.TestCase):
    def rows(self):
        """Three rounds of two steps on biofs, ext4 and hp; hp's round 2 check failed."""
        out = []
        secs = {"biofs": (4.0, 2.0), "ext4": (1.0, 1.0), "hp": (2.0, 4.0)}
        for fs in ("biofs", "ext4", "hp"):
            for rnd in (1, 2, 3):
                for i, step in enumerate(("extract", "check")):
                    status = 1 if (fs, rnd, step) == ("hp", 2, "check") else 0
                    cpu = None if fs == "ext4" else 0.5 * rnd
                    out.append(dict(fs=fs, round=rnd, step=step, seconds=secs[fs][i] * rnd, cpu=cpu, status=status))
        return out

    def test_workload_median_ratio_and_round_order(self):
        self.assertEqual(workload.median([3.0, None, 1.0, 2.0]), 2.0)
        self.assertIsNone(workload.median([None]))
        self.assertEqual(workload.ratio(3.0, 2.0), 1.5)
        self.assertIsNone(workload.ratio(None, 2.0))
        self.assertIsNone(workload.ratio(1.0, 0.0))
        fss = ["biofs", "ext4", "hp"]
        self.assertEqual([workload.round_order(fss, r) for r in (1, 2, 3, 4)],
                         [fss, ["ext4", "hp", "biofs"], ["hp", "biofs", "ext4"], fss])
        self.assertEqual(workload.round_order(["biofs", "ext4"], 2), ["ext4", "biofs"])
        self.assertEqual(workload.steps_for(True)[-1], "fsck")
        self.assertIn("build_make", workload.steps_for(False))
        # /proc/PID/stat: utime and stime are fields 14 and 15, counted after a comm with spaces.
        line = "4242 (biofs (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 6 0 1 2 3"
        self.assertAlmostEqual(workload.cpu_seconds(line, 100), 3.0)

    def test_workload_csv_rows(self):
        self.assertEqual(workload.CSV_HEADER, "fs,round,step,seconds,daemon_cpu_s,exit_status")
        r = dict(fs="biofs", round=2, step="git", seconds=1.23456, cpu=0.5, status=0)
        self.assertEqual(workload.csv_row(r), "biofs,2,git,1.235,0.500,0")
        r2 = dict(fs="ext4", round=1, step="build_make", seconds=None, cpu=None, status=workload.NOT_RUN)
        self.assertEqual(workload.csv_row(r2), "ext4,1,build_make,,,-1")
        back = workload.parse_csv_row(workload.csv_row(r))
        self.assertEqual((back["fs"], back["round"], back["step"], back["status"]), ("biofs", 2, "git", 0))
        self.assertAlmostEqual(back["seconds"], 1.235)
        self.assertIsNone(workload.parse_csv_row(workload.csv_row(r2))["cpu"])

    def test_workload_summary_table_medians_ratios_and_statuses(self):
        rows = self.rows()
        t = workload.summary_table(rows, ["biofs", "ext4", "hp"], ["extract", "check", "fsck"])
        head = [c.strip() for c in t[0].strip("|").split("|")]
        self.assertEqual(head, ["step", "biofs s", "ext4 s", "hp s", "biofs/ext4", "biofs/hp", "biofs CPU s",
                                "hp CPU s", "exit status (biofs, ext4, hp)"])
        cells = {l.split("|")[1].strip(): [c.strip() for c in l.strip("|").split("|")] for l in t[2:]}
        self.assertNotIn("fsck", cells)  # no rows: no line
        ex = cells["extract"]
        self.assertEqual(ex[1:4], ["8.00", "2.00", "4.00"])  # medians of x1, x2, x3
        self.assertEqual(ex[4:6], ["4.00x", "2.00x"])
        self.assertEqual(ex[6:8], ["1.00", "1.00"])
        self.assertEqual(ex[8], "all 0; all 0; all 0")
        ck = cells["check"]
        self.assertEqual(ck[3], "8.00")  # hp: the median of rounds 1 and 3 (4 and 12; round 2 failed)
        self.assertEqual(ck[8], "all 0; all 0; 0,1,0")
        tot = cells["**all but fsck**"]
        self.assertEqual(tot[1:4], ["12.00", "4.00", "12.00"])  # hp: rounds 1 and 3 only (6 and 18)
        self.assertIn("2/3 rounds clean", tot[8])
        self.assertEqual(workload.check_summary(rows, ["biofs", "ext4", "hp"]),
                         "biofs pass 3/3, ext4 pass 3/3, hp FAIL 2/3")
        # Without hp and ext4: no ratio columns.
        t = workload.summary_table([r for r in rows if r["fs"] == "biofs"], ["biofs", "ext4", "hp"], ["extract"])
        self.assertEqual(t[0], "| step | biofs s | biofs CPU s | exit status (biofs) |")
        self.assertEqual(workload.fmt_statuses([dict(round=1, status=workload.NOT_RUN)]), "not run")

    def test_workload_manifest_sees_contents_modes_times_and_links(self):
        tmp = tempfile.mkdtemp(prefix="biofs-tools-test.")
        try:
            trees = []
            for name in ("a", "b"):
                root = os.path.join(tmp, name)
                os.makedirs(os.path.join(root, "d", ".git"))
                os.makedirs(os.path.join(root, ".git"))
                for p, data in (("d/f", b"one"), ("g", b"two"), (".git/x", b"ignored")):
                    with open(os.path.join(root, p), "wb") as f:
                        f.write(data)
                    os.utime(os.path.join(root, p), (1000000, 1000000))
                os.symlink("d/f", os.path.join(root, "l"))
                trees.append(root)
            a, b = trees
            ref = workload.manifest(a)
            self.assertEqual(sorted(ref), ["d", "d/.git", "d/f", "g", "l"])  # only the top .git is left out
            self.assertEqual(workload.diff_manifest(ref, workload.manifest(b)), [])
            with open(os.path.join(b, ".git", "x"), "wb") as f:
                f.write(b"changed")
            self.assertEqual(workload.diff_manifest(ref, workload.manifest(b)), [])
            with open(os.path.join(b, "g"), "r+b") as f:
                f.write(b"tw0")
            os.utime(os.path.join(b, "g"), (1000000, 1000000))
            os.chmod(os.path.join(b, "d", "f"), 0o600)
            os.utime(os.path.join(b, "d", "f"), (1000000, 2000000))
            os.unlink(os.path.join(b, "l"))
            os.symlink("g", os.path.join(b, "l"))
            os.symlink("g", os.path.join(b, "new"))
            d = workload.diff_manifest(ref, workload.manifest(b))
            self.assertEqual(len(d), 4, d)
            self.assertTrue(d[0].startswith("differs: d/f: mode 420 != 384, mtime 1000000 != 2000000"), d[0])
            self.assertTrue(d[1].startswith("differs: g: sha256 "), d[1])
            self.assertTrue(d[2].startswith("differs: l: target 'd/f' != 'g'"), d[2])
            self.assertEqual(d[3], "extra: new")
            os.unlink(os.path.join(b, "g"))
            self.assertIn("missing: g", workload.diff_manifest(ref, workload.manifest(b)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def need_mount():
    why = None
    if os.geteuid() != 0:
        why = "not root"
    elif not os.path.exists("/dev/fuse"):
        why = "no /dev/fuse"
    elif not shutil.which("fio") or not shutil.which("fusermount3"):
        why = "fio or fusermount3 missing"
    elif not os.access(os.path.join(BIN, "biofs"), os.X_OK):
        why = f"{BIN}/biofs not built"
    return why


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, **kw)


class Bench(unittest.TestCase):
    """biofs-bench's CPU per I/O: the process and submitter CPU clocks over the I/Os done."""

    def bench(self, *args):
        exe = os.path.join(BIN, "biofs-bench")
        self.assertTrue(os.access(exe, os.X_OK), f"{exe} not built")
        p = run([exe, "--runtime", "0.2", "--json", *args])
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]

    def test_bench_reports_cpu_per_io(self):
        (r,) = self.bench("--dev", "null")
        self.assertGreater(r["cpu_ns_per_io"], 0)
        self.assertGreater(r["submit_cpu_ns_per_io"], 0)
        # The submitters' CPU is part of the process's (clock granularity aside).
        self.assertLessEqual(r["submit_cpu_ns_per_io"], r["cpu_ns_per_io"] * 1.01 + 1)
        # A second of CPU per I/O would be a unit error, not a measurement.
        self.assertLess(r["cpu_ns_per_io"], 1e6)

    def test_bench_ab_medians_carry_cpu_per_io(self):
        rows = self.bench("--dev", "null", "--ab", "bio_cache", "--repeats", "1")
        runs = [r for r in rows if r["kind"] == "run"]
        (med,) = [r for r in rows if r["kind"] == "median"]
        self.assertEqual(sorted(r["value"] for r in runs), ["off", "on"])
        cpu = {r["value"]: r["cpu_ns_per_io"] for r in runs}
        self.assertAlmostEqual(med["cpu_ns_per_io_a"], cpu["off"], delta=0.11)
        self.assertAlmostEqual(med["cpu_ns_per_io_b"], cpu["on"], delta=0.11)


class Mount(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="biofs-tools-test.")
        self.img = os.path.join(self.tmp, "disk.img")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)

    def tearDown(self):
        if os.path.ismount(self.mnt):
            run(["fusermount3", "-u", self.mnt])
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stat_json(self):
        p = run([os.path.join(TOOLS, "biofs-stat"), self.mnt, "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_stat_json_counters_move_after_io(self):
        with open(self.img, "wb") as f:
            f.truncate(256 << 20)
        self.assertEqual(run([os.path.join(BIN, "mkfs.biofs"), "-f", "-q", f"emu:{self.img}"]).returncode, 0)
        p = run([os.path.join(BIN, "biofs"), f"emu:{self.img}", self.mnt, "-o", "bio_cache=on"])
        self.assertEqual(p.returncode, 0, p.stderr)
        s0 = self.stat_json()
        for key in ("rss_bytes", "bio_cache", "queue", "io", "stages"):
            self.assertIn(key, s0)
        self.assertGreater(s0["rss_bytes"], 0)
        self.assertTrue(s0["bio_cache"]["enabled"])
        path = os.path.join(self.mnt, "f")
        block = os.urandom(4096)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
        buf = bytearray(4096 * 256)
        mv = memoryview(buf)
        for i in range(256):
            mv[i * 4096:(i + 1) * 4096] = block
        import mmap
        aligned = mmap.mmap(-1, len(buf))  # page-aligned, for O_DIRECT
        aligned.write(bytes(buf))
        for _ in range(4):
            self.assertEqual(os.pwrite(fd, aligned, 0), len(buf))
        os.fsync(fd)
        os.close(fd)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        for off in range(0, len(buf), 4096):
            self.assertEqual(os.preadv(fd, [memoryview(aligned)[:4096]], off), 4096)
        os.close(fd)
        s1 = self.stat_json()
        self.assertGreaterEqual(s1["io"]["writes"] - s0["io"]["writes"], 4)
        self.assertGreaterEqual(s1["io"]["reads"] - s0["io"]["reads"], 256)
        self.assertGreaterEqual(s1["io"]["write_bytes"] - s0["io"]["write_bytes"], 4 * len(buf))
        allocs = lambda s: s["bio_cache"]["alloc_hits"] + s["bio_cache"]["alloc_misses"]
        self.assertGreaterEqual(allocs(s1) - allocs(s0), 256)
        self.assertGreater(s1["bio_cache"]["alloc_hits"], s0["bio_cache"]["alloc_hits"])
        self.assertGreater(s1["queue"]["requests"], s0["queue"]["requests"])
        self.assertGreater(s1["queue"]["tag_calls"], s0["queue"]["tag_calls"])
        self.assertEqual(s1["io"]["errors"], 0)
        # The human form names the sections; a directory that is not a biofs mount is refused.
        p = run([os.path.join(TOOLS, "biofs-stat"), self.mnt])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("bio cache on", p.stdout)
        self.assertIn("tags/call", p.stdout)
        p = run([os.path.join(TOOLS, "biofs-stat"), self.tmp])
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1)
        self.assertIn(self.tmp, p.stderr)

    def compare(self, *extra):
        return run([os.path.join(TOOLS, "biofs-compare"), "--bin", BIN, "--image", self.img,
                    "--image-size", "256M", "--file-size", "16M", "--engines", "io_uring", "--qdepths", "8",
                    "--patterns", "randread", "--repeats", "2", "--runtime", "1", "--layers", "none",
                    "--out", os.path.join(self.tmp, "out"), *extra])

    def test_compare_tiny_matrix_writes_reference_csv_and_resumes(self):
        p = self.compare()
        self.assertEqual(p.returncode, 0, p.stderr)
        out = os.path.join(self.tmp, "out")
        with open(os.path.join(out, "results.csv")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], compare.CSV_HEADER)
        self.assertEqual(len(lines), 3)  # one cell, two repeats
        for i, line in enumerate(lines[1:], 1):
            f = line.split(",")
            self.assertEqual(len(f), 11)
            self.assertEqual(f[:8], ["io_uring", "emu", "biofs", "1", "8", "randread", "4k", str(i)])
            old, new = float(f[8]), float(f[9])
            self.assertGreater(old, 0)
            self.assertEqual(f[10], f"{(new - old) / old * 100:.3f}%")
        with open(os.path.join(out, "cells.csv")) as f:
            cells = [l.split(",") for l in f.read().splitlines()]
        row = dict(zip(cells[0], cells[1]))
        self.assertEqual(float(row["hit_rate_old"]), 0.0)  # bio_cache=off: no cache
        self.assertGreater(float(row["hit_rate_new"]), 0.5)
        self.assertGreater(int(row["requests_new"]), 0)
        with open(os.path.join(out, "runs.jsonl")) as f:
            runs = f.read().splitlines()
        self.assertEqual(len(runs), 4)  # two repeats x two sides
        self.assertEqual([json.loads(r)["side"] for r in runs], ["off", "on", "on", "off"])
        # Resume: every run is there, none is redone, and the report is the same.
        p = self.compare("--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("4 runs, 4 already done", p.stderr)
        self.assertNotIn("IOPS  elapsed", p.stderr)
        with open(os.path.join(out, "results.csv")) as f:
            self.assertEqual(f.read().splitlines(), lines)
        # An interrupted run (its line lost): only that run is done again.
        with open(os.path.join(out, "runs.jsonl"), "w") as f:
            f.write("\n".join(runs[:3]) + "\n" + runs[3][:20])
        p = self.compare("--resume")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("4 runs, 3 already done", p.stderr)
        self.assertEqual(p.stderr.count("IOPS  elapsed"), 1)
        self.assertIn("[4/4] io_uring/1/8/randread/4k bio_cache=off rep 2", p.stderr)

    def test_workload_quick_end_to_end(self):
        out = os.path.join(self.tmp, "wl-out")
        p = subprocess.run([os.path.join(TOOLS, "biofs-workload"), "--quick", "--bin", BIN, "--out", out,
                            "--work", self.tmp, "--no-install"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=600)
        self.assertIn(p.returncode, (0, 3), p.stderr)
        with open(os.path.join(out, "steps.csv")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], workload.CSV_HEADER)
        rows = [workload.parse_csv_row(l) for l in lines[1:]]
        fss = ["biofs", "ext4"] + (["hp"] if shutil.which("passthrough_hp") else [])
        steps = workload.steps_for(True)
        self.assertEqual(sorted((r["fs"], r["step"]) for r in rows), sorted((fs, s) for fs in fss for s in steps))
        for r in rows:
            self.assertEqual(r["round"], 1)
            if r["fs"] in ("biofs", "ext4"):
                self.assertEqual(r["status"], 0, f"{r}: {p.stderr[-2000:]}")
            self.assertIsNotNone(r["seconds"])
            if r["fs"] == "biofs" and r["step"] not in ("fsck",):
                self.assertIsNotNone(r["cpu"], r)  # the daemon was found
            if r["fs"] == "ext4":
                self.assertIsNone(r["cpu"])
        with open(os.path.join(out, "summary.md")) as f:
            summary = f.read()
        self.assertIn("| extract |", summary)
        self.assertIn("biofs pass 1/1, ext4 pass 1/1", summary)
        self.assertNotIn("build_make", summary)  # --quick leaves the build out
        self.assertIn(summary.strip(), p.stdout)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["mnt", "wl-out"])  # its temp dir under --work is gone


if __name__ == "__main__":
    names = sys.argv[1:]
    if any(n.startswith("Mount") for n in names) or not names:
        why = need_mount()
        if why:
            print(f"skipped: {why}")
            sys.exit(77)
    suite = unittest.defaultTestLoader.loadTestsFromNames(names, sys.modules[__name__]) if names else \
        unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
