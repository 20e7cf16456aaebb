#!/usr/bin/python3
"""Load test of `airlock serve`: concurrent provision / execute / destroy
cycles through the HTTP API, with the Python client (sdk/python).

Each cycle provisions an environment, executes one command in it (checked:
exit code 0 and stdout "1\\n"), and destroys it. The run fails (exit status
1) when any request failed, when a result was wrong, or when GET
/v1/environments is not empty afterwards; with a spawned service also when
it does not exit cleanly or leaves cgroups of its own behind. It prints
throughput and p50/p99 latency per operation.

Two ways to point it at a service:

  # a service that is already running
  bench/load_test.py --url http://127.0.0.1:8420 --token-file /run/airlock/service-token

  # start `airlock serve` (own temporary state dir, 127.0.0.1 port 0) with a
  # mechanism, and optionally a peer mechanism measured in the same run,
  # the two alternating round by round
  bench/load_test.py --binary build/release/airlock --sandbox linux --peer fake

The command defaults to `python3 -c 'print(1)'`, and to `echo 1` on the
fake mechanism (which runs nothing but a few scripted commands).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import shlex
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "sdk" / "python"))

from airlock_client import AirlockClient, AirlockError  # noqa: E402
from airlock_client.testing import ServeProcess, default_binary  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from serve_checks import cgroup_leftovers, percentile  # noqa: E402

OPERATIONS = ("provision", "execute", "destroy", "cycle")


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: dict[str, list[float]] = {op: [] for op in OPERATIONS}
        self.failures: list[str] = []
        self.wall_seconds = 0.0
        self.cycles = 0

    def add(self, op: str, seconds: float) -> None:
        with self.lock:
            self.latencies[op].append(seconds)

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)

    def merge(self, other: "Stats") -> None:
        for op in OPERATIONS:
            self.latencies[op].extend(other.latencies[op])
        self.failures.extend(other.failures)
        self.wall_seconds += other.wall_seconds
        self.cycles += other.cycles

    def summary(self) -> dict:
        out = {
            "cycles": self.cycles,
            "failures": len(self.failures),
            "wall_seconds": round(self.wall_seconds, 3),
            "cycles_per_second": round(self.cycles / self.wall_seconds, 2) if self.wall_seconds else 0.0,
        }
        for op in OPERATIONS:
            values = self.latencies[op]
            if values:
                out[op] = {
                    "count": len(values),
                    "p50_ms": round(percentile(values, 50) * 1000, 2),
                    "p99_ms": round(percentile(values, 99) * 1000, 2),
                    "max_ms": round(max(values) * 1000, 2),
                }
        return out


def one_cycle(client: AirlockClient, argv: list[str], expected_stdout: bytes, tenant: str, stats: Stats) -> None:
    run_id = "load-" + uuid.uuid4().hex[:16]
    cycle_start = time.perf_counter()
    env_id = None
    ok = True
    try:
        t = time.perf_counter()
        handle = client.provision(tenant, run_id)
        stats.add("provision", time.perf_counter() - t)
        env_id = handle.environment_id

        t = time.perf_counter()
        result = client.execute(env_id, argv, timeout_seconds=60)
        stats.add("execute", time.perf_counter() - t)
        if result.exit_code != 0 or result.stdout != expected_stdout:
            ok = False
            stats.fail(
                f"execute in {env_id}: exit_code={result.exit_code} killed_by={result.killed_by} "
                f"duration_ms={result.duration_ms} cpu_time_ms={result.cpu_time_ms} "
                f"peak_memory_bytes={result.peak_memory_bytes} "
                f"stdout={result.stdout[:200]!r} stderr={result.stderr[:200]!r}"
            )
    except AirlockError as e:
        ok = False
        stats.fail(f"{run_id}: {type(e).__name__}: {e}")
    finally:
        if env_id is not None:
            try:
                t = time.perf_counter()
                client.destroy(env_id)
                stats.add("destroy", time.perf_counter() - t)
            except AirlockError as e:
                ok = False
                stats.fail(f"destroy {env_id}: {type(e).__name__}: {e}")
    if ok:
        stats.add("cycle", time.perf_counter() - cycle_start)


def run_load(client: AirlockClient, cycles: int, concurrency: int, argv: list[str], expected: bytes) -> Stats:
    stats = Stats()
    stats.cycles = cycles
    tenant = "load-test"
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(one_cycle, client, argv, expected, tenant, stats) for _ in range(cycles)]
        for f in concurrent.futures.as_completed(futures):
            f.result()  # one_cycle catches AirlockError; anything else is a bug here
    stats.wall_seconds = time.perf_counter() - start
    return stats


def per_round_counts(cycles: int, rounds: int) -> list[int]:
    return [cycles // rounds + (1 if r < cycles % rounds else 0) for r in range(rounds)]


class Target:
    """One service under load: spawned (with a mechanism) or given by URL."""

    def __init__(self, name: str, client: AirlockClient, argv: list[str], serve: ServeProcess | None = None):
        self.name = name
        self.client = client
        self.argv = argv
        self.serve = serve
        self.stats = Stats()

    def finish(self) -> list[str]:
        """Post-run checks; returns the problems found."""
        problems = []
        try:
            left = self.client.list_environments()
            if left:
                problems.append(f"{self.name}: {len(left)} environments still live after the run")
        except AirlockError as e:
            problems.append(f"{self.name}: GET /v1/environments failed: {e}")
        if self.serve is not None:
            state_dir = self.serve.state_dir
            if self.stats.failures or problems:
                # Keep the service's log (it goes with the state directory).
                fd, path = tempfile.mkstemp(prefix=f"airlock-load-{self.name.split()[0]}-", suffix=".log")
                with os.fdopen(fd, "w") as f:
                    f.write(self.serve.log() + "\n")
                problems.append(f"{self.name}: the service's log is in {path}")
            status = self.serve.stop()
            if status != 0:
                problems.append(f"{self.name}: airlock serve exited with {status}")
            cgroups = cgroup_leftovers(state_dir)
            if cgroups:
                problems.append(f"{self.name}: cgroups left behind: {cgroups}")
        return problems


def default_argv(mechanism: str | None) -> list[str]:
    return ["echo", "1"] if mechanism == "fake" else ["python3", "-c", "print(1)"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cycles", type=int, default=200, help="total cycles per target (default 200)")
    p.add_argument("--concurrency", type=int, default=16, help="cycles in flight at once (default 16)")
    p.add_argument("--rounds", type=int, default=1, help="split the cycles into rounds, alternating targets")
    p.add_argument("--url", help="an already running service")
    p.add_argument("--token", help="its bearer token (else --token-file, AIRLOCK_SERVICE_TOKEN, ...)")
    p.add_argument("--token-file", help="a file holding the token")
    p.add_argument("--binary", default=None, help="airlock binary to spawn (default $AIRLOCK_BINARY)")
    p.add_argument("--sandbox", help="spawn `airlock serve` with this mechanism (fake, linux, ...)")
    p.add_argument("--peer", help="also spawn a service with this mechanism and measure it in the same run")
    p.add_argument("--command", help="the command, shell-quoted (default: python3 -c 'print(1)'; echo 1 on fake)")
    p.add_argument("--expect", default="1\n", help="expected stdout (default '1\\n')")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args()

    if (args.url is None) == (args.sandbox is None):
        p.error("give either --url or --sandbox")
    if args.cycles < 1 or args.concurrency < 1 or args.rounds < 1 or args.rounds > args.cycles:
        p.error("--cycles, --concurrency and --rounds must be positive, rounds <= cycles")

    targets: list[Target] = []
    try:
        if args.url:
            client = AirlockClient(args.url, token=args.token, token_file=args.token_file)
            argv = shlex.split(args.command) if args.command else default_argv(None)
            targets.append(Target(args.url, client, argv))
        else:
            binary = args.binary or default_binary()
            for i, mechanism in enumerate([args.sandbox] + ([args.peer] if args.peer else [])):
                serve = ServeProcess(binary, sandbox=mechanism)
                argv = shlex.split(args.command) if args.command else default_argv(mechanism)
                name = mechanism if i == 0 or mechanism != args.sandbox else f"{mechanism} (peer)"
                targets.append(Target(name, serve.client(), argv, serve))

        expected = args.expect.encode()
        warm_failed = False
        for t in targets:  # warm-up: one cycle each, not counted
            warm = Stats()
            one_cycle(t.client, t.argv, expected, "load-warmup", warm)
            if warm.failures:
                t.stats.failures += [f"warm-up: {f}" for f in warm.failures]
                warm_failed = True

        per_round = [] if warm_failed else per_round_counts(args.cycles, args.rounds)
        for r, n in enumerate(per_round):
            order = targets if r % 2 == 0 else list(reversed(targets))
            for t in order:
                t.stats.merge(run_load(t.client, n, args.concurrency, t.argv, expected))
    finally:
        problems = []
        for t in targets:
            problems += t.finish()

    summaries = {t.name: t.stats.summary() for t in targets}
    failures = [f for t in targets for f in t.stats.failures]
    if args.json:
        print(json.dumps({"concurrency": args.concurrency, "rounds": args.rounds, "targets": summaries}, indent=2))
    else:
        print(f"cycles per target: {args.cycles}, concurrency {args.concurrency}, rounds {args.rounds}")
        for t in targets:
            s = summaries[t.name]
            print(f"\n[{t.name}] argv={t.argv}")
            print(f"  {s['cycles']} cycles in {s['wall_seconds']:.2f} s: {s['cycles_per_second']:.1f} cycles/s, "
                  f"{s['failures']} failures")
            print(f"  {'operation':<10} {'count':>6} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
            for op in OPERATIONS:
                if op in s:
                    o = s[op]
                    print(f"  {op:<10} {o['count']:>6} {o['p50_ms']:>9.2f} {o['p99_ms']:>9.2f} {o['max_ms']:>9.2f}")
        if len(targets) == 2:
            a, b = (summaries[t.name] for t in targets)
            print(f"\nratios {targets[0].name} / {targets[1].name}:")
            if b["cycles_per_second"]:
                print(f"  throughput {a['cycles_per_second'] / b['cycles_per_second']:.3f}x")
            for op in OPERATIONS:
                if op in a and op in b and b[op]["p50_ms"]:
                    print(f"  {op:<10} p50 {a[op]['p50_ms'] / b[op]['p50_ms']:.2f}x   "
                          f"p99 {a[op]['p99_ms'] / b[op]['p99_ms']:.2f}x")
    for f in failures[:20]:
        print(f"FAILED: {f}", file=sys.stderr)
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    if failures or problems:
        print(f"load test FAILED: {len(failures)} failed cycles, {len(problems)} problems", file=sys.stderr)
        return 1
    print("\nno request failed; no environment left; clean exit" + (" and no cgroup left" if args.sandbox else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
