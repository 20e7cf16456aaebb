#!/usr/bin/python3
"""Old build against new build, in the same run: bench_start_latency (cold
and warm) and bench_cap_roundtrip (sequential and pipelined broker figures),
each binary run in turn, old and new alternating, so that drift in the
machine's load hits both alike. Prints the median of each figure over the
rounds, new / old, and whether it is within the tolerance.

  bench/compare_builds.py OLD_BUILD_DIR NEW_BUILD_DIR [--rounds 5]
        [--start-runs 100] [--cap-calls 5000] [--tolerance 0.10]

A build directory is a configured release tree (its bench/ holds the two
binaries), e.g. a worktree of the old commit built with
`cmake --build --preset release --target bench_start_latency bench_cap_roundtrip`.
Exit status 1 when a figure is worse than the tolerance.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import subprocess
import sys

# (name, which binary, regular expression on its output, higher is better)
FIGURES = [
    ("start cold: provision+execute+destroy, median ms", "start",
     re.compile(r"provision\+execute\+destroy /bin/true\s+([\d.]+) /"), False),
    ("start warm: execute in a ready sandbox, median ms", "start",
     re.compile(r"execute /bin/true in a ready sandbox\s+([\d.]+) /"), False),
    ("cap round trip, sequential broker median us", "cap",
     re.compile(r"^\s+broker\s+([\d.]+)\s", re.M), False),
    ("cap calls/s pipelined, broker at the largest K", "cap",
     re.compile(r"^\s+\d+\s+\d+\s+\d+\s+(\d+)\s+[\d.]+x", re.M), True),
]


def run(binary: pathlib.Path, args: list[str]) -> str:
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{binary} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout


def figures(output: str, which: str) -> dict[str, float]:
    out = {}
    for name, source, pattern, _ in FIGURES:
        if source != which:
            continue
        found = pattern.findall(output)
        if not found:
            sys.exit(f"no '{name}' in the output of the {which} benchmark:\n{output}")
        out[name] = float(found[-1])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", type=pathlib.Path)
    p.add_argument("new", type=pathlib.Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--start-runs", type=int, default=100)
    p.add_argument("--cap-calls", type=int, default=5000)
    p.add_argument("--tolerance", type=float, default=0.10)
    a = p.parse_args()

    samples: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for r in range(a.rounds):
        for label, build in (("old", a.old), ("new", a.new)) if r % 2 == 0 else (("new", a.new), ("old", a.old)):
            got = figures(run(build / "bench/bench_start_latency", [str(a.start_runs)]), "start")
            got |= figures(run(build / "bench/bench_cap_roundtrip",
                               [str(a.cap_calls), str(a.cap_calls), "3"]), "cap")
            for name, value in got.items():
                samples[label].setdefault(name, []).append(value)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)

    worse = 0
    print(f"old {a.old}\nnew {a.new}\n{a.rounds} rounds, old and new alternating; median of the rounds\n")
    print(f"  {'figure':50} {'old':>10} {'new':>10} {'new/old':>8}  verdict")
    for name, _, _, higher_better in FIGURES:
        old = statistics.median(samples["old"][name])
        new = statistics.median(samples["new"][name])
        ratio = new / old
        slower = (1 / ratio) if higher_better else ratio
        ok = slower <= 1 + a.tolerance
        worse += not ok
        print(f"  {name:50} {old:10.2f} {new:10.2f} {ratio:7.3f}x  "
              f"{'within' if ok else 'OVER'} {a.tolerance:.0%}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
