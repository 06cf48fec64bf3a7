"""What the tools tests share: where the repository, its tools and the built binaries are, and
loading a tool script (no .py suffix) as a module."""
import importlib.machinery
import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")
BIN = os.environ.get("BIOFS_BIN_DIR", os.path.join(REPO, "build", "bin"))


def build_has_fuse_ring():
    """Whether the build's libfuse carries the ring patches (CMakeLists.txt); without them the
    daemon has no FUSE-over-io_uring transport."""
    try:
        with open(os.path.join(os.path.dirname(BIN), "CMakeCache.txt")) as f:
            return "BIOFS_FUSE_RING_PATCHES:INTERNAL=1" in f.read()
    except OSError:
        return True  # a build elsewhere: assume the usual one


def load_tool(name):
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), os.path.join(TOOLS, name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
