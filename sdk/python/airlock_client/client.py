"""The Airlock HTTP client (standard library only: urllib.request, json).

One method per route of the service's route table
(src/airlock/gateway/api/routes.cpp); each method's docstring starts with its
route, "METHOD /path/{param}", as the table spells it (a test checks that
every route has one). Every method either
returns a typed value (models.py) or raises an AirlockError subclass
(errors.py) chosen by the API's stable error code; a transport failure is
AirlockConnectionError. The client keeps no state besides its settings and
is safe to share between threads (each call opens its own connection).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterator, Mapping, Optional, Sequence

from .errors import AirlockConnectionError, AirlockError, ArtifactIntegrityError, error_from_response
from .models import (
    ArtifactMetadata,
    CodeResult,
    DirEntry,
    EnvironmentHandle,
    ExecutionResult,
    Job,
    Lease,
    PathStatus,
    ResourceLimits,
    RunNote,
    Schedule,
    ScheduleFire,
    encode_bytes,
    encode_name,
)

DEFAULT_URL = "http://127.0.0.1:8420"
# The longest a command may run by default (the run_command tool's declared
# timeout), plus room for provisioning the answer.
_DEFAULT_COMMAND_SECONDS = 300
_EXECUTE_SLACK_SECONDS = 30

PathLike = str | bytes


def _quote(value: PathLike) -> str:
    """Percent-encodes a query value completely (also '/', '&', '+')."""
    if isinstance(value, bytes):
        return urllib.parse.quote(value, safe="")
    return urllib.parse.quote(value, safe="", encoding="utf-8", errors="surrogateescape")


def _read_token_file(path: str) -> str:
    with open(path, "r", encoding="utf-8") as f:
        return f.read().strip()


class AirlockClient:
    """A client for one `airlock serve`.

    ``base_url``: the service, e.g. ``http://127.0.0.1:8420`` (default: the
    AIRLOCK_URL variable, else that address).
    The bearer token, first found wins: ``token``; the file ``token_file``;
    the AIRLOCK_SERVICE_TOKEN variable; the file named by AIRLOCK_TOKEN_FILE.
    It is the service token (the operator's, for any tenant) or a tenant key
    (``alk_...``, for its own tenant only: another tenant's objects are
    NotFoundError, operator routes and listings naming another tenant
    ForbiddenError); both are passed the same way.
    In dev auth mode the service writes its token to
    ``<state_dir>/service-token``; pass that path as ``token_file``.
    ``timeout``: seconds to wait for any response except execute, which
    waits for the command's own timeout plus 30 s.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        timeout: float = 60.0,
    ):
        self.base_url = (base_url or os.environ.get("AIRLOCK_URL") or DEFAULT_URL).rstrip("/")
        if token is None and token_file is not None:
            token = _read_token_file(token_file)
        if token is None:
            token = os.environ.get("AIRLOCK_SERVICE_TOKEN") or None
        if token is None and os.environ.get("AIRLOCK_TOKEN_FILE"):
            token = _read_token_file(os.environ["AIRLOCK_TOKEN_FILE"])
        self._token = token
        self.timeout = timeout
        # No proxies: the service is usually on loopback, and a proxy from
        # the environment must not see the bearer token.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __repr__(self) -> str:  # never shows the token
        return f"AirlockClient({self.base_url!r})"

    # --- transport -------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, PathLike]] = None,
        json_body: Any = None,
        data: Optional[bytes] = None,
        timeout: Optional[float] = None,
    ) -> tuple[int, bytes, Mapping[str, str]]:
        url = self.base_url + path
        if query:
            url += "?" + "&".join(f"{k}={_quote(v)}" for k, v in query.items())
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        if json_body is not None:
            data = json.dumps(json_body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif data is not None:
            headers["Content-Type"] = "application/octet-stream"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(request, timeout=timeout or self.timeout) as response:
                return response.status, response.read(), response.headers
        except urllib.error.HTTPError as e:
            try:
                body = e.read()
            finally:
                e.close()
            raise error_from_response(e.code, body) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise AirlockConnectionError(f"{method} {path}: {reason}") from None

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        status, body, _ = self._request(method, path, **kwargs)
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise AirlockError(f"{method} {path}: the response is not JSON", status=status) from None

    @staticmethod
    def _env_path(environment_id: str, suffix: str = "") -> str:
        return "/v1/environments/" + urllib.parse.quote(environment_id, safe="") + suffix

    # --- service ---------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """GET /healthz (no token needed): ``{"status": "ok"}``."""
        return self._json("GET", "/healthz")

    def metrics_text(self) -> str:
        """GET /metrics: the Prometheus text exposition."""
        _, body, _ = self._request("GET", "/metrics")
        return body.decode("utf-8")

    # --- environments ----------------------------------------------------

    def provision(
        self,
        tenant_id: str,
        run_id: str,
        lease_epoch: int = 0,
        limits: Optional[ResourceLimits | Mapping[str, int]] = None,
        environment: Optional[Mapping[str, str]] = None,
        network: bool = False,
        image: Optional[str] = None,
    ) -> EnvironmentHandle:
        """POST /v1/environments: a new sandbox for (tenant, run, epoch).

        ``image``: the name, configured reference or digest of an image the
        service runs (see images()); None is the service's default.
        ExecutionRejectedError for one it does not run.

        ``limits``: a ResourceLimits or a dict of its fields (unset fields
        take the service's defaults). ``environment``: extra variables for
        commands; credential names are refused (ToolValidationError).
        ``network``: reach the destinations of the service's egress policy
        through its proxy; ExecutionRejectedError when the policy allows none.
        An epoch older than the run's current one is ExecutionRejectedError.
        """
        body: dict[str, Any] = {"tenant_id": tenant_id, "run_id": run_id, "lease_epoch": lease_epoch}
        if network:
            body["network"] = True
        if image is not None:
            body["image"] = image
        if limits is not None:
            body["limits"] = limits.to_json() if isinstance(limits, ResourceLimits) else dict(limits)
        if environment is not None:
            body["environment"] = dict(environment)
        return EnvironmentHandle.from_json(self._json("POST", "/v1/environments", json_body=body))

    def images(self) -> list[dict[str, Any]]:
        """GET /v1/images: the images the service runs, the default first;
        each {"name", "reference", "digest", "default"}."""
        return list(self._json("GET", "/v1/images").get("images", []))

    def destroy(self, environment_id: str) -> None:
        """DELETE /v1/environments/{environment_id}; idempotent (an unknown id is fine)."""
        self._request("DELETE", self._env_path(environment_id))

    def get(self, environment_id: str) -> EnvironmentHandle:
        """GET /v1/environments/{environment_id}; NotFoundError when it is not live."""
        return EnvironmentHandle.from_json(self._json("GET", self._env_path(environment_id)))

    def extend(self, environment_id: str, seconds: int) -> EnvironmentHandle:
        """POST /v1/environments/{environment_id}/extend: the environment lives at
        least ``seconds`` more from now, but never past its created_at plus the
        service's environment_hard_cap (a longer ask is clamped to that; the
        handle's ``max_expires_at`` says where it is) and never shorter than it
        already would. Returns the handle with the new expires_at.
        ToolValidationError for seconds outside 1..environment_hard_cap;
        NotFoundError when it is not live."""
        body = {"seconds": int(seconds)}
        return EnvironmentHandle.from_json(
            self._json("POST", self._env_path(environment_id, "/extend"), json_body=body)
        )

    def list_environments(self) -> list[EnvironmentHandle]:
        """GET /v1/environments: every live environment of this service."""
        j = self._json("GET", "/v1/environments")
        return [EnvironmentHandle.from_json(e) for e in j.get("environments", [])]

    def _run_limits(
        self,
        body: dict[str, Any],
        working_directory: Optional[str],
        timeout_seconds: Optional[int],
        maximum_output_bytes: Optional[int],
    ) -> float:
        """Adds the limits an execute or code request shares to ``body`` and
        returns how long to wait for the answer (the command's timeout plus
        slack, at least the client's own timeout)."""
        if working_directory is not None:
            body["working_directory"] = working_directory
        if timeout_seconds is not None:
            body["timeout_seconds"] = timeout_seconds
        if maximum_output_bytes is not None:
            body["maximum_output_bytes"] = maximum_output_bytes
        seconds = timeout_seconds if isinstance(timeout_seconds, int) else _DEFAULT_COMMAND_SECONDS
        return max(self.timeout, seconds + _EXECUTE_SLACK_SECONDS)

    def execute(
        self,
        environment_id: str,
        argv: Sequence[str],
        working_directory: Optional[str] = None,
        timeout_seconds: Optional[int] = None,
        maximum_output_bytes: Optional[int] = None,
        stdin: Optional[bytes | str] = None,
        execution_id: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
    ) -> ExecutionResult:
        """POST /v1/environments/{environment_id}/execute: runs argv (an
        argument vector, never a shell string) and returns its
        ExecutionResult. A command that fails or is killed is a result, not
        an exception. ``execution_id`` names the command for
        cancel_execution (from another thread). ``env`` sets variables for
        this command only, over the environment's own; a credential name
        or one Airlock sets itself (PATH, HOME, ...) is refused with
        ToolValidationError naming it."""
        if isinstance(argv, (str, bytes)):
            raise TypeError('argv must be a list of strings like ["python3", "-c", "print(1)"], not a string')
        body: dict[str, Any] = {"argv": list(argv)}
        if stdin is not None:
            body["stdin"] = encode_bytes(stdin)
        if execution_id is not None:
            body["execution_id"] = execution_id
        if env is not None:
            body["env"] = dict(env)
        wait = self._run_limits(body, working_directory, timeout_seconds, maximum_output_bytes)
        j = self._json("POST", self._env_path(environment_id, "/execute"), json_body=body, timeout=wait)
        return ExecutionResult.from_json(j)

    def cancel_execution(self, environment_id: str, execution_id: str) -> None:
        """POST /v1/environments/{environment_id}/executions/{execution_id}/cancel:
        tells the running command that execute started with this
        ``execution_id`` to end; that execute returns its result with
        killed_by CANCELLED and the output written so far. Returns at once,
        without waiting for the end; NotFoundError when no such command
        runs."""
        suffix = "/executions/" + urllib.parse.quote(execution_id, safe="") + "/cancel"
        self._request("POST", self._env_path(environment_id, suffix), data=b"")

    # --- code mode -------------------------------------------------------

    def run_code(
        self,
        environment_id: str,
        program: str,
        capabilities: Optional[Sequence[str]] = None,
        working_directory: Optional[str] = None,
        timeout_seconds: Optional[int] = None,
        maximum_output_bytes: Optional[int] = None,
    ) -> CodeResult:
        """POST /v1/environments/{environment_id}/code: runs a Python program once in the
        environment (it defines ``main()``; see docs/capabilities.md). The
        program reaches the world only through capability calls;
        ``capabilities`` narrows which it may call ("proc.run", "fs.*", "*").
        One program at a time per environment (ExecutionRejectedError)."""
        if not isinstance(program, str):
            raise TypeError("program must be Python source text (str)")
        body: dict[str, Any] = {"program": program}
        if capabilities is not None:
            if isinstance(capabilities, str):
                raise TypeError('capabilities must be a list like ["proc.run", "fs.*"], not a string')
            body["capabilities"] = list(capabilities)
        wait = self._run_limits(body, working_directory, timeout_seconds, maximum_output_bytes)
        j = self._json("POST", self._env_path(environment_id, "/code"), json_body=body, timeout=wait)
        return CodeResult.from_json(j)

    def list_schedules(self, environment_id: str) -> list[Schedule]:
        """GET /v1/environments/{environment_id}/schedules: the schedules the
        environment's programs created (they outlive the environment)."""
        j = self._json("GET", self._env_path(environment_id, "/schedules"))
        return [Schedule.from_json(s) for s in j.get("schedules", [])]

    def cancel_schedule(self, environment_id: str, name: str) -> None:
        """DELETE /v1/environments/{environment_id}/schedules/{name} (NotFoundError when
        there is none)."""
        path = self._env_path(environment_id, "/schedules/" + urllib.parse.quote(name, safe=""))
        self._request("DELETE", path)

    def schedule_fires(self, after: int = 0, limit: int = 100) -> list[ScheduleFire]:
        """GET /v1/schedule-fires: occurrences moved to the outbox and not yet
        acknowledged, with sequence > ``after``, oldest first."""
        j = self._json("GET", "/v1/schedule-fires", query={"after": str(after), "limit": str(limit)})
        return [ScheduleFire.from_json(f) for f in j.get("fires", [])]

    def acknowledge_fires(self, through: int) -> int:
        """POST /v1/schedule-fires/ack: removes every fire with sequence <=
        ``through`` from the outbox; returns how many."""
        j = self._json("POST", "/v1/schedule-fires/ack", json_body={"through": through})
        return int(j["acknowledged"])

    # --- jobs ------------------------------------------------------------

    def _job_path(self, environment_id: str, job: "str | Job" = "", suffix: str = "") -> str:
        job_id = job.job_id if isinstance(job, Job) else job
        tail = "/jobs" + ("/" + urllib.parse.quote(job_id, safe="") if job_id else "")
        return self._env_path(environment_id, tail + suffix)

    def start_job(
        self,
        environment_id: str,
        argv: Sequence[str],
        working_directory: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        wall_ms: Optional[int] = None,
        pty: Optional[Mapping[str, int]] = None,
    ) -> Job:
        """POST /v1/environments/{environment_id}/jobs: starts ``argv`` as a
        background job that outlives this call (and any program); code mode's
        job.* see the same jobs. ``wall_ms``: its wall-clock budget (absent: 30
        minutes; 0: the environment's whole life), clamped to the
        environment's expiry. ``pty={"rows": R, "columns": C}``: run it on a
        pseudo-terminal of that size (a PTY job: stderr merged into stdout,
        input echoed, "\\r\\n" line ends; ``send_job_input(last=True)``
        types ^D; ``resize_job`` changes the size). Returns the ``Job`` as
        just started (running, pending, both cursors 0, its wall_ms and
        deadline), to pass to poll_job, send_job_input, kill_job and
        resize_job; ``job["job_id"]`` and the other keys of the answer
        (stdout_cursor, stderr_cursor, wall_ms, deadline) read as they came."""
        if isinstance(argv, (str, bytes)):
            raise TypeError('argv must be a list like ["python3", "-m", "http.server"], not a string')
        body: dict[str, Any] = {"argv": list(argv)}
        if working_directory is not None:
            body["working_directory"] = working_directory
        if env is not None:
            body["env"] = dict(env)
        if wall_ms is not None:
            body["wall_ms"] = int(wall_ms)
        if pty is not None:
            body["pty"] = dict(pty)
        started = self._json("POST", self._job_path(environment_id), json_body=body)
        return Job.from_json(started, argv=list(argv))

    def list_jobs(self, environment_id: str) -> list[Job]:
        """GET /v1/environments/{environment_id}/jobs: every job of the
        environment, oldest first (each with its cursors, no output)."""
        j = self._json("GET", self._job_path(environment_id))
        return [Job.from_json(x) for x in j.get("jobs", [])]

    def poll_job(
        self,
        environment_id: str,
        job: "str | Job",
        stdout_cursor: Optional[int] = None,
        stderr_cursor: Optional[int] = None,
        wait_ms: int = 0,
    ) -> Job:
        """GET /v1/environments/{environment_id}/jobs/{job_id}: the job's state and its
        output after the cursors. ``job`` is a job id or a ``Job`` (a start's,
        a poll's or a listing's answer); a cursor not given is that Job's (so
        ``job = env.poll_job(job)`` reads on from where the last answer
        ended), or 0 with an id. ``wait_ms`` (at most 60000) waits until a
        cursor moves or the job settles."""
        if stdout_cursor is None:
            stdout_cursor = job.stdout.cursor if isinstance(job, Job) else 0
        if stderr_cursor is None:
            stderr_cursor = job.stderr.cursor if isinstance(job, Job) else 0
        query = {"stdout_cursor": str(stdout_cursor), "stderr_cursor": str(stderr_cursor),
                 "wait_ms": str(wait_ms)}
        timeout = max(self.timeout, wait_ms / 1000.0 + 10.0)
        return Job.from_json(self._json("GET", self._job_path(environment_id, job), query=query,
                                        timeout=timeout))

    def send_job_input(self, environment_id: str, job: "str | Job", data: bytes | str = b"",
                       last: bool = False) -> None:
        """POST /v1/environments/{environment_id}/jobs/{job_id}/input: writes ``data`` to the
        job's stdin; ``last`` then closes it. ExecutionRejectedError once its
        input is closed."""
        body = {"data": encode_bytes(data), "last": bool(last)}
        self._request("POST", self._job_path(environment_id, job, "/input"), json_body=body)

    def kill_job(self, environment_id: str, job: "str | Job") -> None:
        """POST /v1/environments/{environment_id}/jobs/{job_id}/kill: SIGKILL to the job's
        process group (its state becomes "killed"). Returns at once."""
        self._request("POST", self._job_path(environment_id, job, "/kill"), data=b"")

    def resize_job(self, environment_id: str, job: "str | Job", rows: int, columns: int) -> None:
        """POST /v1/environments/{environment_id}/jobs/{job_id}/resize: sets a PTY
        job's terminal size (its program gets SIGWINCH). Refused for a
        job started without ``pty`` or a size outside 1..1000 (ToolValidationError);
        ExecutionRejectedError once the job has ended."""
        body = {"rows": int(rows), "columns": int(columns)}
        self._request("POST", self._job_path(environment_id, job, "/resize"), json_body=body)

    # --- workspace -------------------------------------------------------

    def read_file(self, environment_id: str, path: PathLike) -> bytes:
        """GET /v1/environments/{environment_id}/files?path=P: the file's bytes."""
        _, body, _ = self._request("GET", self._env_path(environment_id, "/files"), query={"path": path})
        return body

    def write_file(self, environment_id: str, path: PathLike, data: bytes | str) -> None:
        """PUT /v1/environments/{environment_id}/files?path=P: creates or replaces the file
        (a str is written as UTF-8)."""
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        self._request("PUT", self._env_path(environment_id, "/files"), query={"path": path}, data=payload)

    def list_dir(self, environment_id: str, path: PathLike = ".") -> list[DirEntry]:
        """GET /v1/environments/{environment_id}/list?path=P: the directory's entries."""
        j = self._json("GET", self._env_path(environment_id, "/list"), query={"path": path})
        return [DirEntry.from_json(e) for e in j.get("entries", [])]

    def provenance(self, environment_id: str, path: PathLike) -> str:
        """GET /v1/environments/{environment_id}/provenance?path=P: who last wrote the
        file: "TOOL_WRITTEN", "SANDBOX_WRITTEN" or "UNKNOWN"."""
        j = self._json("GET", self._env_path(environment_id, "/provenance"), query={"path": path})
        return j["provenance"]

    def remove_path(self, environment_id: str, path: PathLike, recursive: bool = False) -> None:
        """DELETE /v1/environments/{environment_id}/files?path=P&recursive=1: removes a file,
        a symlink (the link itself) or a directory. A directory with entries needs
        ``recursive=True`` (else ExecutionRejectedError); the root is never removed
        (ToolValidationError); a missing path is NotFoundError."""
        query: dict[str, PathLike] = {"path": path}
        if recursive:
            query["recursive"] = "1"
        self._request("DELETE", self._env_path(environment_id, "/files"), query=query)

    def rename_path(self, environment_id: str, source: PathLike, target: PathLike,
                    replace: bool = False) -> None:
        """POST /v1/environments/{environment_id}/files/rename: moves ``source`` to
        ``target`` (whose directory must exist). An existing ``target`` is refused
        (ExecutionRejectedError) unless ``replace=True``."""
        body: dict[str, Any] = {"from": encode_name(source), "to": encode_name(target)}
        if replace:
            body["replace"] = True
        self._request("POST", self._env_path(environment_id, "/files/rename"), json_body=body)

    def stat_path(self, environment_id: str, path: PathLike) -> PathStatus:
        """GET /v1/environments/{environment_id}/stat?path=P: the path's type, size,
        permission bits and mtime (a symlink reported as one, not followed)."""
        j = self._json("GET", self._env_path(environment_id, "/stat"), query={"path": path})
        return PathStatus.from_json(j)

    def make_dir(self, environment_id: str, path: PathLike) -> None:
        """POST /v1/environments/{environment_id}/directories: creates the directory and
        its missing parents (an existing directory is no error)."""
        self._request("POST", self._env_path(environment_id, "/directories"),
                      json_body={"path": encode_name(path)})

    def download_archive(self, environment_id: str, path: PathLike = ".") -> bytes:
        """GET /v1/environments/{environment_id}/archive?path=P: the directory P as a tar
        (files and directories, named relative to P; symlinks and special files left
        out). The service streams it; this method returns it whole. A transfer cut
        short (a file changed while it was read) raises AirlockConnectionError."""
        _, body, _ = self._request("GET", self._env_path(environment_id, "/archive"),
                                   query={"path": path})
        return body

    def upload_archive(self, environment_id: str, path: PathLike, data: bytes) -> None:
        """PUT /v1/environments/{environment_id}/archive?path=P: extracts a tar (plain or
        compressed) or zip into the directory P (created when missing). A member that
        would leave the workspace, a link, a device or a FIFO refuses the whole archive
        (ToolValidationError naming it) before anything is written; files get provenance
        UNKNOWN. ``data`` is sent whole, within the service's max_body_bytes."""
        self._request("PUT", self._env_path(environment_id, "/archive"), query={"path": path},
                      data=bytes(data))

    # --- artifacts -------------------------------------------------------

    @staticmethod
    def _artifact_path(artifact_id: str, suffix: str = "") -> str:
        return "/v1/artifacts/" + urllib.parse.quote(artifact_id, safe="") + suffix

    def export_artifact(
        self,
        environment_id: str,
        path: str,
        filename: Optional[str] = None,
        media_type: Optional[str] = None,
    ) -> ArtifactMetadata:
        """POST /v1/environments/{environment_id}/artifacts: copies a workspace file out
        as an artifact of the environment's tenant and run (labelled
        EXTERNAL_UNTRUSTED). ``filename`` defaults to the path's last part."""
        body: dict[str, Any] = {"path": path}
        if filename is not None:
            body["filename"] = filename
        if media_type is not None:
            body["media_type"] = media_type
        j = self._json("POST", self._env_path(environment_id, "/artifacts"), json_body=body)
        return ArtifactMetadata.from_json(j)

    def upload_artifact(
        self,
        tenant_id: str,
        data: bytes | str,
        run_id: Optional[str] = None,
        filename: Optional[str] = None,
        media_type: Optional[str] = None,
    ) -> ArtifactMetadata:
        """POST /v1/artifacts: stores ``data`` as an artifact of the tenant
        (without run_id it is an unclaimed upload, kept 24 hours)."""
        query: dict[str, PathLike] = {"tenant_id": tenant_id}
        if run_id is not None:
            query["run_id"] = run_id
        if filename is not None:
            query["filename"] = filename
        if media_type is not None:
            query["media_type"] = media_type
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return ArtifactMetadata.from_json(self._json("POST", "/v1/artifacts", query=query, data=payload))

    def get_artifact(self, artifact_id: str, tenant_id: str) -> ArtifactMetadata:
        """GET /v1/artifacts/{artifact_id}: the metadata (another tenant's
        artifact is NotFoundError)."""
        j = self._json("GET", self._artifact_path(artifact_id), query={"tenant_id": tenant_id})
        return ArtifactMetadata.from_json(j)

    def download_artifact(self, artifact_id: str, tenant_id: str) -> bytes:
        """GET /v1/artifacts/{artifact_id}/content: the bytes, checked
        against the SHA-256 the service sends (ArtifactIntegrityError when
        they differ)."""
        _, body, headers = self._request(
            "GET", self._artifact_path(artifact_id, "/content"), query={"tenant_id": tenant_id}
        )
        expected = headers.get("X-Airlock-Sha256")
        if expected and hashlib.sha256(body).hexdigest() != expected.lower():
            raise ArtifactIntegrityError(f"artifact {artifact_id}: the downloaded bytes do not match their sha256")
        return body

    def delete_artifact(self, artifact_id: str, tenant_id: str) -> None:
        """DELETE /v1/artifacts/{artifact_id}."""
        self._request("DELETE", self._artifact_path(artifact_id), query={"tenant_id": tenant_id})

    # --- tools -----------------------------------------------------------

    def list_tools(self) -> list[dict[str, Any]]:
        """GET /v1/tools: the model-facing tools, each {"name", "title",
        "description", "input_schema", "output_schema", "read_only",
        "idempotent"}."""
        return list(self._json("GET", "/v1/tools").get("tools", []))

    def call_tool(
        self,
        name: str,
        environment_id: str,
        arguments: Optional[Mapping[str, Any]] = None,
        tenant_id: Optional[str] = None,
    ) -> Any:
        """POST /v1/tools/{name}: calls one tool (e.g. "workspace_read_text")
        with the model's ``arguments`` in the environment's tenant and run,
        and returns its result. A refusal raises the error of its code (a
        bad argument: ToolValidationError). With ``tenant_id`` the call is
        that tenant's: another tenant's environment is NotFoundError."""
        body: dict[str, Any] = {"environment_id": environment_id, "arguments": dict(arguments or {})}
        if tenant_id is not None:
            body["tenant_id"] = tenant_id
        seconds = body["arguments"].get("timeout_seconds")
        seconds = seconds if isinstance(seconds, int) else _DEFAULT_COMMAND_SECONDS
        wait = max(self.timeout, seconds + _EXECUTE_SLACK_SECONDS)
        path = "/v1/tools/" + urllib.parse.quote(name, safe="")
        return self._json("POST", path, json_body=body, timeout=wait)["result"]

    # --- leases ----------------------------------------------------------

    def renew_lease(self, tenant_id: str, run_id: str, epoch: int) -> Lease:
        """PUT /v1/runs/{run_id}/lease: reports the current epoch of the
        tenant's run (a lease is per tenant and run: another tenant's run of
        the same id is another lease). Environments of that run with an
        older epoch are destroyed by the reaper. Epochs only move forward:
        the returned lease holds the service's current epoch, which may be
        higher than ``epoch``."""
        path = "/v1/runs/" + urllib.parse.quote(run_id, safe="") + "/lease"
        body = {"tenant_id": tenant_id, "lease_epoch": epoch}
        return Lease.from_json(self._json("PUT", path, json_body=body))

    # --- notes -----------------------------------------------------------

    def list_notes(self, tenant_id: str, run_id: str, prefix: str = "") -> list[RunNote]:
        """GET /v1/runs/{run_id}/notes: the notes code mode's programs of the
        tenant's run put (notes.put), in key order; ``prefix`` keeps the keys
        that start with it. A run without notes gives []."""
        query: dict[str, PathLike] = {"tenant_id": tenant_id}
        if prefix:
            query["prefix"] = prefix
        path = "/v1/runs/" + urllib.parse.quote(run_id, safe="") + "/notes"
        return [RunNote.from_json(n) for n in self._json("GET", path, query=query).get("notes", [])]

    def list_run_artifacts(self, tenant_id: str, run_id: str, limit: int = 100) -> list[ArtifactMetadata]:
        """GET /v1/runs/{run_id}/artifacts: the artifacts of the tenant's run
        (exports, uploads, jobs' spilled output), newest first, at most
        ``limit`` (1-1000); they outlive the environment that made them.
        Another tenant's run of the same id lists nothing here."""
        path = "/v1/runs/" + urllib.parse.quote(run_id, safe="") + "/artifacts"
        j = self._json("GET", path, query={"tenant_id": tenant_id, "limit": str(int(limit))})
        return [ArtifactMetadata.from_json(a) for a in j.get("artifacts", [])]

    def get_note(self, tenant_id: str, run_id: str, key: str) -> RunNote:
        """GET /v1/runs/{run_id}/notes/{key}: one note of the tenant's run;
        NotFoundError when the run has none of that key."""
        path = "/v1/runs/" + urllib.parse.quote(run_id, safe="") + "/notes/" + urllib.parse.quote(key, safe="")
        return RunNote.from_json(self._json("GET", path, query={"tenant_id": tenant_id}))

    # --- convenience -----------------------------------------------------

    @contextlib.contextmanager
    def environment(
        self,
        tenant_id: str,
        run_id: str,
        lease_epoch: int = 0,
        limits: Optional[ResourceLimits | Mapping[str, int]] = None,
        environment: Optional[Mapping[str, str]] = None,
        network: bool = False,
        image: Optional[str] = None,
    ) -> Iterator["Environment"]:
        """Provisions an environment and destroys it when the block ends,
        also when the block raises::

            with client.environment("tenant-1", "run-1") as env:
                print(env.execute(["python3", "-c", "print(1)"]).stdout_text)
        """
        handle = self.provision(tenant_id, run_id, lease_epoch, limits, environment, network, image)
        try:
            yield Environment(self, handle)
        finally:
            self.destroy(handle.environment_id)


class Environment:
    """A provisioned environment bound to its client (from
    AirlockClient.environment()); the methods are the client's, without the
    id argument."""

    def __init__(self, client: AirlockClient, handle: EnvironmentHandle):
        self.client = client
        self.handle = handle

    @property
    def id(self) -> str:
        return self.handle.environment_id

    def __repr__(self) -> str:
        return f"Environment({self.id!r})"

    def execute(self, argv: Sequence[str], **kwargs: Any) -> ExecutionResult:
        return self.client.execute(self.id, argv, **kwargs)

    def cancel_execution(self, execution_id: str) -> None:
        self.client.cancel_execution(self.id, execution_id)

    def extend(self, seconds: int) -> EnvironmentHandle:
        self.handle = self.client.extend(self.id, seconds)
        return self.handle

    def call_tool(self, name: str, arguments: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> Any:
        return self.client.call_tool(name, self.id, arguments, **kwargs)

    def run_code(self, program: str, **kwargs: Any) -> CodeResult:
        return self.client.run_code(self.id, program, **kwargs)

    def start_job(self, argv: Sequence[str], **kwargs: Any) -> Job:
        return self.client.start_job(self.id, argv, **kwargs)

    def list_jobs(self) -> list[Job]:
        return self.client.list_jobs(self.id)

    def poll_job(self, job: "str | Job", **kwargs: Any) -> Job:
        return self.client.poll_job(self.id, job, **kwargs)

    def send_job_input(self, job: "str | Job", data: bytes | str = b"", last: bool = False) -> None:
        self.client.send_job_input(self.id, job, data, last)

    def kill_job(self, job: "str | Job") -> None:
        self.client.kill_job(self.id, job)

    def resize_job(self, job: "str | Job", rows: int, columns: int) -> None:
        self.client.resize_job(self.id, job, rows, columns)

    def list_schedules(self) -> list[Schedule]:
        return self.client.list_schedules(self.id)

    def cancel_schedule(self, name: str) -> None:
        self.client.cancel_schedule(self.id, name)

    def read_file(self, path: PathLike) -> bytes:
        return self.client.read_file(self.id, path)

    def write_file(self, path: PathLike, data: bytes | str) -> None:
        self.client.write_file(self.id, path, data)

    def list_dir(self, path: PathLike = ".") -> list[DirEntry]:
        return self.client.list_dir(self.id, path)

    def provenance(self, path: PathLike) -> str:
        return self.client.provenance(self.id, path)

    def remove_path(self, path: PathLike, recursive: bool = False) -> None:
        self.client.remove_path(self.id, path, recursive)

    def rename_path(self, source: PathLike, target: PathLike, replace: bool = False) -> None:
        self.client.rename_path(self.id, source, target, replace)

    def stat_path(self, path: PathLike) -> PathStatus:
        return self.client.stat_path(self.id, path)

    def make_dir(self, path: PathLike) -> None:
        self.client.make_dir(self.id, path)

    def download_archive(self, path: PathLike = ".") -> bytes:
        return self.client.download_archive(self.id, path)

    def upload_archive(self, path: PathLike, data: bytes) -> None:
        self.client.upload_archive(self.id, path, data)

    def export_artifact(self, path: str, **kwargs: Any) -> ArtifactMetadata:
        return self.client.export_artifact(self.id, path, **kwargs)

    def refresh(self) -> EnvironmentHandle:
        self.handle = self.client.get(self.id)
        return self.handle

    def destroy(self) -> None:
        self.client.destroy(self.id)
