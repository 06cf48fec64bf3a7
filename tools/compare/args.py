"""biofs-compare's command line: the options, their checks, and the settings derived from them."""
import argparse
import os
import shutil
import sys

from biofs_tools import MIN_PAIRS_95, PASSTHROUGH_HP_DEFAULT, REPO, parse_size

from .fio import CPU_LIST
from .toggles import toggle_pairs

PATTERNS = ("randread", "randwrite", "read", "write")
LAYERS = ("raw", "ext4", "bench", "nvme", "hp", "hp_uring")


def parser(doc):
    """The options; doc (the tool's docstring) gives the description (its first line) and the
    epilog (what follows its usage block)."""
    doc = doc.split("\n")
    p = argparse.ArgumentParser(prog="biofs-compare", description=doc[0],
                                epilog="\n".join(doc[doc.index("") + 1 + doc[doc.index("") + 1:].index("") + 1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--toggle", default="bio_cache",
                   help="NAME[=A,B] (default bio_cache=off,on): a mount option, or dev.NAME for an option of "
                        "the device string (dev.inline=off,on)")
    p.add_argument("--device", help="device string for biofs (default: emu:IMAGE; ram:SIZE: the RAM disk, "
                                    "where the block core is a larger share of each I/O)")
    p.add_argument("--image", default="/tmp/biofs-compare.img")
    p.add_argument("--image-size", default="4G")
    p.add_argument("--engines", default="sync,libaio,io_uring")
    p.add_argument("--numjobs", default="1", help="e.g. 1,2")
    p.add_argument("--qdepths", default="1,64")
    p.add_argument("--patterns", default="randread,randwrite,read,write")
    p.add_argument("--bs", default="4k")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--layer-repeats", type=int)
    p.add_argument("--runtime", type=int, default=5)
    p.add_argument("--ramp", type=int, default=0)
    p.add_argument("--file-size", default="256M", help="per job")
    p.add_argument("--buffered", action="store_true")
    p.add_argument("--mount-opts", default="")
    p.add_argument("--layers", default="raw,ext4,bench",
                   help="any of raw,ext4,bench,nvme,hp,hp_uring, or none (hp: libfuse's passthrough_hp "
                        "--nopassthrough over the ext4 layer's files, /dev/fuse; hp_uring: the same over io_uring)")
    p.add_argument("--hp", default=PASSTHROUGH_HP_DEFAULT, help="the passthrough_hp binary for --layers hp")
    p.add_argument("--instructions", action="store_true",
                   help="also count instructions per I/O for the same toggle and cells, in-process under "
                        "callgrind (tools/biofs-instructions: deterministic; no FUSE): instructions.csv")
    p.add_argument("--instr-devices", default="emu,null", help="devices for --instructions (emu, null, ram)")
    p.add_argument("--nvme", help="/dev/ngXnY: also fio's io_uring_cmd engine on it (its data is overwritten)")
    p.add_argument("--fio-cpus", metavar="LIST",
                   help="run fio's jobs on these CPUs, one each (e.g. 0, or 0-1 for two jobs): where fio runs "
                        "relative to the CPU taking the device's interrupts moves disk cells by 20-40%%")
    p.add_argument("--out", default="biofs-compare-out")
    p.add_argument("--resume", action="store_true", help="keep runs.jsonl and skip the runs it holds")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--bin", default=os.path.join(REPO, "build", "bin"))
    p.add_argument("--resolution", metavar="R%",
                   help="adaptive repeats: add pairs to a cell until the 95%% interval of its IOPS ratio "
                        "(and CPU-per-I/O ratio) has a half-width <= R percentage points, e.g. 0.5%%")
    p.add_argument("--max-repeats", type=int, default=20, help="with --resolution: pairs per cell at most (20)")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="with --resolution: wall time of the whole comparison, after which no pair is added")
    return p


def parse_args(argv, doc):
    """The settings of a comparison (argparse's namespace, with what follows from the options:
    values, bss, own_image, ram, device_bytes, medium); exits with a usage error where they do
    not hold together or a tool or binary is missing."""
    p = parser(doc)
    a = p.parse_args(argv)
    if a.resolution is not None:
        try:
            a.resolution = float(a.resolution.rstrip("%"))
        except ValueError:
            p.error(f"--resolution {a.resolution}: a percentage, e.g. 0.5%")
        if a.resolution <= 0:
            p.error("--resolution: must be > 0")
    elif a.budget is not None:
        p.error("--budget needs --resolution")
    if a.max_repeats < a.repeats:
        a.max_repeats = a.repeats
    if a.quick:
        a.engines, a.numjobs, a.qdepths, a.patterns, a.bs = "io_uring", "1", "1,64", "randread,randwrite", "4k"
        a.repeats, a.runtime, a.file_size = MIN_PAIRS_95, 2, "128M"  # 5 pairs: a 95% verdict
        a.layer_repeats = a.layer_repeats or 1
        if a.layers == "raw,ext4,bench":
            a.layers = "raw,bench"
        if a.image_size == "4G":
            a.image_size = "1G"
    name, _, vals = a.toggle.partition("=")
    pairs = toggle_pairs(a.bin)
    if vals:
        a.values = tuple(vals.split(","))
    elif name in pairs:
        a.values = pairs[name][:2]
    else:
        known = ", ".join(pairs) or f"none: {a.bin}/biofs --list-toggles did not run"
        p.error(f"--toggle {name}: give the two values, e.g. {name}=A,B (toggles with a default pair: {known})")
    if len(a.values) != 2:
        p.error(f"--toggle {a.toggle}: expected two values")
    a.toggle = name
    a.engines = a.engines.split(",")
    a.numjobs = [int(x) for x in a.numjobs.split(",")]
    a.qdepths = [int(x) for x in a.qdepths.split(",")]
    a.patterns = a.patterns.split(",")
    a.bss = a.bs.split(",")
    for pat in a.patterns:
        if pat not in PATTERNS:
            p.error(f"--patterns: unknown pattern '{pat}'")
    if a.fio_cpus is not None and not CPU_LIST.match(a.fio_cpus):
        p.error(f"--fio-cpus {a.fio_cpus}: a CPU list such as 0, 1,3 or 0-1")
    a.layers = [] if a.layers in ("", "none") else a.layers.split(",")
    if a.nvme and "nvme" not in a.layers:
        a.layers.append("nvme")
    for layer in a.layers:
        if layer not in LAYERS:
            p.error(f"--layers: unknown layer '{layer}'")
    if {"hp", "hp_uring"} & set(a.layers) and not (a.hp and os.access(a.hp, os.X_OK)):
        p.error(f"--layers hp: no passthrough_hp at '{a.hp}' (tools/build-libfuse.sh installs it; or --hp PATH)")
    block_toggle = pairs.get(a.toggle, ("", "", ""))[2] == "block"
    if "bench" in a.layers and not block_toggle:
        # biofs-bench runs the block layer in-process, without FUSE: a mount option has no meaning there
        a.layers.remove("bench")
        print(f"biofs-compare: no bench layer for {a.toggle} (biofs-bench flips only the block-layer toggles)",
              file=sys.stderr)
    if a.instructions and not block_toggle:
        p.error("--instructions: only the block-layer toggles (bio_cache, tag_batch, split_check) run in-process")
    if "nvme" in a.layers and not a.nvme:
        p.error("--layers nvme needs --nvme /dev/ngXnY")
    a.layer_repeats = a.layer_repeats or a.repeats
    # The image is ours to create and format when no device is named, or when the device is the
    # emulated namespace over --image itself (emu:IMAGE,vwc: the image with device options).
    a.own_image = not a.device or a.device.split(",", 1)[0] == f"emu:{a.image}"
    a.device = a.device or f"emu:{a.image}"
    a.ram = a.device.startswith("ram:")  # the daemon formats it at mount; nothing to mkfs
    a.device_bytes = parse_size(a.device[4:]) if a.ram else parse_size(a.image_size)
    m = a.device.split(":", 1)[0] if ":" in a.device else "emu"
    a.medium = m if m in ("emu", "nvme", "null", "ram") else "emu"
    if max(a.numjobs) * parse_size(a.file_size) > a.device_bytes * 0.8:
        p.error(f"--file-size {a.file_size} x numjobs {max(a.numjobs)} does not fit in {a.image_size}")
    for tool in ("fio", "fusermount3"):
        if not shutil.which(tool):
            p.error(f"{tool} not found (tools/install-deps.sh installs it)")
    for b in ("biofs", "mkfs.biofs") + (("biofs-bench",) if "bench" in a.layers else ()):
        if not os.access(os.path.join(a.bin, b), os.X_OK):
            p.error(f"{os.path.join(a.bin, b)} not found: build it, or give --bin")
    return a
