"""An agent's session through the Python client against a real `airlock
serve`, written as a user would write it: provision an environment, start
a small HTTP server as a background job, poll until it says it listens,
execute a client against it, read the server's log (the request line on
its stderr), kill the job, poll until it settles, and download each
stream's spilled artifact, which must be byte for byte what the polls
returned (size and sha256 too).

    AIRLOCK_BINARY=build/release/airlock \\
        /usr/bin/python3 sdk/python/tests/scripted_session.py linux|gvisor

The argument is the service's mechanism (its `sandbox` setting); the
artifacts go to the service's own store under its fresh state directory.
Exit status: 0 when every check held; 1 after the first that did not,
with what was seen and the service's log; 77 (ctest's skip code here) when
this machine cannot run the mechanism, with the reason: both need root,
gvisor also runsc. Not collected by `unittest discover` (the name does not
start with "test"): tests/sdk/CMakeLists.txt runs it once per mechanism.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import sys
import time

# The client beside this directory (sdk/python), also when run as a script.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from airlock_client import AirlockClient, AirlockError, Job  # noqa: E402
from airlock_client.testing import ServeProcess, default_binary  # noqa: E402

SKIP = 77
TENANT = "t-session"

# A server on a port the kernel picks; its first line says which.
SERVER = (
    "import http.server\n"
    "s = http.server.HTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n"
    "print('listening on', s.server_port, flush=True)\n"
    "s.serve_forever()\n"
)
CLIENT = (
    "import sys, urllib.request\n"
    "r = urllib.request.urlopen('http://127.0.0.1:' + sys.argv[1] + '/hello.txt')\n"
    "print(r.status, r.read().decode(), end='')\n"
)
GREETING = "hello from the workspace\n"


class CheckFailed(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(what)


def unavailable(mechanism: str) -> str | None:
    """Why this machine cannot run `mechanism`, or None."""
    if os.geteuid() != 0:
        return f"the {mechanism} mechanism needs root"
    if mechanism == "gvisor" and not os.access("/usr/bin/runsc", os.X_OK):
        return "runsc is not installed at /usr/bin/runsc (Debian package runsc)"
    return None


class Follower:
    """Follows one job through poll_job from cursor 0: everything read so
    far of each stream, and the last answer."""

    def __init__(self, env, job_id: str):
        self.env = env
        self.job_id = job_id
        self.stdout = b""
        self.stderr = b""
        self.last: Job | None = None

    def until(self, done, seconds: float = 60.0) -> Job:
        """Polls (each poll waits up to 5 s for a cursor to move) until
        done(self) holds or the job is no longer pending; at most `seconds`."""
        limit = time.monotonic() + seconds
        while True:
            job = self.env.poll_job(self.job_id, stdout_cursor=len(self.stdout),
                                    stderr_cursor=len(self.stderr), wait_ms=5000)
            check(job.stdout.dropped == 0 and job.stderr.dropped == 0,
                  f"a poll from the last cursors dropped output: {job}")
            self.stdout += job.stdout.data
            self.stderr += job.stderr.data
            check((job.stdout.cursor, job.stderr.cursor) == (len(self.stdout), len(self.stderr)),
                  f"the cursors ({job.stdout.cursor}, {job.stderr.cursor}) are not the bytes read "
                  f"({len(self.stdout)}, {len(self.stderr)})")
            self.last = job
            if done(self) or not job.pending or time.monotonic() > limit:
                return job


def session(client: AirlockClient) -> None:
    with client.environment(TENANT, "r-session") as env:
        env.write_file("hello.txt", GREETING)
        started = env.start_job(["python3", "-c", SERVER])
        job_id = started["job_id"] if isinstance(started, dict) else started.job_id
        server = Follower(env, job_id)

        # Poll until the server says where it listens.
        job = server.until(lambda f: b"\n" in f.stdout)
        check(job.state == "running", f"the server is not running: {job}\n{server.stderr!r}")
        listening = server.stdout.decode()
        check(listening.startswith("listening on ") and listening.endswith("\n"),
              f"the server's first line is {listening!r}")
        port = listening.split()[-1]
        check([j.job_id for j in env.list_jobs()] == [job_id], "list_jobs does not show the job")

        # A client command against it.
        result = env.execute(["python3", "-c", CLIENT, port], timeout_seconds=60)
        check(result.ok, f"the client failed: {result}")
        check(result.stdout == b"200 " + GREETING.encode(),
              f"the client's answer is {result.stdout!r}")

        # The server's log: the request line on its stderr.
        request_line = b'"GET /hello.txt HTTP/1.1" 200'
        server.until(lambda f: request_line in f.stderr)
        check(request_line in server.stderr, f"no request line in the server's log: {server.stderr!r}")

        # Kill it and poll (past what was read) until it settles.
        env.kill_job(job_id)
        job = server.until(lambda f: False)
        check(not job.pending, f"the killed job did not settle: {job}")
        check((job.state, job.kill_reason) == ("killed", "requested"), f"the job ended as {job}")
        check(server.stdout == listening.encode(), f"the server printed more: {server.stdout!r}")

        # Each stream's spill is exactly what the polls read.
        check(job.spill is not None, f"no spill: {job}")
        for name, read in (("stdout", server.stdout), ("stderr", server.stderr)):
            spilled = job.spill[name]
            check(isinstance(spilled, dict), f"{name} was not stored: {spilled!r}")
            check(spilled["size_bytes"] == len(read) and not spilled["truncated"],
                  f"{name}: the spill has {spilled['size_bytes']} bytes, the polls read {len(read)}")
            check(spilled["sha256"] == hashlib.sha256(read).hexdigest(),
                  f"{name}: the spill's sha256 is not that of what was polled")
            stored = client.download_artifact(spilled["artifact_id"], TENANT)
            check(stored == read, f"{name}: the artifact holds {stored!r}, the polls read {read!r}")
            meta = client.get_artifact(spilled["artifact_id"], TENANT)
            check((meta.sha256, meta.size_bytes, meta.filename, meta.run_id)
                  == (spilled["sha256"], len(read), f"{job_id}.{name}", "r-session"),
                  f"{name}: the artifact's metadata disagrees with the spill: {meta}")
        print(f"session on job {job_id}: server {listening.strip()!r}, client {result.stdout!r}, "
              f"{len(server.stderr)} bytes of log, both streams stored whole")


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("linux", "gvisor"):
        print(f"usage: {argv[0]} linux|gvisor", file=sys.stderr)
        return 2
    mechanism = argv[1]
    why = unavailable(mechanism)
    if why:
        print(f"skipped: {why}")
        return SKIP
    binary = default_binary()
    if not os.access(binary, os.X_OK):
        print(f"no airlock binary at {binary} (set AIRLOCK_BINARY)", file=sys.stderr)
        return 1
    serve = ServeProcess(binary, sandbox=mechanism)
    failure = None
    try:
        session(serve.client())
    except (CheckFailed, AirlockError) as e:
        failure = f"{type(e).__name__}: {e}"
    finally:
        status = serve.stop()
    if failure is not None:
        print(f"FAILED ({mechanism}): {failure}\nairlock serve's log:\n{serve.log()}", file=sys.stderr)
        return 1
    if status != 0:
        print(f"airlock serve exited with {status}:\n{serve.log()}", file=sys.stderr)
        return 1
    print(f"ok ({mechanism})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
