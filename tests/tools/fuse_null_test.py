#!/usr/bin/env python3
"""tools/fuse-null, the FUSE server doing no work that bounds a metadata operation
(tools/bench-fuse-ops.sh's `null` layer): a bound measured on a server that answers wrongly
would be no bound, so its answers are checked through a real mount, on both transports."""
import errno
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_paths import BIN, run_tests  # noqa: E402

EXE = os.path.join(BIN, "fuse-null")


def need_mount():
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        return "no /dev/fuse or fusermount3"
    if not os.access(EXE, os.X_OK):
        return f"{EXE} not built"
    return None


def drop_caches(what):
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write(what)


class NullMount(unittest.TestCase):
    transport = "reactor"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fuse-null-test.")
        self.mnt = os.path.join(self.tmp, "m")
        os.mkdir(self.mnt)
        self.server = subprocess.Popen([EXE, self.mnt, "--transport", self.transport],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not os.path.ismount(self.mnt):
            if self.server.poll() is not None:
                self.fail(f"fuse-null exited {self.server.returncode}: {self.server.stderr.read()}")
            self.assertLess(time.monotonic(), deadline, "fuse-null did not mount in 10 s")
            time.sleep(0.02)

    def tearDown(self):
        if os.path.ismount(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        try:
            self.assertEqual(self.server.wait(timeout=10), 0, "fuse-null exits 0 at unmount")
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def p(self, *names):
        return os.path.join(self.mnt, *names)

    def test_names_sizes_and_links_as_a_filesystem(self):
        os.mkdir(self.p("d"))
        with open(self.p("d", "f"), "wb") as f:
            f.write(b"x" * 5000)
        self.assertEqual(os.stat(self.p("d", "f")).st_size, 5000)
        drop_caches("1")  # the written pages: reads reach the server
        with open(self.p("d", "f"), "rb") as f:
            self.assertEqual(f.read(), b"\0" * 5000)  # the server keeps no data: zeros up to the size
        os.truncate(self.p("d", "f"), 100)
        self.assertEqual(os.stat(self.p("d", "f")).st_size, 100)
        os.link(self.p("d", "f"), self.p("d", "g"))
        self.assertEqual(os.stat(self.p("d", "f")).st_nlink, 2)
        self.assertEqual(os.stat(self.p("d", "f")).st_ino, os.stat(self.p("d", "g")).st_ino)
        with open(self.p("d", "h"), "w"):
            pass
        os.rename(self.p("d", "h"), self.p("d", "f"))  # replaces f: g keeps the old inode alone
        self.assertEqual(os.stat(self.p("d", "g")).st_nlink, 1)
        self.assertEqual(os.stat(self.p("d", "f")).st_size, 0)
        os.symlink("f", self.p("d", "s"))
        self.assertEqual(os.readlink(self.p("d", "s")), "f")
        os.mkdir(self.p("d", "sub"))
        self.assertEqual(os.stat(self.p("d")).st_nlink, 3)
        self.assertEqual(sorted(os.listdir(self.p("d"))), ["f", "g", "s", "sub"])
        with self.assertRaises(OSError) as e:
            os.rmdir(self.p("d"))
        self.assertEqual(e.exception.errno, errno.ENOTEMPTY)
        with self.assertRaises(FileExistsError):
            os.open(self.p("d", "g"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        for name in ("f", "g", "s"):
            os.unlink(self.p("d", name))
        os.rmdir(self.p("d", "sub"))
        os.rmdir(self.p("d"))
        self.assertEqual(os.listdir(self.mnt), [])
        self.assertFalse(os.path.exists(self.p("d")))  # a negative entry, then the name is free
        os.mkdir(self.p("d"))
        self.assertTrue(os.path.isdir(self.p("d")))

    def test_a_tree_goes_in_with_tar_and_comes_back_out(self):
        src = os.path.join(self.tmp, "src")
        want = {}
        for i in range(300):  # more entries than one readdir reply holds
            d = os.path.join(src, f"dir{i % 7}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"file{i:03d}"), "wb") as f:
                f.write(b"y" * (i * 37))
            want[f"./dir{i % 7}/file{i:03d}"] = i * 37
        arc = os.path.join(self.tmp, "t.tar")
        subprocess.run(["tar", "-C", src, "-cf", arc, "."], check=True)
        subprocess.run(["tar", "-C", self.mnt, "-xf", arc], check=True)
        drop_caches("2")  # the kernel forgets the inodes: lookups again
        out = os.path.join(self.tmp, "out.tar")
        subprocess.run(["tar", "-C", self.mnt, "-cf", out, "."], check=True)
        with tarfile.open(out) as t:
            got = {m.name: m.size for m in t.getmembers() if m.isfile()}
        self.assertEqual(got, want)


class NullMountDev(NullMount):
    transport = "dev"


class NullArgs(unittest.TestCase):
    def test_bad_arguments_and_mount_points_are_one_line(self):
        if not os.access(EXE, os.X_OK):
            self.skipTest(f"{EXE} not built")
        p = subprocess.run([EXE, "/nonexistent", "--transport", "smoke"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        if os.geteuid() == 0 and os.path.exists("/dev/fuse"):
            p = subprocess.run([EXE, "/nonexistent/dir"], capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 1)
            self.assertIn("/nonexistent/dir", p.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    run_tests(sys.modules[__name__], "NullMount", need_mount)
