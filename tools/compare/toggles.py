"""The toggles and their default A/B pairs, as `biofs --list-toggles` lists them."""
import os
import subprocess


def parse_toggle_list(text):
    """`biofs --list-toggles` (daemon/daemon_switches.h): name -> (A, B, kind), kind block or daemon."""
    pairs = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 5 and f[4] in ("block", "daemon"):
            pairs[f[0]] = (f[2], f[3], f[4])
    return pairs


def toggle_pairs(bin_dir):
    """The A/B pairs the binary in bin_dir knows; {} when it cannot be run."""
    try:
        p = subprocess.run([os.path.join(bin_dir, "biofs"), "--list-toggles"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_toggle_list(p.stdout) if p.returncode == 0 else {}
