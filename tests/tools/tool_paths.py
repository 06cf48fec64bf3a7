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
