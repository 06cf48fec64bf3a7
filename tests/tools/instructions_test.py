#!/usr/bin/python3
"""Tests of tools/biofs-instructions (instructions per I/O under callgrind).

    instructions_test.py TestClass.test_name

Parse is pure (a hand-written callgrind file). Callgrind runs `biofs-bench fsio` under valgrind
(BIOFS_BIN_DIR, default build/bin) and exits 77 (ctest: skipped) without valgrind, addr2line or
the bench. tests/tools/CMakeLists.txt registers each test_ method as instructions_test.NAME.
"""
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_paths import BIN, REPO, TOOLS, load_tool  # noqa: E402
TOOL = os.path.join(TOOLS, "biofs-instructions")
IOS = 1000  # measured I/Os per run: seconds under callgrind


instr = load_tool("biofs-instructions")

# A callgrind file as valgrind 3.19 writes it with --dump-instr=yes --compress-pos=no: names
# compressed, an inlined header inside an fs function, a call into the allocator's object.
SAMPLE = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 1
cmd:  biofs-bench fsio
part: 1

desc: Trigger: Client Request: fsio measured

positions: instr line
events: Ir

summary: 160
ob=(1) /x/build/bin/biofs-bench
fl=(1) /x/fs/file_io.cc
fn=(1) biofs::Filesystem::read_async(unsigned long)
0x1000 60 10
fi=(2) /x/blockcore/bio_set.cc
0x1004 400 20
cob=(2) /usr/lib/x86_64-linux-gnu/libtbbmalloc.so.2
cfl=(3) ???
cfn=(2) scalable_malloc
calls=1 0x9000 0
0x1008 401 30
fe=(1)
0x100c 61 5
fi=(4) /usr/include/c++/12/bits/std_function.h
0x1010 200 7

ob=(2)
fl=(3)
fn=(2)
0x9000 0 30

ob=(3) /usr/lib/x86_64-linux-gnu/libc.so.6
fl=(3)
fn=(3) memcpy
0x7000 0 40
ob=(1)
fl=(5) /x/nvme/emu_queue.cc
fn=(4) biofs::EmuQueue::submit()
0x2000 10 48

totals: 160
"""


class Parse(unittest.TestCase):
    def test_callgrind_file_costs_layers_and_calls(self):
        p = instr.parse_callgrind(SAMPLE)
        self.assertEqual(p.total, 10 + 20 + 5 + 7 + 30 + 40 + 48)
        self.assertEqual(p.desc["desc"][0], "Trigger: Client Request: fsio measured")
        # The call's inclusive cost is a call, not a self cost of its site.
        self.assertEqual(p.calls, [("/x/build/bin/biofs-bench", 0x1008, "scalable_malloc", 30)])
        self.assertNotIn(("/x/build/bin/biofs-bench", 0x1008), p.self_cost)
        lay = instr.layers(p)
        # bio_set.cc inlined into an fs function is the block core's; std_function.h there is fs's.
        self.assertEqual(lay, dict(fs=10 + 5 + 7, blockcore=20, nvme=48, libfuse=0, libc_alloc=30 + 40, other=0))
        self.assertEqual(sum(lay.values()), p.total)

    def test_layer_rules(self):
        self.assertEqual(instr.layer_of("/r/fs/dir.cc", "", ""), "fs")
        self.assertEqual(instr.layer_of("/usr/include/liburing.h", "/r/nvme/emu_queue.cc", "bin"), "nvme")
        self.assertEqual(instr.layer_of("???", "???", "/lib/libstdc++.so.6"), "libc_alloc")
        self.assertEqual(instr.layer_of("???", "???", "/lib/liburing.so.2"), "nvme")
        self.assertEqual(instr.layer_of("/r/tools/bench/fsio_bench.cc", "", "bin"), "other")
        self.assertEqual(instr.layer_of("/r/devices/open_device.cc", "", "bin"), "other")

    def test_csv_columns_begin_with_the_documented_columns(self):
        self.assertEqual(instr.CSV_COLUMNS, "engine,numjobs,qdepth,pattern,bs,side,ios,instr_per_io,"
                         "alloc_instr_per_io,alloc_share_pct".split(","))
        for l in ("fs", "blockcore", "nvme", "libfuse", "libc_alloc", "other"):
            self.assertIn(f"{l}_instr_per_io", instr.EXTRA_COLUMNS)

    def test_alloc_names(self):
        self.assertTrue(instr.is_alloc_function("biofs::bio_put(biofs::Bio*)"))
        self.assertTrue(instr.is_alloc_function("biofs::bio_alloc_bioset(biofs::BlockDevice*, unsigned short, "
                                                "unsigned int, unsigned int, biofs::BioSet*)"))
        self.assertFalse(instr.is_alloc_function("biofs::bio_put_percpu_cache(biofs::Bio*)"))


def missing_tools():
    """Why the Callgrind tests cannot run here, or None."""
    if os.environ.get("BIOFS_SANITIZED") == "1":
        return "valgrind cannot run a sanitizer build"
    bench = os.path.join(BIN, "biofs-bench")
    missing = [t for t in ("valgrind", "addr2line", "nm", "readelf") if not shutil.which(t)]
    if missing or not os.access(bench, os.X_OK):
        return f"missing {missing or bench}"
    # The layers are told apart by each instruction's source file (addr2line -i): a build
    # without debug information (CMAKE_BUILD_TYPE=Release) has none to tell them by.
    sections = subprocess.run(["readelf", "-S", "--wide", bench], stdout=subprocess.PIPE, text=True).stdout
    if ".debug_info" not in sections:
        return f"{bench} has no debug information (a Release build): build with RelWithDebInfo"
    return None


def run_tool(out, *args):
    cmd = [sys.executable, TOOL, "--bin", BIN, "--out", out] + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    with open(os.path.join(out, "instructions.csv")) as fh:
        return list(csv.DictReader(fh)), p.stdout


class Callgrind(unittest.TestCase):
    def setUp(self):
        why = missing_tools()
        if why:
            self.skipTest(why)
        self.tmp = tempfile.mkdtemp(prefix="biofs-instr-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_stable_and_cache(self, device, pattern):
        rows, stdout = run_tool(self.tmp, "--devices", device, "--patterns", pattern, "--qdepths", "4",
                                "--ios", str(IOS), "--warmup", "200", "--file-size", "4M", "--image-size", "16M",
                                "--repeats", "2", "--toggle", "bio_cache=off,on")
        self.assertEqual(len(rows), 4, stdout)
        by_side = {}
        for r in rows:
            self.assertEqual((r["engine"], r["numjobs"], r["qdepth"], r["pattern"], r["bs"], r["ios"]),
                             ("inproc", "1", "4", pattern, "4k", str(IOS)))
            # Exactly one bio per 4 KiB I/O: no metadata I/O in the measured region.
            self.assertEqual(float(r["bios_per_io"]), 1.0)
            layers = sum(float(r[f"{l}_instr_per_io"]) for l in ("fs", "blockcore", "nvme", "libfuse",
                                                                   "libc_alloc", "other"))
            self.assertAlmostEqual(layers, float(r["instr_per_io"]), delta=1.0)
            self.assertEqual(float(r["libfuse_instr_per_io"]), 0.0)
            self.assertGreater(float(r["fs_instr_per_io"]), 0)
            self.assertGreater(float(r["blockcore_instr_per_io"]), 0)
            by_side.setdefault(r["side"], []).append(r)
        for side, rs in by_side.items():
            a, b = (float(r["instr_per_io"]) for r in rs)
            self.assertLess(abs(a - b) / max(a, b), 0.01, f"{side}: {a} vs {b} instructions per I/O")
            a, b = (float(r["alloc_instr_per_io"]) for r in rs)
            self.assertLess(abs(a - b) / max(a, b), 0.01, f"{side}: alloc {a} vs {b}")
        off = min(float(r["alloc_instr_per_io"]) for r in by_side["off"])
        on = max(float(r["alloc_instr_per_io"]) for r in by_side["on"])
        self.assertGreater(on, 0)
        self.assertLess(on, off, "the bio cache should lower the allocation's instructions per I/O")
        # Every allocation is cache-eligible with the cache on; a rare miss is a cache found empty.
        self.assertTrue(all(int(r["cache_hits"]) + int(r["cache_misses"]) == IOS for r in by_side["on"]))
        self.assertTrue(all(int(r["cache_hits"]) >= IOS - 5 for r in by_side["on"]))
        self.assertTrue(all(int(r["cache_hits"]) == 0 for r in by_side["off"]))

    def test_null_counts_are_stable_and_the_bio_cache_lowers_alloc(self):
        self.check_stable_and_cache("null", "randwrite")

    def test_emu_counts_are_stable_and_the_bio_cache_lowers_alloc(self):
        self.check_stable_and_cache("emu", "randread")


if __name__ == "__main__":
    # ctest counts exit 77 as skipped (SKIP_RETURN_CODE): said before any Callgrind test runs.
    if any(n.startswith("Callgrind") for n in sys.argv[1:]) and missing_tools():
        print(f"skipped: {missing_tools()}")
        sys.exit(77)
    unittest.main(argv=sys.argv[:1] + sys.argv[1:], verbosity=2)
