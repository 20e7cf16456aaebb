"""Typed values of the Airlock HTTP API (spec 000 "The ExecutionEnvironment
port"; JSON shapes in src/airlock/core/json.cpp and gateway/api/).

Bytes in JSON: a value that is valid UTF-8 is a JSON string, anything else
an object ``{"base64": "..."}``. The client decodes both:

- command output and file contents become ``bytes``;
- workspace paths and names become ``str``; a name that is not valid UTF-8
  is decoded with ``surrogateescape`` (as ``os.fsdecode`` does), so passing
  it back to the client names the same bytes.

Unknown JSON fields are ignored, so a newer service does not break an older
client.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
from typing import Any, Optional

# Kill reasons (the closed vocabulary of the spec).
KILL_REASONS = (
    "TIMEOUT",
    "MEMORY",
    "OUTPUT_LIMIT",
    "PIDS",
    "DISK",
    "CANCELLED",
    "EXPIRED",
    "SERVICE_SHUTDOWN",
)


def decode_bytes(value: Any) -> bytes:
    """A JSON bytes value (string or {"base64": ...}) as bytes."""
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        return base64.b64decode(value["base64"], validate=True)
    raise ValueError(f"not a bytes value: {value!r}")


def decode_name(value: Any) -> str:
    """A JSON path or name as str (surrogateescape for non-UTF-8 bytes)."""
    if isinstance(value, str):
        return value
    return decode_bytes(value).decode("utf-8", "surrogateescape")


def encode_bytes(data: bytes | str) -> Any:
    """bytes or str as the API's JSON bytes value."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def parse_timestamp(text: str) -> _dt.datetime:
    """RFC 3339 ("2026-11-30T05:56:24.565Z") as an aware UTC datetime."""
    return _dt.datetime.fromisoformat(text).astimezone(_dt.timezone.utc)


@dataclasses.dataclass(frozen=True)
class ResourceLimits:
    """Per-environment limits; ``None`` fields take the service's defaults.
    Values above the service's ceilings are refused (ExecutionRejectedError)."""

    cpu_millicores: Optional[int] = None  # 1000 = one CPU
    memory_bytes: Optional[int] = None
    pids_max: Optional[int] = None
    workspace_bytes: Optional[int] = None
    inodes_max: Optional[int] = None
    wall_clock_seconds: Optional[int] = None

    def to_json(self) -> dict[str, int]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass(frozen=True)
class EnvironmentHandle:
    """The opaque name of a live sandbox."""

    environment_id: str
    tenant_id: str
    run_id: str
    lease_epoch: int
    created_at: _dt.datetime
    expires_at: _dt.datetime
    image_digest: str = ""  # the image the environment runs (GET /v1/images)
    # The furthest extend() can move expires_at (created_at plus the service's
    # environment_hard_cap); every answer of the service carries it.
    max_expires_at: Optional[_dt.datetime] = None

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "EnvironmentHandle":
        return cls(
            environment_id=j["environment_id"],
            tenant_id=j["tenant_id"],
            run_id=j["run_id"],
            lease_epoch=int(j["lease_epoch"]),
            created_at=parse_timestamp(j["created_at"]),
            expires_at=parse_timestamp(j["expires_at"]),
            image_digest=j.get("image_digest", ""),
            max_expires_at=parse_timestamp(j["max_expires_at"]) if "max_expires_at" in j else None,
        )


@dataclasses.dataclass(frozen=True)
class FileChange:
    """One workspace file a command created, modified or deleted."""

    path: str  # relative to /workspace
    change: str  # "CREATED" | "MODIFIED" | "DELETED"
    size_bytes: int
    sha256: Optional[str]  # lowercase hex; None for DELETED (and unhashed huge files)

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "FileChange":
        return cls(
            path=decode_name(j["path"]),
            change=j["change"],
            size_bytes=int(j["size_bytes"]),
            sha256=j.get("sha256"),
        )


@dataclasses.dataclass(frozen=True)
class ExecutionResult:
    """What one command did. ``exit_code`` is None exactly when ``killed_by``
    names a kill reason; ``timed_out`` is ``killed_by == "TIMEOUT"``."""

    exit_code: Optional[int]
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    killed_by: Optional[str]
    files_changed: list[FileChange]
    files_changed_truncated: bool
    duration_ms: int
    peak_memory_bytes: Optional[int] = None
    cpu_time_ms: Optional[int] = None
    # The streams ("stdout", "stderr") a background process the command left
    # still held open when its main process had exited: the command then
    # ended 2 s later with the main process's exit_code, and that process was
    # killed. Empty for every other end.
    output_held_open: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the command exited 0 and was not killed."""
        return self.exit_code == 0 and self.killed_by is None

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "ExecutionResult":
        return cls(
            exit_code=j.get("exit_code"),
            stdout=decode_bytes(j.get("stdout")),
            stderr=decode_bytes(j.get("stderr")),
            stdout_truncated=bool(j.get("stdout_truncated", False)),
            stderr_truncated=bool(j.get("stderr_truncated", False)),
            timed_out=bool(j.get("timed_out", False)),
            killed_by=j.get("killed_by"),
            files_changed=[FileChange.from_json(f) for f in j.get("files_changed", [])],
            files_changed_truncated=bool(j.get("files_changed_truncated", False)),
            duration_ms=int(j.get("duration_ms", 0)),
            peak_memory_bytes=j.get("peak_memory_bytes"),
            cpu_time_ms=j.get("cpu_time_ms"),
            output_held_open=list(j.get("output_held_open") or []),
        )


@dataclasses.dataclass(frozen=True)
class DirEntry:
    """One entry of a workspace directory listing."""

    name: str
    type: str  # "file" | "directory" | "symlink" | "other"
    size_bytes: int

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "DirEntry":
        return cls(name=decode_name(j["name"]), type=j["type"], size_bytes=int(j["size_bytes"]))


def encode_name(path: bytes | str) -> Any:
    """A workspace path as the API's JSON bytes value (a str with surrogate
    escapes, as decode_name and os.fsdecode make, is sent as its bytes)."""
    if isinstance(path, str):
        return encode_bytes(path.encode("utf-8", "surrogateescape"))
    return encode_bytes(path)


@dataclasses.dataclass(frozen=True)
class PathStatus:
    """What GET .../stat answers for one workspace path (a symlink is
    reported as one, not followed)."""

    path: str
    type: str  # "file" | "directory" | "symlink" | "other"
    size_bytes: int  # a file's size, a symlink's target length, 0 otherwise
    mode: int  # permission bits, e.g. 0o644
    mtime: _dt.datetime  # aware, UTC, millisecond precision
    mtime_ns: int  # nanoseconds since the Unix epoch

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "PathStatus":
        return cls(
            path=decode_name(j["path"]),
            type=j["type"],
            size_bytes=int(j["size_bytes"]),
            mode=int(j["mode"]),
            mtime=parse_timestamp(j["mtime"]),
            mtime_ns=int(j["mtime_ns"]),
        )


@dataclasses.dataclass(frozen=True)
class Lease:
    """A tenant's run's current lease epoch as the service knows it."""

    tenant_id: str
    run_id: str
    lease_epoch: int

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "Lease":
        return cls(tenant_id=j["tenant_id"], run_id=j["run_id"], lease_epoch=int(j["lease_epoch"]))


@dataclasses.dataclass(frozen=True)
class RunNote:
    """One note of a run's blackboard (what code mode's notes.put keeps)."""

    key: str
    value: Any  # the JSON value the program put
    written_by: str  # the environment whose program last put it
    updated_at: _dt.datetime
    expires_at: _dt.datetime

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "RunNote":
        return cls(
            key=j["key"],
            value=j.get("value"),
            written_by=j["written_by"],
            updated_at=parse_timestamp(j["updated_at"]),
            expires_at=parse_timestamp(j["expires_at"]),
        )


@dataclasses.dataclass(frozen=True)
class ArtifactMetadata:
    """A stored artifact. ``filename`` is metadata only, never a path, and is
    unsanitized: sanitize it before using it as a file name on your disk."""

    artifact_id: str
    tenant_id: str
    run_id: Optional[str]  # None for an unclaimed upload
    origin: str  # "SANDBOX_EXPORT", "UPLOAD", ...
    filename: str
    media_type: str
    size_bytes: int
    sha256: str  # lowercase hex
    trust: str  # "EXTERNAL_UNTRUSTED" | "INTERNAL_TOOL"
    created_at: _dt.datetime
    expires_at: Optional[_dt.datetime]  # None: kept until deleted

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "ArtifactMetadata":
        expires = j.get("expires_at")
        return cls(
            artifact_id=j["artifact_id"],
            tenant_id=j["tenant_id"],
            run_id=j.get("run_id"),
            origin=j["origin"],
            filename=decode_name(j.get("filename", "")),
            media_type=j["media_type"],
            size_bytes=int(j["size_bytes"]),
            sha256=j["sha256"],
            trust=j["trust"],
            created_at=parse_timestamp(j["created_at"]),
            expires_at=parse_timestamp(expires) if expires else None,
        )


@dataclasses.dataclass(frozen=True)
class CodeResult:
    """The answer of POST /v1/environments/{environment_id}/code (code mode).

    ``outcome`` is the program's one outcome: ``{"completed": value}`` or
    ``{"errored": {"message", "details"}}``, or ``{"missing": true}`` when the
    program ended without sending one; ``audit`` holds one dict per
    capability call (capability, verdict, duration, sizes; never a token or
    an argument value)."""

    result: ExecutionResult
    outcome: dict[str, Any]
    audit: list[dict[str, Any]]  # the first 10,000 lines
    audit_dropped: int  # lines past them, counted

    @property
    def completed(self) -> bool:
        return "completed" in self.outcome

    @property
    def value(self) -> Any:
        """The completed value (None when the program errored)."""
        return self.outcome.get("completed")

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "CodeResult":
        return cls(
            result=ExecutionResult.from_json(j["result"]),
            outcome=dict(j.get("outcome", {})),
            audit=list(j.get("audit", [])),
            audit_dropped=int(j.get("audit_dropped", 0)),
        )


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A durable schedule a program created (schedule.*)."""

    name: str
    target: str
    timing: str  # "every" | "at" | "cron" | "after"
    when: str  # "every 3600s", "cron 0 9 * * 1-5 at +02:00", ...
    wake: bool
    body: bytes
    created_at_s: int
    next_fire_s: Optional[int]  # None: spent
    fires: int
    max_fires: int
    expires_at_s: int

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "Schedule":
        nxt = j.get("next_fire_s")
        return cls(
            name=j["name"],
            target=j["target"],
            timing=j["timing"],
            when=j["when"],
            wake=bool(j["wake"]),
            body=decode_bytes(j.get("body")),
            created_at_s=int(j["created_at_s"]),
            next_fire_s=int(nxt) if nxt is not None else None,
            fires=int(j["fires"]),
            max_fires=int(j["max_fires"]),
            expires_at_s=int(j["expires_at_s"]),
        )


@dataclasses.dataclass(frozen=True)
class ScheduleFire:
    """One occurrence in the fire outbox, until acknowledged. (creator, name,
    occurrence_s) identifies it; ``sequence`` orders the outbox."""

    sequence: int
    creator: str  # the environment whose program created the schedule
    name: str
    target: str
    wake: bool
    body: bytes
    occurrence_s: int  # the UTC second the occurrence fell on
    fired_at_s: int
    fire_number: int

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> "ScheduleFire":
        return cls(
            sequence=int(j["sequence"]),
            creator=j["creator"],
            name=j["name"],
            target=j["target"],
            wake=bool(j["wake"]),
            body=decode_bytes(j.get("body")),
            occurrence_s=int(j["occurrence_s"]),
            fired_at_s=int(j["fired_at_s"]),
            fire_number=int(j["fire_number"]),
        )


@dataclasses.dataclass(frozen=True)
class JobStream:
    """One stream of a polled job: the bytes after the caller's cursor (the
    64 KiB tail at most), the cursor for the next poll, and how many bytes
    left the tail unread (never lost: the spill has them)."""

    data: bytes
    cursor: int
    dropped: int

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")

    @classmethod
    def from_json(cls, j: Optional[dict[str, Any]]) -> "JobStream":
        if j is None:
            return cls(b"", 0, 0)
        return cls(decode_bytes(j.get("data")), int(j["cursor"]), int(j["dropped"]))


@dataclasses.dataclass(frozen=True)
class Job:
    """A background job of an environment (docs/serve.md "Jobs"), as a start,
    a poll or a listing answers it; pass it back to ``poll_job``,
    ``send_job_input`` and ``kill_job`` in place of its id (a poll then goes
    on from its cursors). ``spill`` is None while ``pending``; then
    ``{"stdout": S, "stderr": S}``, S a string saying why that stream was not
    stored or ``{artifact_id, media_type, sha256, size_bytes, truncated,
    dropped_bytes}``.

    ``job["stdout_cursor"]`` and the like read the answer's JSON as it came
    (``in`` and ``get`` too), as start_job's dict used to be read."""

    job_id: str
    argv: list[str]
    state: str  # "running" | "exited" | "killed"
    exit_code: Optional[int]
    signal: Optional[int]
    kill_reason: Optional[str]  # "requested" | "deadline" | "environment_destroyed"
    pending: bool
    wall_ms: int
    deadline: Optional[_dt.datetime]
    stdout: JobStream
    stderr: JobStream
    spill: Optional[dict[str, Any]]
    # A PTY job's terminal size {"rows": R, "columns": C}; None on pipes.
    pty: Optional[dict[str, int]] = None
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __contains__(self, key: object) -> bool:
        return key in self.raw

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    @classmethod
    def from_json(cls, j: dict[str, Any], argv: Optional[list[str]] = None) -> "Job":
        """A poll's or a listing's job; a start's answer (no state: the job
        has just started) with ``argv``, the command started."""
        out, err = j.get("stdout"), j.get("stderr")
        if out is None:  # a listing or a start: the cursors alone
            out = {"data": "", "cursor": j.get("stdout_cursor", 0), "dropped": 0}
            err = {"data": "", "cursor": j.get("stderr_cursor", 0), "dropped": 0}
        deadline = j.get("deadline")
        return cls(
            job_id=j["job_id"],
            argv=[decode_name(a) for a in j["argv"]] if "argv" in j else list(argv or []),
            state=j.get("state", "running"),
            exit_code=j.get("exit_code"),
            signal=j.get("signal"),
            kill_reason=j.get("kill_reason"),
            pending=bool(j.get("pending", True)),
            wall_ms=int(j.get("wall_ms", 0)),
            deadline=parse_timestamp(deadline) if deadline else None,
            stdout=JobStream.from_json(out),
            stderr=JobStream.from_json(err),
            spill=j.get("spill"),
            pty=j.get("pty"),
            raw=dict(j),
        )
