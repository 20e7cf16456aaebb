"""Helpers shared by the service benchmarks (bench/load_test.py,
bench/soak.py): a percentile, and what a spawned `airlock serve` may leave
behind on the host once it has stopped (cgroups named after its sandboxes,
mounts under its state directory)."""

from __future__ import annotations

import os
import re


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil
    return ordered[int(rank) - 1]


def cgroup_prefix(state_dir: str) -> str:
    """The linux mechanism's cgroup name prefix for a state directory
    (cgroupNamePrefix in src/airlock/sandbox/linux/linux_environment.cpp)."""
    h = 2166136261
    for c in state_dir.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return f"airlock-{h:08x}-"


def cgroup_leftovers(state_dir: str, root: str = "/sys/fs/cgroup", depth: int = 3) -> list[str]:
    """Cgroups (v2, or under any v1 controller) named after the sandboxes of
    the service with this state directory."""
    prefix = cgroup_prefix(state_dir)
    found = []

    def walk(path: str, level: int) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name.startswith(prefix):
                    found.append(e.path)
                elif level < depth:
                    walk(e.path, level + 1)

    walk(root, 0)
    return found


def mount_leftovers(state_dir: str, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points at or under the state directory, as this process's
    mount namespace (the one the service was started in) sees them."""
    base = os.fsencode(os.path.realpath(state_dir)).rstrip(b"/")
    found = []
    with open(mountinfo, "rb") as f:
        for line in f:
            fields = line.split(b" ")
            if len(fields) < 5:
                continue
            # Field 5 is the mount point, with space, tab, newline and
            # backslash written as octal escapes (\040).
            point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4])
            if point == base or point.startswith(base + b"/"):
                found.append(os.fsdecode(point))
    return found
