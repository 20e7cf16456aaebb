"""Python client for the Airlock HTTP API (`airlock serve`).

    from airlock_client import AirlockClient

    client = AirlockClient("http://127.0.0.1:8420", token_file="/run/airlock/service-token")
    with client.environment("tenant-1", "run-1") as env:
        result = env.execute(["python3", "-c", "print(1)"])
        print(result.exit_code, result.stdout_text)

Standard library only; Python 3.11 or later. See docs/serve.md and
docs/openapi.yaml.
"""

from .client import AirlockClient, Environment
from .errors import (
    ERROR_CLASSES,
    AirlockConnectionError,
    AirlockError,
    ArtifactIntegrityError,
    BadRequestError,
    ConfigurationError,
    EnvironmentBusyError,
    EnvironmentGoneError,
    ExecutionRejectedError,
    ExecutionUnavailableError,
    InternalError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    SandboxEscapeSuspectedError,
    ToolValidationError,
    UnauthorizedError,
    ForbiddenError,
    WorkspaceEscapeError,
)
from .models import (
    ArtifactMetadata,
    CodeResult,
    DirEntry,
    EnvironmentHandle,
    ExecutionResult,
    FileChange,
    Job,
    JobStream,
    Lease,
    PathStatus,
    ResourceLimits,
    RunNote,
    Schedule,
    ScheduleFire,
)

__all__ = [
    "AirlockClient",
    "ArtifactMetadata",
    "CodeResult",
    "Environment",
    "EnvironmentHandle",
    "ExecutionResult",
    "FileChange",
    "DirEntry",
    "Job",
    "JobStream",
    "Lease",
    "PathStatus",
    "ResourceLimits",
    "RunNote",
    "Schedule",
    "ScheduleFire",
    "ERROR_CLASSES",
    "AirlockError",
    "AirlockConnectionError",
    "ArtifactIntegrityError",
    "BadRequestError",
    "ConfigurationError",
    "EnvironmentBusyError",
    "EnvironmentGoneError",
    "ExecutionRejectedError",
    "ExecutionUnavailableError",
    "InternalError",
    "MethodNotAllowedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "SandboxEscapeSuspectedError",
    "ToolValidationError",
    "UnauthorizedError",
    "ForbiddenError",
    "WorkspaceEscapeError",
]
