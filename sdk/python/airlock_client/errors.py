"""Exceptions raised by the Airlock client.

Every error the service returns is JSON ``{"error": {"code", "message"}}``
with a stable lower_snake_case code (src/airlock/gateway/api/api.h). The client
raises the subclass of :class:`AirlockError` registered for that code; a
code this client does not know becomes a plain :class:`AirlockError`, so
catching the base class always works.
"""

from __future__ import annotations

import json


class AirlockError(Exception):
    """An error reported by the service (or reaching it).

    Attributes: ``code`` (the API's stable code, e.g. ``"not_found"``),
    ``message`` (what failed, in words), ``status`` (the HTTP status, or
    ``None`` when no response arrived).
    """

    code = "unknown_error"

    def __init__(self, message: str, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.code}: {self.message}{where}"


class AirlockConnectionError(AirlockError):
    """No HTTP response: the service is unreachable or the request timed out.
    Retriable."""

    code = "connection_error"


class UnauthorizedError(AirlockError):
    """Missing or wrong bearer token (HTTP 401)."""

    code = "unauthorized"


class ForbiddenError(AirlockError):
    """A tenant key's call the key may not make (HTTP 403): an operator route
    (metrics, the fire outbox), or a listing, provision, upload or lease
    naming another tenant than the key's."""

    code = "forbidden"


class NotFoundError(AirlockError):
    """No such environment, file, artifact or route (HTTP 404)."""

    code = "not_found"


class MethodNotAllowedError(AirlockError):
    code = "method_not_allowed"


class BadRequestError(AirlockError):
    """The HTTP request itself was malformed (headers too large, bad framing),
    or its JSON body has a key the route does not take (the message names it,
    e.g. ``unknown key "netwrok" (did you mean "network"?)``)."""

    code = "bad_request"


class PayloadTooLargeError(AirlockError):
    """The request body exceeded the service's max_body_bytes (HTTP 413)."""

    code = "payload_too_large"


class ToolValidationError(AirlockError):
    """A request field is malformed (argv not an array of strings, unknown
    limit, bad identifier, ...). A caller bug; not retriable."""

    code = "tool_validation_error"


class WorkspaceEscapeError(AirlockError):
    """A workspace path was refused by containment (``..``, absolute path,
    symlink leaving the workspace, ...)."""

    code = "workspace_escape"


class ExecutionRejectedError(AirlockError):
    """The service refused the request (limits above the ceilings, stale
    lease epoch, another command running, destroyed handle). Not retriable."""

    code = "execution_rejected"


class EnvironmentBusyError(ExecutionRejectedError):
    """Another command is running in this environment (HTTP 409); retriable
    once it ends."""

    code = "environment_busy"


class EnvironmentGoneError(ExecutionRejectedError):
    """The environment was destroyed, expired or reaped (HTTP 410); provision
    a new one."""

    code = "environment_gone"


class ExecutionUnavailableError(AirlockError):
    """The service cannot run this now (capacity, shutdown, a kernel facility
    failed). Retriable."""

    code = "execution_unavailable"


class SandboxEscapeSuspectedError(AirlockError):
    """An invariant the service checks was violated; the environment is gone."""

    code = "sandbox_escape_suspected"


class ArtifactIntegrityError(AirlockError):
    code = "artifact_integrity_error"


class ConfigurationError(AirlockError):
    code = "configuration_error"


class InternalError(AirlockError):
    """A bug in the service (HTTP 500 ``internal``)."""

    code = "internal"


ERROR_CLASSES: dict[str, type[AirlockError]] = {
    cls.code: cls
    for cls in (
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        MethodNotAllowedError,
        BadRequestError,
        PayloadTooLargeError,
        ToolValidationError,
        WorkspaceEscapeError,
        ExecutionRejectedError,
        EnvironmentBusyError,
        EnvironmentGoneError,
        ExecutionUnavailableError,
        SandboxEscapeSuspectedError,
        ArtifactIntegrityError,
        ConfigurationError,
        InternalError,
    )
}

# When a response carries no JSON error body, the status decides.
_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    410: "environment_gone",
    413: "payload_too_large",
    431: "bad_request",
    500: "internal",
    503: "execution_unavailable",
}


def error_from_response(status: int, body: bytes) -> AirlockError:
    """The exception for an HTTP error response (never raises itself)."""
    code = None
    message = None
    try:
        payload = json.loads(body.decode("utf-8"))
        error = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(error, dict):
            if isinstance(error.get("code"), str):
                code = error["code"]
            if isinstance(error.get("message"), str):
                message = error["message"]
    except (UnicodeDecodeError, ValueError):
        pass
    if code is None:
        code = _STATUS_CODES.get(status, "unknown_error")
    if message is None:
        message = body.decode("utf-8", "replace")[:500] or f"HTTP {status}"
    cls = ERROR_CLASSES.get(code, AirlockError)
    return cls(message, code=code, status=status)
