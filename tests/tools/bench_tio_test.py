#!/usr/bin/env python3
"""biofs-bench against fio's t/io_uring: the output of a run is compared line by line with what
t/io_uring printed for the same flags (data/t_io_uring/, captured with fio f5344384f7c7): the same
lines in the same order, each number replaced by the pattern of what t/io_uring prints there
(IOPS: an integer up to 1e5, then %.2fK, then %.2fM; BW: whole MiB/s or %.2fGiB/s). biofs's own
lines follow t/io_uring's. Runs biofs-bench on the null device for a few seconds per test."""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_paths import BIN  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "t_io_uring")

IOPS = r"(?:\d+\.\d\d[KM]|\d+)"
BW = r"(?:\d+\.\d\dGiB/s|\d+MiB/s)"


# The header's numbers kept as they are by shape(): they mean the same in both programs and are
# the same for the same run (submitter index, files, node). The others are checked by
# TioOutput.assert_header() against what biofs's README says they are for the run: QD (the -d
# depth), the 0/1 flags (what the device does), sq_ring and cq_ring (the tags per hardware
# queue, --qd: no ring lies between biofs-bench and the block core, so not t/io_uring's ring of
# the next power of two of -d).
HEADER_KEPT = r"(submitter=\d+|nfiles=\d+|node=-?\d+)"


def shape(line):
    """A line with its figures replaced by their patterns; names t/io_uring and biofs print
    differently (the file, the engine) become <file> and <engine>; the header's submitter index,
    nfiles and node stay."""
    line = re.sub(r"file=.*?, nfiles=", "file=<file>, nfiles=", line)
    line = re.sub(r"Engine=[^,]*", "Engine=<engine>", line)
    line = re.sub(r"IOPS=" + IOPS + r"(?=,|$)", "IOPS=<iops>", line)
    line = re.sub(r"BW=" + BW + r"(?=,)", "BW=<bw>", line)
    line = re.sub(r"IOS/call=-?\d+/-?\d+$", "IOS/call=<s>/<c>", line)
    line = re.sub(r"tid=\d+", "tid=<tid>", line)
    line = re.sub(r"\b(polled|fixedbufs|register_files|buffered)=[01](?=,)", r"\1=<0|1>", line)
    parts = re.split(HEADER_KEPT, line)
    return "".join(part if i % 2 else re.sub(r"\d+", "<n>", part) for i, part in enumerate(parts))


def reference(name):
    """t/io_uring's lines in a captured file, without the command line and the exit status."""
    with open(os.path.join(DATA, name)) as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("$ t/io_uring") and lines[-1].startswith("exit="), name
    return lines[1:-1]


def count(text):
    """A count as t/io_uring prints it, back to a number (K and M: to the printed precision)."""
    if text.endswith("M"):
        return float(text[:-1]) * 1e6
    if text.endswith("K"):
        return float(text[:-1]) * 1e3
    return int(text)


class TioOutput(unittest.TestCase):
    def bench(self, *args):
        exe = os.path.join(BIN, "biofs-bench")
        self.assertTrue(os.access(exe, os.X_OK), f"{exe} not built")
        p = subprocess.run([exe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        return p

    def run_ok(self, *args):
        p = self.bench(*args)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.splitlines()

    def assert_shape(self, out, ref_name):
        """t/io_uring's lines first, in the same shapes; returns biofs's lines after them."""
        ref = reference(ref_name)
        self.assertGreaterEqual(len(out), len(ref), "\n".join(out))
        for i, (got, want) in enumerate(zip(out, ref)):
            self.assertEqual(shape(got), shape(want), f"line {i + 1}: {got!r} vs t/io_uring's {want!r}")
        return out[len(ref):]

    def assert_header(self, out, threads=1, depth=128, qd=256, polled=0, nfiles=1, ref_name=None):
        """t/io_uring's header lines with biofs's numbers for this run: one submitter line per
        thread (0, 1, ...), QD the -d depth, the 0/1 flags of what the null device does, and
        sq_ring = cq_ring = the tags per hardware queue (--qd), also in biofs's own settings line.
        With ref_name (a capture made with the same -d), QD is t/io_uring's too."""
        for t in range(threads):
            self.assertRegex(out[t], rf"^submitter={t}, tid=\d+, file=null, nfiles={nfiles}, node=-1$")
        self.assertEqual(out[threads], f"polled={polled}, fixedbufs=0, register_files=0, buffered=0, QD={depth}")
        self.assertEqual(out[threads + 1], f"Engine=blockcore, sq_ring={qd}, cq_ring={qd}")
        settings = [l for l in out if l.startswith("biofs-bench: devices=")]
        self.assertEqual(len(settings), 1, out)
        self.assertIn(f" depth={depth} ", settings[0])
        self.assertIn(f" threads={threads} ", settings[0])
        self.assertIn(f" qd={qd} ", settings[0])
        if ref_name:
            ref = reference(ref_name)
            m = re.search(r", QD=(\d+)$", ref[threads])
            self.assertIsNotNone(m, ref[threads])
            self.assertEqual(int(m.group(1)), depth, f"{ref_name}: t/io_uring's QD is -d")

    def interval_lines(self, out):
        return [re.fullmatch(r"IOPS=(" + IOPS + r"), BW=(" + BW + r"), IOS/call=(-?\d+)/(-?\d+)", l)
                for l in out if l.startswith("IOPS=")]

    def check_units(self, m, bs):
        """t/io_uring's thresholds and its BW arithmetic hold between IOPS and BW."""
        iops_text, bw_text = m.group(1), m.group(2)
        iops = count(iops_text)
        if iops_text.endswith("M"):
            self.assertGreater(iops, 1e6)
        elif iops_text.endswith("K"):
            self.assertTrue(1e5 < iops <= 1e6 + 5e3, iops_text)
        else:
            self.assertLessEqual(iops, 100000)
        mib = iops // (1048576 // bs)
        if bw_text.endswith("GiB/s"):
            self.assertGreater(mib, 1990)
            # t/io_uring divides MiB/s by 1000, not 1024.
            self.assertAlmostEqual(float(bw_text[:-5]) * 1000, mib, delta=mib * 0.011 + 10)
        else:
            self.assertLessEqual(int(bw_text[:-5]), 2000)
            self.assertAlmostEqual(int(bw_text[:-5]), mib, delta=mib * 0.011 + 1)

    def test_d128_s32_c32_n1_r3_lines_as_t_io_uring(self):
        out = self.run_ok("-d128", "-s32", "-c32", "-b4096", "-n1", "-r3", "null")
        extra = self.assert_shape(out, "d128-s32-c32-n1-r3.txt")
        self.assert_header(out, depth=128, qd=256, ref_name="d128-s32-c32-n1-r3.txt")
        lines = self.interval_lines(out)
        self.assertEqual(len(lines), 2, "-r3: two per-second lines")
        for m in lines:
            self.assertIsNotNone(m)
            self.check_units(m, 4096)
            self.assertEqual(m.group(3), "32", "a call submits the -s batch")
        # Maximum IOPS is the best per-second line, printed the same way.
        best = max(lines, key=lambda m: count(m.group(1)))
        self.assertIn(f"Maximum IOPS={best.group(1)}", out)
        # biofs's lines come after: the settings, the whole run, CPU per I/O.
        self.assertTrue(extra[0].startswith("biofs-bench: devices=null "), extra)
        self.assertIn(" depth=128 submit=32 complete=32 threads=1 ", extra[0])
        self.assertTrue(any(l.startswith("Whole run IOPS=") for l in extra), extra)
        self.assertTrue(any(l.startswith("CPU per I/O: ") for l in extra), extra)

    def test_s0_c99_clamped_as_t_io_uring(self):
        out = self.run_ok("-d4", "-s0", "-c99", "-r2", "null")
        extra = self.assert_shape(out, "s0-c0-clamp.txt")
        self.assert_header(out, depth=4, qd=256, ref_name="s0-c0-clamp.txt")
        (m,) = self.interval_lines(out)
        self.assertIsNotNone(m)
        self.assertEqual(m.group(3), "1", "-s0 is a batch of 1")
        self.assertGreater(count(m.group(1)), 0)
        self.assertIn(" depth=4 submit=1 complete=4 ", extra[0], "-s0 becomes 1, -c99 the depth")
        self.assertIn("QD=4", out[1])

    def test_iops_counts_submissions_not_completions(self):
        # Completions 1.5 s after submission: in the first second 4 bios are submitted and none
        # has completed. t/io_uring counts what the submit call accepted.
        out = self.run_ok("-d4", "-s4", "-c4", "-r3", "--irqmode", "timer", "--completion-nsec", "1500000000", "null")
        self.assert_shape(out, "d128-s32-c32-n1-r3.txt")
        self.assert_header(out, depth=4, qd=256)
        first, second = self.interval_lines(out)
        self.assertEqual((first.group(1), first.group(3), first.group(4)), ("4", "4", "0"))
        self.assertEqual((second.group(1), second.group(3), second.group(4)), ("4", "4", "4"))
        self.assertIn("Maximum IOPS=4", out)

    def test_two_threads_lines_as_t_io_uring(self):
        out = self.run_ok("-n2", "-r3", "null")
        self.assert_shape(out, "two-threads.txt")
        self.assert_header(out, threads=2, depth=128, qd=256, ref_name="two-threads.txt")

    def test_header_numbers_are_biofs_own(self):
        # Issue 45: shape() once replaced every digit, so any QD, sq_ring or submitter index
        # passed. Here -d100 (t/io_uring: QD=100 and rings of 128, the next power of two) with
        # --qd 64 and two devices: QD=100, sq_ring=cq_ring=64 (the hardware queue's tags), nfiles=2.
        out = self.run_ok("-d100", "-r1", "--qd", "64", "--dev", "null", "--dev", "null")
        self.assert_header(out, depth=100, qd=64, nfiles=2)
        self.assertNotIn("sq_ring=128", out[2])
        # shape() itself keeps the numbers both programs mean the same way.
        self.assertNotEqual(shape("submitter=1, tid=5, file=x, nfiles=1, node=-1"),
                            shape("submitter=0, tid=5, file=x, nfiles=1, node=-1"))
        self.assertNotEqual(shape("submitter=0, tid=5, file=x, nfiles=2, node=-1"),
                            shape("submitter=0, tid=5, file=x, nfiles=1, node=-1"))
        self.assertEqual(shape("submitter=0, tid=5, file=x, nfiles=1, node=-1"),
                         shape("submitter=0, tid=77, file=y, nfiles=1, node=-1"))
        self.assertNotEqual(shape("polled=2, fixedbufs=0, register_files=0, buffered=0, QD=4"),
                            shape("polled=0, fixedbufs=0, register_files=0, buffered=0, QD=4"))

    def test_runtime_1_has_no_per_second_line(self):
        out = self.run_ok("-r1", "null")
        self.assertEqual([shape(l) for l in out[3:5]], ["Exiting on timeout", "Maximum IOPS=<iops>"])
        self.assertEqual(out[4], "Maximum IOPS=0")

    def test_flags_that_cannot_apply_say_so_in_one_line(self):
        # -B1 -F1 -O0 -X1 on the null device: a line each on stderr, and the run goes on.
        p = self.bench("-B1", "-F1", "-O0", "-X1", "-r2", "null")
        self.assertEqual(p.returncode, 0, p.stderr)
        notes = p.stderr.splitlines()
        self.assertEqual(len(notes), 4, p.stderr)
        for flag in ("-B1", "-F1", "-O0", "-X1"):
            self.assertEqual(sum(flag in l for l in notes), 1, p.stderr)
        self.assert_shape(p.stdout.splitlines(), "s0-c0-clamp.txt")
        self.assert_header(p.stdout.splitlines(), depth=128, qd=256)
        # -N1 (no no-op request here), -u1 off nvme: and -p1 without poll queues stop, in one line.
        for flag in ("-N1", "-u1", "-p1"):
            p = self.bench(flag, "-r1", "null")
            self.assertNotEqual(p.returncode, 0, flag)
            self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
            self.assertIn(flag, p.stderr)
            self.assertEqual(p.stdout, "")


if __name__ == "__main__":
    unittest.main()
