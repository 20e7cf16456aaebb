#!/usr/bin/python3
"""Soak test of `airlock serve`: many provision / execute / destroy cycles
against a service it starts itself, with a mix of outcomes, every one
checked, and at the end a check that nothing is left and that the service
did not grow.

  bench/soak.py --binary build/release/airlock --sandbox linux            # 10000 cycles
  bench/soak.py --binary build/release/airlock --cycles 400 --seed 7

The service gets its own temporary state directory and listens on
127.0.0.1 port 0 (airlock_client.testing.ServeProcess). Each cycle
provisions an environment (tenant "soak", a fresh run id), does one kind of
work in it, checks the outcome, and destroys it. The kind is drawn by a
random generator seeded with (--seed, cycle number), so a cycle does the
same thing whatever the concurrency (--first-cycle N --cycles 1 replays
cycle N alone); --kinds restricts the mix:

  normal        a command that exits 0; stdout and stderr checked
  exit_code     a command exiting 1..125; the code checked
  timeout       sleeps past a 1 s timeout: killed_by TIMEOUT, partial output kept
  memory        allocates 256 MiB under a 32 MiB limit: MEMORY, peak within the limit
  pids          a fork bomb under pids_max 16: PIDS
  output_limit  `yes | head` past a small maximum_output_bytes: OUTPUT_LIMIT
  disk          fills a 4 MiB workspace: DISK
  sigkill       a command SIGKILLs itself (exit 137) or its own child
  stream        ?stream=1 read normally: the NDJSON lines and the result line
  stream_slow   ?stream=1 of 3 MiB, read 16 KiB at a time for about a second
  stream_vanish ?stream=1, the client closes (FIN or RST) after the first line;
                the environment must take its next command promptly (the
                command was cancelled)
  code_job      POST /code: a program starts a job (job.start / job.wait; or
                job.kill) and returns its output and spill; the spilled
                artifacts are downloaded, compared by SHA-256, and deleted
  export        a command writes random bytes; POST /artifacts exports the
                file; the download must match the SHA-256 the command printed

After each kill, the environment must still run a command. Cycles run in
batches of --sample-every; between batches (nothing in flight) the script
checks that no environment is live, that the service has no child process,
no cgroup of its sandboxes and no mount under its state directory, and
samples the service's RSS (VmRSS), open fds and threads. At the end
GET /v1/environments must be empty, the service must exit 0 on SIGTERM,
nothing of it may remain on the host, and the last sample must not exceed
the first sample after --warmup cycles by more than the tolerances below.

Exit status 1 when any check failed; every failure is listed.
"""

from __future__ import annotations

import argparse
import base64
import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import pathlib
import random
import socket
import struct
import sys
import tempfile
import threading
import time
from typing import Callable, Optional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "sdk" / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from airlock_client import AirlockClient, AirlockError, ExecutionRejectedError, NotFoundError  # noqa: E402
from airlock_client.models import ExecutionResult  # noqa: E402
from airlock_client.testing import ServeProcess, default_binary  # noqa: E402
from serve_checks import cgroup_leftovers, mount_leftovers, percentile  # noqa: E402

TENANT = "soak"

# Flatness tolerances, last sample against the first sample after warm-up.
# Samples are taken with nothing in flight, so the fd count should be
# exactly the same at every sample; the slack is for descriptors opened
# lazily once (SQLite's WAL and shm handles, a log, a new listening socket
# for a pool) and not for anything that grows with the cycles: a leak of one
# fd per few hundred cycles passes +16 in a full run.
FD_TOLERANCE = 16
# RSS moves without a leak: glibc grows malloc arenas as threads of their
# own run executions, keeps freed pages, and SQLite's page cache fills as
# artifact rows come and go. That settles after warm-up at a few MiB; a leak
# of per-cycle state (a result, an output buffer, a stream queue) grows
# linearly with the cycles and passes +20 % over thousands of them.
RSS_TOLERANCE = 0.20

# How long a vanished stream's environment may stay busy before its next
# command is accepted (cancel, kill, reap; normally well under a second).
VANISH_PROMPT_SECONDS = 5.0

# Relative weights of the kinds in the mix (timeout and stream_slow cost a
# second each, so they are rarer).
WEIGHTS = {
    "normal": 16,
    "exit_code": 8,
    "timeout": 4,
    "memory": 6,
    "pids": 6,
    "output_limit": 6,
    "disk": 6,
    "sigkill": 8,
    "stream": 8,
    "stream_slow": 3,
    "stream_vanish": 7,
    "code_job": 8,
    "export": 8,
}


class CheckFailed(Exception):
    pass


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


def describe(r: ExecutionResult) -> str:
    return (
        f"exit_code={r.exit_code} killed_by={r.killed_by} timed_out={r.timed_out} "
        f"duration_ms={r.duration_ms} peak_memory_bytes={r.peak_memory_bytes} "
        f"stdout={r.stdout[:120]!r}{'...' if len(r.stdout) > 120 else ''} "
        f"stderr={r.stderr[:200]!r}{'...' if len(r.stderr) > 200 else ''}"
    )


def expect_result(r: ExecutionResult, what: str, exit_code: Optional[int], killed_by: Optional[str],
                  stdout: Optional[bytes] = None, stdout_prefix: Optional[bytes] = None,
                  stderr: Optional[bytes] = None) -> None:
    ok = r.exit_code == exit_code and r.killed_by == killed_by and r.timed_out == (killed_by == "TIMEOUT")
    if stdout is not None:
        ok = ok and r.stdout == stdout
    if stdout_prefix is not None:
        ok = ok and r.stdout.startswith(stdout_prefix)
    if stderr is not None:
        ok = ok and r.stderr == stderr
    want = f"exit_code={exit_code} killed_by={killed_by}"
    if stdout is not None:
        want += f" stdout={stdout[:60]!r}"
    if stdout_prefix is not None:
        want += f" stdout starting {stdout_prefix!r}"
    if stderr is not None:
        want += f" stderr={stderr[:60]!r}"
    expect(ok, f"{what}: expected {want}; got {describe(r)}")


# --- streaming execute over a raw socket -----------------------------------


class StreamClient:
    """One POST /v1/environments/{environment_id}/execute?stream=1 over its own socket,
    read by hand (HTTP/1.1 chunked, NDJSON lines) so that the script decides
    how fast it reads and when the socket goes away."""

    def __init__(self, port: int, token: str, environment_id: str, body: dict, timeout: float = 120.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        payload = json.dumps(body).encode()
        head = (
            f"POST /v1/environments/{environment_id}/execute?stream=1 HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        self.sock.sendall(head.encode() + payload)
        self.buf = bytearray()
        self.recv_size = 65536
        self.slow_until = 0.0  # while time.monotonic() is before it, pause after each read
        self.slow_pause = 0.0
        self.reads = 0
        self.status, self.headers = self._read_head()
        self._body = bytearray()
        self._ended = False

    def _fill(self) -> None:
        data = self.sock.recv(self.recv_size)
        if not data:
            raise CheckFailed(f"stream: the connection closed early ({len(self.buf)} bytes unparsed)")
        self.reads += 1
        self.buf += data
        if time.monotonic() < self.slow_until:
            time.sleep(self.slow_pause)

    def _until(self, sep: bytes) -> bytes:
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[: i + len(sep)]
                return out
            self._fill()

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _read_head(self) -> tuple[int, dict[str, str]]:
        lines = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def error_body(self) -> bytes:
        """The body of a non-streamed answer (a refusal before the command)."""
        return self._exactly(int(self.headers.get("content-length", "0")))

    def lines(self):
        """The NDJSON lines, parsed, as they arrive."""
        expect(self.status == 200, f"stream: HTTP {self.status}: {self.error_body()[:300]!r}")
        expect(self.headers.get("transfer-encoding", "").lower() == "chunked",
               f"stream: not chunked: {self.headers}")
        while not self._ended:
            size = int(self._until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                while self._until(b"\r\n"):  # trailers, then the empty line
                    pass
                self._ended = True
            else:
                self._body += self._exactly(size)
                expect(self._exactly(2) == b"\r\n", "stream: a chunk does not end in CRLF")
            while True:
                i = self._body.find(b"\n")
                if i < 0:
                    break
                line = bytes(self._body[:i])
                del self._body[: i + 1]
                yield json.loads(line)
        expect(not self._body, f"stream: the body ends in a partial line {bytes(self._body[:100])!r}")

    def vanish(self, reset: bool) -> None:
        """Goes away: a RST (SO_LINGER 0) or an orderly FIN."""
        if reset:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def close(self) -> None:
        self.sock.close()


def read_stream(sc: StreamClient) -> tuple[bytes, bytes, ExecutionResult]:
    """Reads a stream to its end: (stdout, stderr) as streamed, and the result line."""
    out, err = bytearray(), bytearray()
    result = None
    for line in sc.lines():
        expect(result is None, f"stream: a line after the result line: {str(line)[:200]}")
        if "stream" in line:
            data = line["data"]
            chunk = data.encode() if isinstance(data, str) else base64.b64decode(data["base64"])
            (out if line["stream"] == "stdout" else err).extend(chunk)
        elif "result" in line:
            result = ExecutionResult.from_json(line["result"])
        else:
            raise CheckFailed(f"stream: an unexpected line: {str(line)[:300]}")
    expect(result is not None, "stream: no result line")
    return bytes(out), bytes(err), result


# --- the cycles --------------------------------------------------------------


@dataclasses.dataclass
class Context:
    client: AirlockClient
    port: int
    token: str
    vanish_waits: list[float] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


def still_usable(ctx: Context, env_id: str, after: str) -> None:
    r = ctx.client.execute(env_id, ["echo", "still-usable"], timeout_seconds=30)
    expect_result(r, f"the next command after {after}", 0, None, stdout=b"still-usable\n")


def cycle_normal(ctx: Context, env_id: str, rng: random.Random) -> None:
    token = f"{rng.getrandbits(48):012x}"
    if rng.random() < 0.5:
        r = ctx.client.execute(env_id, ["sh", "-c", f"echo out-{token}; echo err-{token} >&2"], timeout_seconds=30)
        expect_result(r, "sh", 0, None, stdout=f"out-{token}\n".encode(), stderr=f"err-{token}\n".encode())
    else:
        r = ctx.client.execute(env_id, ["python3", "-c", f"print('out-{token}')"], timeout_seconds=30)
        expect_result(r, "python3", 0, None, stdout=f"out-{token}\n".encode(), stderr=b"")


def cycle_exit_code(ctx: Context, env_id: str, rng: random.Random) -> None:
    code = rng.randint(1, 125)
    r = ctx.client.execute(env_id, ["sh", "-c", f"echo out; exit {code}"], timeout_seconds=30)
    expect_result(r, f"exit {code}", code, None, stdout=b"out\n")


def cycle_timeout(ctx: Context, env_id: str, rng: random.Random) -> None:
    r = ctx.client.execute(env_id, ["sh", "-c", "echo partial; exec sleep 30"], timeout_seconds=1)
    expect_result(r, "sleep past a 1 s timeout", None, "TIMEOUT", stdout=b"partial\n")
    expect(r.duration_ms < 10_000, f"a 1 s timeout took {r.duration_ms} ms")
    still_usable(ctx, env_id, "TIMEOUT")


MEMORY_LIMIT = 32 << 20


def cycle_memory(ctx: Context, env_id: str, rng: random.Random) -> None:
    program = "print('partial', flush=True); b = bytearray(256 << 20); b[::4096] = b'x' * len(b[::4096])"
    r = ctx.client.execute(env_id, ["python3", "-c", program], timeout_seconds=60)
    expect_result(r, "256 MiB under a 32 MiB limit", None, "MEMORY", stdout_prefix=b"partial\n")
    expect(r.peak_memory_bytes is None or r.peak_memory_bytes <= MEMORY_LIMIT,
           f"MEMORY: peak_memory_bytes {r.peak_memory_bytes} is over the limit {MEMORY_LIMIT}")
    still_usable(ctx, env_id, "MEMORY")


def cycle_pids(ctx: Context, env_id: str, rng: random.Random) -> None:
    r = ctx.client.execute(env_id, ["sh", "-c", "echo partial; f(){ f | f & }; f"], timeout_seconds=60)
    expect_result(r, "a fork bomb under pids_max 16", None, "PIDS", stdout_prefix=b"partial\n")
    still_usable(ctx, env_id, "PIDS")


def cycle_output_limit(ctx: Context, env_id: str, rng: random.Random) -> None:
    cap = rng.choice([1024, 4096, 65536])
    r = ctx.client.execute(env_id, ["sh", "-c", "yes | head -c 100000000"], timeout_seconds=60,
                           maximum_output_bytes=cap)
    expect_result(r, f"yes | head past maximum_output_bytes {cap}", None, "OUTPUT_LIMIT")
    expect(len(r.stdout) + len(r.stderr) <= cap,
           f"OUTPUT_LIMIT: {len(r.stdout)} + {len(r.stderr)} bytes kept, over the cap {cap}")
    expect(r.stdout == b"y\n" * (len(r.stdout) // 2) + (b"y" if len(r.stdout) % 2 else b""),
           f"OUTPUT_LIMIT: stdout is not the start of yes's output: {r.stdout[:60]!r}")
    still_usable(ctx, env_id, "OUTPUT_LIMIT")


def cycle_disk(ctx: Context, env_id: str, rng: random.Random) -> None:
    r = ctx.client.execute(env_id, ["sh", "-c", "echo partial; yes > filler; exec sleep 30"], timeout_seconds=60)
    expect_result(r, "filling a 4 MiB workspace", None, "DISK", stdout_prefix=b"partial\n")
    still_usable(ctx, env_id, "DISK")


def cycle_sigkill(ctx: Context, env_id: str, rng: random.Random) -> None:
    if rng.random() < 0.5:
        r = ctx.client.execute(env_id, ["sh", "-c", "echo before; kill -9 $$; echo after"], timeout_seconds=30)
        # Killed by a signal of its own, not by the service: no kill reason,
        # the shell convention 128 + 9.
        expect_result(r, "a shell that SIGKILLs itself", 137, None, stdout=b"before\n")
    else:
        r = ctx.client.execute(env_id, ["sh", "-c", "sleep 30 & kill -9 $!; wait $!; echo child=$?"],
                               timeout_seconds=30)
        expect_result(r, "a shell that SIGKILLs its child", 0, None, stdout=b"child=137\n")
    still_usable(ctx, env_id, "a SIGKILL")


def cycle_stream(ctx: Context, env_id: str, rng: random.Random) -> None:
    n = rng.randint(1, 50)
    script = f"i=0; while [ $i -lt {n} ]; do echo line$i; i=$((i+1)); done; echo err >&2"
    sc = StreamClient(ctx.port, ctx.token, env_id, {"argv": ["sh", "-c", script], "timeout_seconds": 30})
    try:
        out, err, result = read_stream(sc)
    finally:
        sc.close()
    expected = "".join(f"line{i}\n" for i in range(n)).encode()
    expect(out == expected and err == b"err\n", f"stream: streamed stdout {out[:80]!r} stderr {err[:80]!r}")
    expect_result(result, "stream result line", 0, None, stdout=expected, stderr=b"err\n")


SLOW_BYTES = 3 << 20


def cycle_stream_slow(ctx: Context, env_id: str, rng: random.Random) -> None:
    body = {
        "argv": ["sh", "-c", f"head -c {SLOW_BYTES} /dev/zero | tr '\\0' x; echo; echo done"],
        "timeout_seconds": 60,
        "maximum_output_bytes": 8 << 20,
    }
    sc = StreamClient(ctx.port, ctx.token, env_id, body)
    try:
        # About a second at 16 KiB per 20 ms (under 1 MB/s), then at full speed.
        sc.recv_size = 16 << 10
        sc.slow_pause = 0.02
        sc.slow_until = time.monotonic() + rng.uniform(0.5, 1.5)
        out, err, result = read_stream(sc)
    finally:
        sc.close()
    expected = b"x" * SLOW_BYTES + b"\ndone\n"
    expect(out == expected, f"slow stream: streamed {len(out)} bytes of stdout, expected {len(expected)}")
    expect(not result.stdout_truncated, "slow stream: stdout_truncated in the result")
    expect_result(result, "slow stream result line", 0, None, stdout=expected)


def cycle_stream_vanish(ctx: Context, env_id: str, rng: random.Random) -> None:
    reset = rng.random() < 0.5
    sc = StreamClient(ctx.port, ctx.token, env_id,
                      {"argv": ["sh", "-c", "echo started; exec sleep 600"], "timeout_seconds": 600})
    try:
        first = next(iter(sc.lines()), None)
        expect(first == {"stream": "stdout", "data": "started\n"}, f"vanish: first line {first}")
    finally:
        sc.vanish(reset)
    how = "RST" if reset else "FIN"
    # The command must have been cancelled: the environment takes the next
    # command (a 409 while the cancelled one is still being reaped).
    start = time.monotonic()
    while True:
        try:
            r = ctx.client.execute(env_id, ["echo", "next"], timeout_seconds=30)
            break
        except ExecutionRejectedError as e:
            waited = time.monotonic() - start
            if waited > VANISH_PROMPT_SECONDS:
                raise CheckFailed(f"vanish ({how}): the environment still refuses a command "
                                  f"{waited:.1f} s after the client went away: {e}") from None
            time.sleep(0.02)
    waited = time.monotonic() - start
    with ctx.lock:
        ctx.vanish_waits.append(waited)
    expect_result(r, f"the command after a vanished stream ({how})", 0, None, stdout=b"next\n")


JOB_EXIT_PROGRAM = """\
import airlock_cap as cap

def main():
    j = cap.job.start(["sh", "-c", "echo out-TOKEN; echo err-TOKEN >&2; exit CODE"])
    out = err = ""
    while True:
        s = cap.job.wait(j, timeout_ms=20000)
        out += s.stdout if isinstance(s.stdout, str) else s.stdout.decode()
        err += s.stderr if isinstance(s.stderr, str) else s.stderr.decode()
        if not s.pending:
            break
    return {"state": s.state, "exit_code": s.exit_code, "stdout": out, "stderr": err, "spill": spill(s)}
"""

JOB_KILL_PROGRAM = """\
import airlock_cap as cap

def main():
    j = cap.job.start(["sh", "-c", "echo out-TOKEN; exec sleep 600"])
    out = ""
    while "\\n" not in out:
        s = cap.job.wait(j, timeout_ms=20000)
        out += s.stdout if isinstance(s.stdout, str) else s.stdout.decode()
    cap.job.kill(j)
    while s.pending:
        s = cap.job.wait(j, timeout_ms=20000)
        out += s.stdout if isinstance(s.stdout, str) else s.stdout.decode()
    return {"state": s.state, "exit_code": s.exit_code, "stdout": out, "stderr": "", "spill": spill(s)}
"""

SPILL_HELPER = """
def spill(s):
    def one(x):
        return x if isinstance(x, str) else {"artifact_id": x.artifact_id, "sha256": x.sha256,
                                             "size_bytes": x.size_bytes, "truncated": x.truncated}
    return {"stdout": one(s.spill.stdout), "stderr": one(s.spill.stderr)}
"""


def cycle_code_job(ctx: Context, env_id: str, rng: random.Random) -> None:
    token = f"{rng.getrandbits(48):012x}"
    kill = rng.random() < 0.4
    if kill:
        program = JOB_KILL_PROGRAM.replace("TOKEN", token) + SPILL_HELPER
        want = {"state": "killed", "exit_code": None, "stdout": f"out-{token}\n", "stderr": ""}
    else:
        code = rng.randint(0, 100)
        program = JOB_EXIT_PROGRAM.replace("TOKEN", token).replace("CODE", str(code)) + SPILL_HELPER
        want = {"state": "exited", "exit_code": code, "stdout": f"out-{token}\n", "stderr": f"err-{token}\n"}
    done = ctx.client.run_code(env_id, program, capabilities=["job.*"], timeout_seconds=60)
    what = "code_job (job.kill)" if kill else "code_job"
    expect(done.completed, f"{what}: outcome {str(done.outcome)[:400]}; result {describe(done.result)}")
    expect_result(done.result, f"{what}: the program", 0, None)
    value = done.value
    got = {k: value.get(k) for k in want}
    expect(got == want, f"{what}: expected {want}, got {got}")
    for stream in ("stdout", "stderr"):
        spilled = value["spill"][stream]
        expect(isinstance(spilled, dict), f"{what}: {stream} was not spilled: {spilled!r}")
        data = want[stream].encode()
        expect(spilled["sha256"] == hashlib.sha256(data).hexdigest() and spilled["size_bytes"] == len(data),
               f"{what}: {stream} spill {spilled} is not of {data!r}")
        if not data:
            expect(spilled["artifact_id"] is None, f"{what}: an empty {stream} was stored: {spilled}")
            continue
        got_bytes = ctx.client.download_artifact(spilled["artifact_id"], TENANT)
        expect(hashlib.sha256(got_bytes).hexdigest() == spilled["sha256"],
               f"{what}: the {stream} spill downloads as {got_bytes[:80]!r}")
        ctx.client.delete_artifact(spilled["artifact_id"], TENANT)


def cycle_export(ctx: Context, env_id: str, rng: random.Random) -> None:
    size = rng.randint(1, 256 << 10)
    path = f"out/data-{rng.getrandbits(32):08x}.bin"
    r = ctx.client.execute(env_id, ["sh", "-c", f"mkdir -p out && head -c {size} /dev/urandom > {path} && "
                                    f"sha256sum {path}"], timeout_seconds=30)
    expect_result(r, "writing the file to export", 0, None)
    digest = r.stdout.split(b" ")[0].decode()
    expect(len(digest) == 64, f"export: sha256sum printed {r.stdout!r}")
    changed = {f.path: f for f in r.files_changed}
    expect(path in changed and changed[path].sha256 == digest and changed[path].size_bytes == size,
           f"export: files_changed {r.files_changed} lacks {path} ({size} bytes, {digest})")
    meta = ctx.client.export_artifact(env_id, path)
    expect(meta.sha256 == digest and meta.size_bytes == size and meta.tenant_id == TENANT,
           f"export: metadata {meta} is not of {path} ({size} bytes, {digest})")
    data = ctx.client.download_artifact(meta.artifact_id, TENANT)
    expect(len(data) == size and hashlib.sha256(data).hexdigest() == digest,
           f"export: downloaded {len(data)} bytes with sha256 {hashlib.sha256(data).hexdigest()}, "
           f"expected {size} bytes with {digest}")
    ctx.client.delete_artifact(meta.artifact_id, TENANT)
    try:
        ctx.client.get_artifact(meta.artifact_id, TENANT)
        raise CheckFailed(f"export: artifact {meta.artifact_id} still there after DELETE")
    except NotFoundError:
        pass


KINDS: dict[str, tuple[Callable[[Context, str, random.Random], None], dict[str, int]]] = {
    "normal": (cycle_normal, {}),
    "exit_code": (cycle_exit_code, {}),
    "timeout": (cycle_timeout, {}),
    "memory": (cycle_memory, {"memory_bytes": MEMORY_LIMIT}),
    "pids": (cycle_pids, {"pids_max": 16}),
    "output_limit": (cycle_output_limit, {}),
    "disk": (cycle_disk, {"workspace_bytes": 4 << 20}),
    "sigkill": (cycle_sigkill, {}),
    "stream": (cycle_stream, {}),
    "stream_slow": (cycle_stream_slow, {}),
    "stream_vanish": (cycle_stream_vanish, {}),
    "code_job": (cycle_code_job, {}),
    "export": (cycle_export, {}),
}


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self.failed: collections.Counter[str] = collections.Counter()
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        self.failures: list[str] = []

    def record(self, kind: str, seconds: float, failure: Optional[str]) -> None:
        with self.lock:
            self.counts[kind] += 1
            self.seconds[kind].append(seconds)
            if failure is not None:
                self.failed[kind] += 1
                self.failures.append(failure)


def one_cycle(ctx: Context, seed: int, index: int, kinds: list[str], stats: Stats) -> None:
    rng = random.Random(f"{seed}/{index}")
    kind = rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0]
    run, limits = KINDS[kind]
    start = time.perf_counter()
    failure = None
    env_id = None
    try:
        env_id = ctx.client.provision(TENANT, f"soak-{seed}-{index}", limits=limits or None).environment_id
        run(ctx, env_id, rng)
    except CheckFailed as e:
        failure = str(e)
    except (AirlockError, OSError) as e:
        failure = f"{type(e).__name__}: {e}"
    except Exception as e:  # a malformed answer (bad JSON, a missing key, ...): listed, the run goes on
        failure = f"unexpected {type(e).__name__}: {e}"
    finally:
        if env_id is not None:
            try:
                ctx.client.destroy(env_id)
            except AirlockError as e:
                failure = (failure + "; " if failure else "") + f"destroy: {type(e).__name__}: {e}"
    if failure is not None:
        failure = f"cycle {index} ({kind}, env {env_id}): {failure}"
    stats.record(kind, time.perf_counter() - start, failure)


# --- samples of the service ----------------------------------------------------


@dataclasses.dataclass
class Sample:
    cycles: int
    seconds: float
    rss_kib: int
    fds: int
    threads: int
    children: int


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = collections.defaultdict(list)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="latin-1") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children[ppid].append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def take_sample(pid: int, cycles: int, started: float) -> Sample:
    fields = {}
    with open(f"/proc/{pid}/status", encoding="latin-1") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value.split()
    return Sample(
        cycles=cycles,
        seconds=time.perf_counter() - started,
        rss_kib=int(fields["VmRSS"][0]),
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        threads=int(fields["Threads"][0]),
        children=len(descendants(pid)),
    )


def quiescent_problems(client: AirlockClient, serve: ServeProcess, cycles: int) -> list[str]:
    """With no cycle in flight: nothing may be live or left of a sandbox."""
    problems = []
    try:
        live = client.list_environments()
        if live:
            problems.append(f"after {cycles} cycles: {len(live)} environments live: "
                            f"{[e.environment_id for e in live[:5]]}")
    except AirlockError as e:
        problems.append(f"after {cycles} cycles: GET /v1/environments failed: {e}")
    kids = descendants(serve.proc.pid)
    if kids:
        problems.append(f"after {cycles} cycles: the service has {len(kids)} descendant processes: {kids[:10]}")
    cgroups = cgroup_leftovers(serve.state_dir)
    if cgroups:
        problems.append(f"after {cycles} cycles: {len(cgroups)} sandbox cgroups remain: {cgroups[:5]}")
    mounts = mount_leftovers(serve.state_dir)
    if mounts:
        problems.append(f"after {cycles} cycles: {len(mounts)} mounts under the state dir: {mounts[:5]}")
    return problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cycles", type=int, default=10000, help="provision/execute/destroy cycles (default 10000)")
    p.add_argument("--concurrency", type=int, default=8, help="cycles in flight at once (default 8)")
    p.add_argument("--seed", type=int, default=1, help="seed of the mix (default 1)")
    p.add_argument("--binary", default=None, help="airlock binary (default $AIRLOCK_BINARY)")
    p.add_argument("--sandbox", default="linux", help="the service's mechanism (default linux)")
    p.add_argument("--kinds", help=f"comma-separated subset of: {','.join(KINDS)} (changes the draw)")
    p.add_argument("--first-cycle", type=int, default=0,
                   help="number of the first cycle (--first-cycle 65 --cycles 1 replays cycle 65 alone)")
    p.add_argument("--serve-env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for the service's environment (repeatable), e.g. MALLOC_ARENA_MAX=2")
    p.add_argument("--sample-every", type=int, help="cycles between samples (default: 250, fewer on short runs)")
    p.add_argument("--warmup", type=int, help="cycles before the baseline sample (default: 1000, or a "
                   "quarter of a short run)")
    args = p.parse_args()

    kinds = list(KINDS) if not args.kinds else [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        p.error(f"--kinds: unknown kind(s) {unknown}; the kinds are {', '.join(KINDS)}")
    if args.cycles < 1 or args.concurrency < 1 or args.first_cycle < 0:
        p.error("--cycles and --concurrency must be positive, --first-cycle not negative")
    sample_every = args.sample_every or min(250, max(1, args.cycles // 10))
    warmup = args.warmup if args.warmup is not None else min(1000, args.cycles // 4)
    if sample_every < 1 or warmup < 0:
        p.error("--sample-every must be positive and --warmup not negative")

    serve_env = {}
    for item in args.serve_env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            p.error(f"--serve-env {item!r}: expected NAME=VALUE")
        serve_env[name] = value
    serve = ServeProcess(args.binary or default_binary(), sandbox=args.sandbox, env=serve_env)
    state_dir = serve.state_dir
    client = serve.client()
    ctx = Context(client=client, port=serve.port, token=serve.token())
    stats = Stats()
    problems: list[str] = []
    samples: list[Sample] = []
    print(f"soak: {args.cycles} cycles, concurrency {args.concurrency}, seed {args.seed}, "
          f"sandbox {args.sandbox}, service pid {serve.proc.pid}, state dir {state_dir}", flush=True)
    started = time.perf_counter()
    wall = 0.0
    try:
        samples.append(take_sample(serve.proc.pid, 0, started))
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            done = 0
            while done < args.cycles:
                batch = range(done, min(done + sample_every, args.cycles))
                futures = [pool.submit(one_cycle, ctx, args.seed, args.first_cycle + i, kinds, stats) for i in batch]
                for f in concurrent.futures.as_completed(futures):
                    f.result()  # one_cycle records what failed; anything else is a bug here
                done = batch.stop
                problems += quiescent_problems(client, serve, done)
                s = take_sample(serve.proc.pid, done, started)
                samples.append(s)
                print(f"  {done:>6}/{args.cycles} cycles  {done / s.seconds:6.1f} cycles/s  "
                      f"rss {s.rss_kib / 1024:7.1f} MiB  fds {s.fds:4}  threads {s.threads:4}  "
                      f"failures {len(stats.failures)}", flush=True)
        wall = time.perf_counter() - started
        try:
            left = client.list_environments()
            if left:
                problems.append(f"at the end: {len(left)} environments still live")
        except AirlockError as e:
            problems.append(f"at the end: GET /v1/environments failed: {e}")
    finally:
        log_text = serve.log()
        stop_start = time.perf_counter()
        status = serve.stop(timeout=30)
        stop_seconds = time.perf_counter() - stop_start
        if status != 0:
            problems.append(f"airlock serve exited with {status} on SIGTERM "
                            f"({'killed after 30 s' if status == -9 else 'not 0'})")
        cgroups = cgroup_leftovers(state_dir)
        if cgroups:
            problems.append(f"after the service stopped: cgroups left behind: {cgroups[:10]}")
        mounts = mount_leftovers(state_dir)
        if mounts:
            problems.append(f"after the service stopped: mounts left under {state_dir}: {mounts[:10]}")
        if os.path.exists(state_dir):
            problems.append(f"after the service stopped: its state dir {state_dir} could not be removed")

    # Flat after warm-up: the last sample against the first at or after the warm-up.
    baseline = next((s for s in samples if s.cycles >= warmup and s.cycles > 0), None)
    last = samples[-1]
    flat_note = ""
    if baseline is None or baseline is last:
        flat_note = "not checked: no sample after the warm-up before the last one (run more cycles)"
    else:
        if last.fds > baseline.fds + FD_TOLERANCE:
            problems.append(f"open fds grew from {baseline.fds} (after {baseline.cycles} cycles) to {last.fds} "
                            f"(after {last.cycles}), more than +{FD_TOLERANCE}")
        if last.rss_kib > baseline.rss_kib * (1 + RSS_TOLERANCE):
            problems.append(f"RSS grew from {baseline.rss_kib} KiB (after {baseline.cycles} cycles) to "
                            f"{last.rss_kib} KiB (after {last.cycles}), more than +{RSS_TOLERANCE:.0%}")
        flat_note = (f"baseline after {baseline.cycles} cycles: rss {baseline.rss_kib} KiB, fds {baseline.fds}; "
                     f"last: rss {last.rss_kib} KiB ({(last.rss_kib / baseline.rss_kib - 1):+.1%}), "
                     f"fds {last.fds} ({last.fds - baseline.fds:+d}); tolerances +{RSS_TOLERANCE:.0%} rss, "
                     f"+{FD_TOLERANCE} fds")

    total = sum(stats.counts.values())
    print(f"\n{total} cycles in {wall:.1f} s: {total / wall if wall else 0:.1f} cycles/s, "
          f"{len(stats.failures)} failed; SIGTERM to exit {stop_seconds:.2f} s (status {status})")
    print(f"  {'kind':<14} {'count':>6} {'failed':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for kind in KINDS:
        if stats.counts[kind]:
            secs = stats.seconds[kind]
            print(f"  {kind:<14} {stats.counts[kind]:>6} {stats.failed[kind]:>6} "
                  f"{percentile(secs, 50) * 1000:>8.0f} {percentile(secs, 99) * 1000:>8.0f} {max(secs) * 1000:>8.0f}")
    if ctx.vanish_waits:
        w = ctx.vanish_waits
        print(f"  vanished stream -> next command accepted: p50 {percentile(w, 50) * 1000:.0f} ms, "
              f"max {max(w) * 1000:.0f} ms (limit {VANISH_PROMPT_SECONDS:.0f} s)")
    print("\nsamples of the service (taken with nothing in flight):")
    print(f"  {'cycles':>6} {'seconds':>8} {'rss MiB':>8} {'fds':>5} {'threads':>7} {'children':>8}")
    for s in samples:
        print(f"  {s.cycles:>6} {s.seconds:>8.1f} {s.rss_kib / 1024:>8.1f} {s.fds:>5} {s.threads:>7} {s.children:>8}")
    print(f"flatness: {flat_note}")

    for f in stats.failures[:50]:
        print(f"FAILED: {f}", file=sys.stderr)
    if len(stats.failures) > 50:
        print(f"... and {len(stats.failures) - 50} more failed cycles", file=sys.stderr)
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    if stats.failures or problems:
        fd, path = tempfile.mkstemp(prefix="airlock-soak-", suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write(log_text + "\n")
        print(f"soak FAILED: {len(stats.failures)} failed cycles, {len(problems)} problems; "
              f"the service's log is in {path}", file=sys.stderr)
        return 1
    print("\nsoak passed: every outcome as expected, nothing left, the service flat after warm-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
