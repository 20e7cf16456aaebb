"""Airlock's guest library: call host capabilities from a program in a sandbox.

A program running in code mode reaches the world only through the capability
channel: one UNIX socket whose path is in AIRLOCK_CAP_SOCKET, and a token in the
file AIRLOCK_CAP_TOKEN_FILE. Every call carries the token and a deadline; the
service's broker checks both and the execution's policy, and answers with a
value or a named refusal. The wire is docs/wire.md; the capabilities and their
refusal codes are docs/capabilities.md.

    import airlock_cap as cap

    def main():
        text = cap.fs.read_text("input.txt")
        listing = cap.proc.stdout(["ls", "-l"])
        job = cap.job.start(["sh", "-c", "sleep 1; echo done"])
        state = cap.job.wait(job)             # until its output moves or it ends
        cap.notes.put("summary", {"lines": len(text.splitlines())})
        return {"listing": listing, "job": state.stdout}

`airlock run --code prog.py` runs prog.py under airlock_cap.boot, which calls
main() and sends its return value as the execution's outcome (an exception
becomes Errored). Standard library only.

Every refusal raises a CapError subclass named after its code (Denied for
"denied", SpawnCeilingReached for "spawn_ceiling_reached", ...); a code this
version does not know raises CapError itself, with `.code` set, so a new name
still reaches the program as itself.
"""

from __future__ import annotations

import os
import queue
import shlex
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from . import wire
from .wire import Completed, Errored

__all__ = [
    "call", "proc", "fs", "notes", "job", "net", "schedule", "serve", "Completed", "Errored",
    "CapError", "Invocation", "Refused",
]

DEFAULT_DEADLINE_MS = 60_000
SOCKET_VARIABLE = "AIRLOCK_CAP_SOCKET"
TOKEN_FILE_VARIABLE = "AIRLOCK_CAP_TOKEN_FILE"

# ----------------------------------------------------------------- errors


class CapError(Exception):
    """A call failed: `code` is the broker's (or this library's) stable name."""

    code = "cap_error"

    def __init__(self, code: Optional[str] = None, message: str = "") -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code}: {message}" if message else self.code)


_ERRORS: Dict[str, type] = {}


def _named(code: str, name: str, doc: str) -> type:
    cls = type(name, (CapError,), {"code": code, "__doc__": doc})
    _ERRORS[code] = cls
    globals()[name] = cls
    __all__.append(name)
    return cls


_named("bad_token", "BadToken", "The token is not this execution's (revoked, replayed or foreign).")
_named("deadline_exceeded", "DeadlineExceeded", "The call's deadline passed; its effect was stopped.")
_named("denied", "Denied", "The execution's policy does not allow this capability.")
_named("unknown_capability", "UnknownCapability", "No capability has this name.")
_named("unavailable", "Unavailable", "The capability exists but cannot serve now (or has no handler).")
_named("spawn_ceiling_reached", "SpawnCeilingReached", "The execution started its 32 processes.")
_named("admission_ceiling_reached", "AdmissionCeilingReached", "A send/note/notes ceiling is reached.")
_named("bad_request", "BadRequest", "The arguments do not have the capability's shape.")
_named("not_found", "NotFound", "The file or note does not exist.")
_named("workspace_escape", "WorkspaceEscape", "The path leaves the workspace.")
_named("too_large", "TooLarge", "The data is larger than the capability takes or returns.")
_named("job_not_found", "JobNotFound", "No job has this id.")
_named("job_refused", "JobRefused", "The job cannot take this (its input is closed).")
_named("rejected", "Rejected", "The sandbox refused the request.")
_named("cancelled", "Cancelled", "The call was cancelled.")
_named("internal_error", "InternalError", "The capability failed inside the service.")
_named("channel_closed", "ChannelClosed", "The channel is closed; no answer will come.")
_named("malformed_result", "MalformedResult", "The service's answer did not have the expected shape.")
_named("proc_failed", "ProcFailed", "proc.stdout: the command failed, timed out or was killed.")
_named("busy", "Busy", "Serving: an invocation was already open.")
_named("crashed", "Crashed", "Serving: the handler raised.")
_named("bad_kind", "BadKind", "Serving: the invocation kind is neither tool nor event.")
_named("invalid_schedule", "InvalidSchedule", "schedule.*: a field is invalid or above the host's ceiling.")
# net.fetch: the egress guard's reason codes (docs/egress.md), kept as names.
_named("mode_deny", "ModeDeny", "net: the execution's egress policy denies all network.")
_named("host_not_allowed", "HostNotAllowed", "net: the host is not on the egress allowlist.")
_named("port_not_allowed", "PortNotAllowed", "net: the port is not allowed for this host.")
_named("scheme_not_allowed", "SchemeNotAllowed", "net: only http and https URLs are taken.")
_named("ip_literal", "IpLiteral", "net: an IP address where a host name must be.")
_named("malformed_authority", "MalformedAuthority", "net: the URL's host part is malformed.")
_named("malformed_request", "MalformedRequest", "net: the URL is malformed.")
_named("non_ascii_host", "NonAsciiHost", "net: the host is not ASCII (write it as punycode).")
_named("dns_error", "DnsError", "net: the host's lookup failed.")
_named("dns_no_answer", "DnsNoAnswer", "net: the host has no address.")
_named("resolved_denied", "ResolvedDenied",
       "net: the host resolved to a denied address; `code` is resolved_denied:<class>.")
_named("redirect_denied", "RedirectDenied", "net: a redirect went where the policy denies.")
_named("connect_failed", "ConnectFailed", "net: the connection failed.")
_named("timeout", "Timeout", "net: the request timed out.")
_named("response_too_large", "ResponseTooLarge", "net: the response is larger than the guard's cap.")
_named("transport_error", "TransportError", "net: the transfer failed.")


def error_for(code: str, message: str) -> CapError:
    """The CapError subclass named by `code` (CapError itself for a new code)."""
    cls = _ERRORS.get(code)
    if cls is None and ":" in code:
        # "resolved_denied:metadata": the class of its family, the code whole.
        cls = _ERRORS.get(code.split(":", 1)[0])
        if cls is not None:
            return cls(code, message)
    return cls(None, message) if cls is not None else CapError(code, message)


# ----------------------------------------------------------------- the channel


class _Pending:
    __slots__ = ("event", "result")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: Any = None


def _non_finite(value: Any, depth: int = 0) -> Optional[str]:
    """Where a NaN or infinity sits in an outcome value, or None."""
    if depth > 64:
        return None
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"{value!r} is not a finite number (JSON cannot carry it)"
    if isinstance(value, (list, tuple)):
        for v in value:
            found = _non_finite(v, depth + 1)
            if found:
                return found
    if isinstance(value, dict):
        for v in value.values():
            found = _non_finite(v, depth + 1)
            if found:
                return found
    return None


class Channel:
    """One connection to the broker. Thread-safe: calls from several threads
    are multiplexed by id; a reader thread delivers their results."""

    def __init__(self, path: str, token: bytes) -> None:
        self.token = token
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: Dict[int, _Pending] = {}
        self._next_id = 1
        self._closed: Optional[str] = None
        self.hooks: "queue.Queue[Any]" = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, name="airlock-cap-reader", daemon=True)
        self._reader.start()

    def _send(self, frame: Any) -> None:
        data = wire.encode_frame(frame)
        with self._send_lock:
            if self._closed is not None:
                raise error_for("channel_closed", self._closed)
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise error_for("channel_closed", str(e)) from None

    def _read_loop(self) -> None:
        decoder = wire.FrameDecoder()
        reason = "the service closed the channel"
        try:
            while True:
                data = self._sock.recv(65536)
                if not data:
                    break
                decoder.feed(data)
                while True:
                    ev = decoder.next()
                    if ev is None:
                        break
                    if isinstance(ev, wire.Fault):
                        reason = f"wire fault {ev.kind}: {ev.detail}"
                        raise StopIteration
                    self._deliver(ev)
        except StopIteration:
            pass
        except OSError as e:
            reason = str(e)
        self._close(reason)

    def _deliver(self, ev: Any) -> None:
        if isinstance(ev, wire.CapResult) or (isinstance(ev, wire.Invalid) and ev.kind == "cap_result"):
            with self._lock:
                slot = self._pending.pop(ev.id, None)
            if slot is not None:
                if isinstance(ev, wire.Invalid):
                    slot.result = error_for("malformed_result", ev.reason)
                elif isinstance(ev.answer, wire.Refusal):
                    slot.result = error_for(ev.answer.code, ev.answer.message)
                else:
                    slot.result = ev.answer
                slot.event.set()
        elif isinstance(ev, (wire.HookCall, wire.Cancel)):
            self.hooks.put(ev)
        elif isinstance(ev, wire.Invalid) and ev.kind == "hook_call":
            self.hooks.put(ev)
        # anything else: dropped, the channel stays open

    def _close(self, reason: str) -> None:
        with self._lock:
            if self._closed is None:
                self._closed = reason
            pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.result = error_for("channel_closed", reason)
            slot.event.set()
        self.hooks.put(None)

    def call(self, cap: str, args: Any = None, deadline_ms: int = DEFAULT_DEADLINE_MS) -> Any:
        """Sends one cap_call and waits for its answer; raises CapError."""
        if not isinstance(deadline_ms, int) or deadline_ms < 0:
            raise error_for("bad_request", "deadline_ms must be a non-negative int")
        slot = _Pending()
        with self._lock:
            if self._closed is not None:
                raise error_for("channel_closed", self._closed)
            call_id = self._next_id
            self._next_id += 1
            self._pending[call_id] = slot
        try:
            self._send(wire.CapCall(call_id, bytes(self.token), cap, args, deadline_ms))
        except wire.WireEncodeError as e:
            with self._lock:
                self._pending.pop(call_id, None)
            raise error_for("bad_request", str(e)) from None
        # The broker answers deadline_exceeded at the deadline; the margin
        # only covers a service that stopped answering.
        if not slot.event.wait(deadline_ms / 1000.0 + 5.0):
            with self._lock:
                self._pending.pop(call_id, None)
            try:
                self._send(wire.Cancel(call_id))
            except CapError:
                pass
            raise error_for("deadline_exceeded", f"no answer to {cap} within {deadline_ms} ms")
        if isinstance(slot.result, CapError):
            raise slot.result
        return slot.result.value

    def send_outcome(self, result: Union[Completed, Errored]) -> Union[Completed, Errored]:
        """Sends the outcome and returns what was sent: an outcome that cannot
        be sent (a value msgpack cannot carry, or a NaN or infinity, which the
        JSON the service answers with cannot carry either) is sent as Errored
        saying why."""
        problem = _non_finite(result.value if isinstance(result, Completed) else None)
        try:
            if problem:
                raise wire.WireEncodeError(problem)
            frame = wire.encode_frame(wire.Outcome(0, result))
        except wire.WireEncodeError as e:
            result = Errored(f"the outcome value cannot be sent: {e}", None)
            frame = wire.encode_frame(wire.Outcome(0, result))
        with self._send_lock:
            self._sock.sendall(frame)
        return result

    def send_hook_result(self, hook_id: int, answer: Any) -> None:
        try:
            self._send(wire.HookResult(hook_id, answer))
        except wire.WireEncodeError as e:
            self._send(wire.HookResult(hook_id, wire.Refusal("crashed", f"the answer cannot be sent: {e}")))

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._reader.join(timeout=5)
        self._sock.close()


_channel: Optional[Channel] = None
_channel_lock = threading.Lock()


def channel() -> Channel:
    """The process's channel, connected on first use from the environment."""
    global _channel
    with _channel_lock:
        if _channel is None:
            path = os.environ.get(SOCKET_VARIABLE)
            token_file = os.environ.get(TOKEN_FILE_VARIABLE)
            if not path or not token_file:
                raise error_for("channel_closed", f"{SOCKET_VARIABLE} and {TOKEN_FILE_VARIABLE} are not set: "
                                                  "this program is not running in code mode")
            with open(token_file, "rb") as f:
                token = f.read().strip()
            try:
                _channel = Channel(path, token)
            except OSError as e:
                raise error_for("channel_closed", f"cannot connect to {path}: {e}") from None
        return _channel


def call(cap: str, args: Any = None, deadline_ms: int = DEFAULT_DEADLINE_MS) -> Any:
    """Calls capability `cap` with `args`; returns its value or raises CapError."""
    return channel().call(cap, args, deadline_ms)


def _args(**kw: Any) -> Dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


# ----------------------------------------------------------------- proc


@dataclass(frozen=True)
class RunResult:
    argv: List[str]
    exit_code: Optional[int]
    signal: Optional[int]
    stdout: Union[str, bytes]
    stderr: Union[str, bytes]
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: int


def _as_text(data: Union[str, bytes]) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def cut_front(text: str, limit: int) -> str:
    """At most `limit` UTF-8 bytes of `text`'s start; "..." counts inside."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    return raw[: max(0, limit - 3)].decode("utf-8", "ignore") + "..."


def cut_back(text: str, limit: int) -> str:
    """At most `limit` UTF-8 bytes of `text`'s end; "..." counts inside."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    return "..." + raw[len(raw) - max(0, limit - 3):].decode("utf-8", "ignore")


def failure_text(result: RunResult) -> str:
    """The one error string of a failed run: the command (argv cut to 160
    bytes), how it ended, and the end of its stderr (at most 400 bytes)."""
    command = cut_front(shlex.join(result.argv), 160)
    if result.timed_out:
        how = "timed out"
    elif result.exit_code is None and result.signal is not None:
        how = f"was killed by signal {result.signal}"
    else:
        how = f"exited with {result.exit_code}"
    tail = cut_back(_as_text(result.stderr).strip(), 400)
    return f"{command} {how}" + (f": {tail}" if tail else "")


def stdout_from(result: RunResult, accept: Sequence[int] = (0,)) -> str:
    """The pure decision behind proc.stdout: the stdout, or ProcFailed."""
    if result.timed_out or result.exit_code is None or result.exit_code not in accept:
        raise error_for("proc_failed", failure_text(result))
    return _as_text(result.stdout)


class proc:  # noqa: N801 - a namespace, read as cap.proc.run
    @staticmethod
    def run(argv: Sequence[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            stdin: Union[str, bytes, None] = None, timeout_ms: Optional[int] = None,
            deadline_ms: int = DEFAULT_DEADLINE_MS) -> RunResult:
        """Runs a command in the sandbox to completion (killed at the deadline)."""
        argv = list(argv)
        r = call("proc.run", _args(argv=argv, cwd=cwd, env=env, stdin=stdin, timeout_ms=timeout_ms), deadline_ms)
        try:
            return RunResult(argv, r["exit_code"], r["signal"], r["stdout"], r["stderr"], r["timed_out"],
                             r["stdout_truncated"], r["stderr_truncated"], r["duration_ms"])
        except (KeyError, TypeError) as e:
            raise error_for("malformed_result", f"proc.run: {e}") from None

    @staticmethod
    def stdout(argv: Sequence[str], accept: Sequence[int] = (0,), **kw: Any) -> str:
        """The command's stdout, or ProcFailed with one error string."""
        return stdout_from(proc.run(argv, **kw), accept)


# ----------------------------------------------------------------- fs


class fs:  # noqa: N801
    @staticmethod
    def read(path: str, deadline_ms: int = DEFAULT_DEADLINE_MS) -> bytes:
        return call("fs.read", {"path": path}, deadline_ms)

    @staticmethod
    def read_text(path: str, deadline_ms: int = DEFAULT_DEADLINE_MS) -> str:
        return fs.read(path, deadline_ms).decode("utf-8", "replace")

    @staticmethod
    def write(path: str, data: Union[str, bytes], deadline_ms: int = DEFAULT_DEADLINE_MS) -> None:
        call("fs.write", {"path": path, "data": data}, deadline_ms)

    @staticmethod
    def list(path: str = ".", deadline_ms: int = DEFAULT_DEADLINE_MS) -> List[Dict[str, Any]]:
        return call("fs.list", {"path": path}, deadline_ms)


# ----------------------------------------------------------------- notes


class notes:  # noqa: N801
    @staticmethod
    def put(key: str, value: Any, deadline_ms: int = DEFAULT_DEADLINE_MS) -> None:
        call("notes.put", {"key": key, "value": value}, deadline_ms)

    @staticmethod
    def get(key: str, deadline_ms: int = DEFAULT_DEADLINE_MS) -> Any:
        return call("notes.get", {"key": key}, deadline_ms)

    @staticmethod
    def list(prefix: str = "", deadline_ms: int = DEFAULT_DEADLINE_MS) -> List[str]:
        return call("notes.list", {"prefix": prefix}, deadline_ms)


# ----------------------------------------------------------------- job


@dataclass
class Job:
    """A started job and the cursors up to which its output has been read.
    Cursors are the service's; poll/wait advance them."""

    job_id: str
    stdout_cursor: int = 0
    stderr_cursor: int = 0
    wall_ms: int = 0       # granted at start; 0: for the environment's life
    deadline_ms: int = 0   # Unix ms the job is killed at (0: unknown)


@dataclass(frozen=True)
class SpilledStream:
    """One stream's whole output, stored in the artifact store once the job
    ended. `sha256` and `size_bytes` are of exactly the bytes the stream
    carried, up to the per-stream cap; an empty stream is not stored
    (`artifact_id` None, size 0, the digest of no bytes)."""

    artifact_id: Optional[str]
    media_type: Optional[str]  # "text/plain; charset=utf-8" or "application/octet-stream"
    sha256: str
    size_bytes: int
    truncated: bool            # the stream passed the cap; the artifact is its start
    dropped_bytes: int         # bytes past the cap


@dataclass(frozen=True)
class Spill:
    """Both streams of a job that is no longer pending. A `str` in place of
    a SpilledStream says why that stream was not stored (no artifact store
    for this execution, the spool or the store failed)."""

    stdout: Union[SpilledStream, str]
    stderr: Union[SpilledStream, str]


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str                # "running", "exited" or "killed"
    exit_code: Optional[int]
    pending: bool             # output, or its spill, may still come
    stdout: Union[str, bytes]  # since the cursor (the bounded tail at most)
    stderr: Union[str, bytes]
    stdout_dropped: int       # bytes that left the tail unread (never lost: see spill)
    stderr_dropped: int
    spill: Optional[Spill] = None  # None while pending
    kill_reason: Optional[str] = None  # "requested", "deadline", "environment_destroyed"


def _spilled_stream(v: Any) -> Union[SpilledStream, str]:
    if isinstance(v, str):
        return v
    return SpilledStream(v.get("artifact_id"), v.get("media_type"), v["sha256"], v["size_bytes"],
                         v["truncated"], v.get("dropped_bytes", 0))


def _spill(v: Any) -> Optional[Spill]:
    if v is None:
        return None
    return Spill(_spilled_stream(v["stdout"]), _spilled_stream(v["stderr"]))


JobRef = Union[Job, str, Dict[str, Any]]


def _job(j: JobRef) -> Job:
    """A Job from a Job (its cursors are followed), a job id, or a row of
    job.list() (both read from the start of each stream)."""
    if isinstance(j, Job):
        return j
    if isinstance(j, str):
        return Job(j)
    if isinstance(j, dict) and isinstance(j.get("job_id"), str):
        return Job(j["job_id"])
    raise TypeError("a job is a Job, a job id (str) or a row of job.list(), not "
                    + type(j).__name__)


class job:  # noqa: N801
    @staticmethod
    def start(argv: Sequence[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
              wall_ms: Optional[int] = None, deadline_ms: int = DEFAULT_DEADLINE_MS,
              pty: Optional[Dict[str, int]] = None) -> Job:
        """A background job of the environment: it outlives this program (a
        later program, the HTTP API and the tools see it). ``wall_ms``: its
        budget, fixed now (None: the service's default; 0: the environment's
        whole life), always clamped to the environment's expiry.
        ``pty={'rows': R, 'columns': C}``: run it on a pseudo-terminal of that
        size (for ``sh -i``, ``python3 -i``): its output is all stdout, with
        the terminal's echo of what is sent and "\\r\\n" line ends;
        ``send_last`` types ^D; ``job.resize`` changes the size."""
        r = call("job.start", _args(argv=list(argv), cwd=cwd, env=env, wall_ms=wall_ms, pty=pty),
                 deadline_ms)
        return Job(r["job_id"], r["stdout_cursor"], r["stderr_cursor"], r.get("wall_ms", 0),
                   r.get("deadline_ms", 0))

    @staticmethod
    def start_for_session(argv: Sequence[str], cwd: Optional[str] = None,
                          env: Optional[Dict[str, str]] = None,
                          deadline_ms: int = DEFAULT_DEADLINE_MS) -> Job:
        """job.start for the environment's whole life (no wall deadline of
        its own; it still ends with the environment)."""
        r = call("job.start_for_session", _args(argv=list(argv), cwd=cwd, env=env), deadline_ms)
        return Job(r["job_id"], r["stdout_cursor"], r["stderr_cursor"], r.get("wall_ms", 0),
                   r.get("deadline_ms", 0))

    @staticmethod
    def _state(j: Job, r: Dict[str, Any]) -> JobState:
        out, err = r["stdout"], r["stderr"]
        j.stdout_cursor, j.stderr_cursor = out["cursor"], err["cursor"]
        return JobState(r["job_id"], r["state"], r["exit_code"], r["pending"], out["data"], err["data"],
                        out["dropped"], err["dropped"], _spill(r.get("spill")), r.get("kill_reason"))

    @staticmethod
    def poll(j: JobRef, deadline_ms: int = DEFAULT_DEADLINE_MS) -> JobState:
        """Output since the job's cursors (which move past it), and its state.
        A job id (say from an earlier program) reads from the start."""
        j = _job(j)
        r = call("job.poll", {"job_id": j.job_id, "stdout_cursor": j.stdout_cursor,
                              "stderr_cursor": j.stderr_cursor}, deadline_ms)
        return job._state(j, r)

    @staticmethod
    def wait(j: JobRef, timeout_ms: int = 30_000, deadline_ms: Optional[int] = None) -> JobState:
        """Blocks until a cursor moves, the job ends, or timeout_ms passes."""
        j = _job(j)
        r = call("job.wait", {"job_id": j.job_id, "stdout_cursor": j.stdout_cursor,
                              "stderr_cursor": j.stderr_cursor, "timeout_ms": timeout_ms},
                 deadline_ms if deadline_ms is not None else timeout_ms + 5_000)
        return job._state(j, r)

    @staticmethod
    def send(j: JobRef, data: Union[str, bytes], deadline_ms: int = DEFAULT_DEADLINE_MS) -> None:
        call("job.send", {"job_id": _job(j).job_id, "data": data}, deadline_ms)

    @staticmethod
    def send_last(j: JobRef, data: Union[str, bytes] = b"",
                  deadline_ms: int = DEFAULT_DEADLINE_MS) -> None:
        call("job.send_last", {"job_id": _job(j).job_id, "data": data}, deadline_ms)

    @staticmethod
    def kill(j: JobRef, deadline_ms: int = DEFAULT_DEADLINE_MS) -> None:
        call("job.kill", {"job_id": _job(j).job_id}, deadline_ms)

    @staticmethod
    def resize(j: JobRef, rows: int, columns: int, deadline_ms: int = DEFAULT_DEADLINE_MS) -> None:
        """Sets a PTY job's terminal size (the program gets SIGWINCH).
        Refused (bad_request) for a job started without ``pty``; JobRefused
        once the job has ended."""
        call("job.resize", {"job_id": _job(j).job_id, "rows": rows, "columns": columns},
             deadline_ms)

    @staticmethod
    def list(deadline_ms: int = DEFAULT_DEADLINE_MS) -> List[Dict[str, Any]]:
        """[{job_id, argv, state, spill}], `spill` as the wire has it (nil
        while the job is pending; see Spill for the shape)."""
        return call("job.list", None, deadline_ms)


# ----------------------------------------------------------------- net


@dataclass(frozen=True)
class Response:
    status: int
    final_url: str
    headers: List[List[Union[str, bytes]]]  # [name, value] in order
    body: Union[str, bytes]                  # str when UTF-8, else bytes
    redirects: int


class net:  # noqa: N801
    @staticmethod
    def fetch(url: str, method: str = "GET", headers: Optional[Dict[str, str]] = None,
              body: Optional[Union[str, bytes]] = None, timeout_ms: Optional[int] = None,
              deadline_ms: int = DEFAULT_DEADLINE_MS) -> Response:
        """One HTTP(S) request, decided by the execution's egress policy (deny
        unless it allows the host and port). A refusal raises the guard's
        reason as its error (HostNotAllowed, ModeDeny, ResolvedDenied with
        code "resolved_denied:<class>", ...)."""
        r = call("net.fetch", _args(url=url, method=method, headers=headers, body=body,
                                    timeout_ms=timeout_ms), deadline_ms)
        return Response(r["status"], r["final_url"], r["headers"], r["body"], r["redirects"])


# ----------------------------------------------------------------- schedule


class schedule:  # noqa: N801
    """Durable schedules of this execution. Each create returns what the host
    granted ({name, target, wake, when, cadence, next_fire_unix_s, max_fires,
    fires, expires_at_unix_s}); read it rather than assume the request.
    Refusals: InvalidSchedule naming the field."""

    @staticmethod
    def every(name: str, interval_s: int, body: str = "", wake: bool = False,
              max_fires: Optional[int] = None, expires_after_s: Optional[int] = None,
              deadline_ms: int = DEFAULT_DEADLINE_MS) -> Dict[str, Any]:
        """A fixed interval on a grid aligned to the epoch; bounds only narrow."""
        return call("schedule.every", _args(name=name, interval_s=interval_s, body=body, wake=wake,
                                            bounds=schedule._bounds(max_fires, expires_after_s)), deadline_ms)

    @staticmethod
    def at(name: str, unix_s: int, body: str = "", wake: bool = False,
           deadline_ms: int = DEFAULT_DEADLINE_MS) -> Dict[str, Any]:
        """Once, at a UTC instant (Unix seconds)."""
        return call("schedule.at", _args(name=name, at=unix_s, body=body, wake=wake), deadline_ms)

    @staticmethod
    def cron(name: str, expression: str, body: str = "", wake: bool = False, offset: Optional[str] = None,
             max_fires: Optional[int] = None, expires_after_s: Optional[int] = None,
             deadline_ms: int = DEFAULT_DEADLINE_MS) -> Dict[str, Any]:
        """Five UTC fields ("0 9 * * 1-5"); `offset` "[+-]HH:MM" is a FIXED
        offset, not a time zone: nothing follows daylight saving."""
        return call("schedule.cron", _args(name=name, expression=expression, body=body, wake=wake, offset=offset,
                                           bounds=schedule._bounds(max_fires, expires_after_s)), deadline_ms)

    @staticmethod
    def after(name: str, seconds: int, body: str = "", wake: bool = False,
              deadline_ms: int = DEFAULT_DEADLINE_MS) -> Dict[str, Any]:
        """Once, 1..604800 seconds from now (the host's clock)."""
        return call("schedule.after", _args(name=name, after_s=seconds, body=body, wake=wake), deadline_ms)

    @staticmethod
    def list(deadline_ms: int = DEFAULT_DEADLINE_MS) -> List[Dict[str, Any]]:
        return call("schedule.list", None, deadline_ms)

    @staticmethod
    def cancel(name: str, deadline_ms: int = DEFAULT_DEADLINE_MS) -> None:
        call("schedule.cancel", {"name": name}, deadline_ms)

    @staticmethod
    def _bounds(max_fires: Optional[int], expires_after_s: Optional[int]) -> Optional[Dict[str, int]]:
        b = _args(max_fires=max_fires, expires_after_s=expires_after_s)
        return b or None


# ----------------------------------------------------------------- serving


@dataclass(frozen=True)
class Invocation:
    kind: str   # "tool" or "event"
    name: str


class Refused(Exception):
    """Raise from a serving handler to answer with a named refusal."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def serve(answer: Callable[[Invocation, Any, int], Any], ch: Optional[Channel] = None) -> None:
    """The serving boot shape: answers hook_calls one at a time until the
    service cancels or the channel closes. `answer(invocation, args,
    deadline_ms)` returns the value (or raises Refused). A second hook_call
    while one is open is answered "busy" at once; an exception in `answer` is
    answered "crashed" and the loop goes on; a kind other than tool/event is
    "bad_kind". Each invocation's token is installed before `answer` runs and
    cleared when it returns, before its answer is sent (the service revokes
    it when the answer arrives)."""
    ch = ch or channel()
    ch.token = b""  # the token file's token is not a working token here
    open_lock = threading.Lock()
    state = {"open": False}

    def run_one(hook: wire.HookCall) -> None:
        try:
            value = answer(Invocation(hook.hook, hook.name), hook.args, hook.deadline_ms)
            result: Any = wire.Ok(value)
        except Refused as r:
            result = wire.Refusal(r.code, r.message)
        except BaseException as e:  # noqa: B902 - a crash is an answer
            result = wire.Refusal("crashed", cut_front(f"{type(e).__name__}: {e}", 2000))
        # The handler is done: its token is cleared and the loop is free
        # before the answer leaves, so the service's next invocation (which
        # may follow the answer at once) is neither "busy" nor has its own
        # token cleared by this one. The service revokes the token when the
        # answer arrives.
        with open_lock:
            ch.token = b""
            state["open"] = False
        try:
            ch.send_hook_result(hook.id, result)
        except CapError:
            pass

    while True:
        ev = ch.hooks.get()
        if ev is None or isinstance(ev, wire.Cancel):
            return
        if isinstance(ev, wire.Invalid):
            ch.send_hook_result(ev.id, wire.Refusal("bad_request", ev.reason))
            continue
        if ev.hook not in ("tool", "event"):
            ch.send_hook_result(ev.id, wire.Refusal("bad_kind", f"unknown invocation kind {ev.hook!r}"))
            continue
        with open_lock:
            busy = state["open"]
            if not busy:
                state["open"] = True
                ch.token = ev.token  # install, then spawn
        if busy:
            ch.send_hook_result(ev.id, wire.Refusal("busy", "an invocation is already open"))
            continue
        threading.Thread(target=run_one, args=(ev,), daemon=True).start()
