"""What the tools tests share: where the repository, its tools and the built binaries are, and
loading a tool script (no .py suffix) as a module."""
import importlib.machinery
import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")
BIN = os.environ.get("BIOFS_BIN_DIR", os.path.join(REPO, "build", "bin"))


def load_tool(name):
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), os.path.join(TOOLS, name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def run_tests(module, special_class, why_skip):
    """A test script's main: runs the cases named on the command line (all without any), and
    exits 77 (ctest: skipped) when one of them is of a class starting with `special_class`
    and why_skip() names something missing (root, /dev/fuse, a built binary...)."""
    import sys
    import unittest
    names = sys.argv[1:]
    if not names or any(n.startswith(special_class) for n in names):
        why = why_skip()
        if why:
            print(f"skipped: {why}")
            sys.exit(77)
    loader = unittest.defaultTestLoader
    suite = loader.loadTestsFromNames(names, module) if names else loader.loadTestsFromModule(module)
    sys.exit(0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1)
