"""Switchyard's Python SDK: sandboxes (sessions of the engine) behind E2B-like verbs, sync and async.

    from switchyard import Sandbox
    with Sandbox.create(template="data-science") as sbx:
        ex = sbx.run_code("1 + 1")

`Switchyard` / `AsyncSwitchyard` reach every endpoint of the REST API; errors are in `switchyard.errors`.
"""

from ._core import DEFAULT_URL
from .async_client import AsyncEventStream, AsyncSwitchyard
from .async_sandbox import AsyncCommandHandle, AsyncSandbox
from .client import EventStream, Switchyard
from .errors import (
    ActionFailedError,
    AuthenticationError,
    ConflictError,
    ConnectionFailedError,
    DeniedError,
    FieldError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    RangeNotSatisfiableError,
    RateLimitError,
    ServiceUnavailableError,
    SwitchyardError,
    UnprocessableError,
    WaitTimeoutError,
)
from .models import (
    Action,
    ActionPage,
    ArchiveInfo,
    Checkpoint,
    CheckpointRestore,
    CommandResult,
    EntryInfo,
    Execution,
    ExecutionError,
    Kernel,
    Logs,
    Plan,
    ProcessInfo,
    Result,
    Session,
    SessionEvent,
    Template,
    Terminal,
    WriteInfo,
)
from .sandbox import CommandHandle, Sandbox

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL",
    "Action",
    "ActionFailedError",
    "ActionPage",
    "ArchiveInfo",
    "AsyncCommandHandle",
    "AsyncEventStream",
    "AsyncSandbox",
    "AsyncSwitchyard",
    "AuthenticationError",
    "Checkpoint",
    "CheckpointRestore",
    "CommandHandle",
    "CommandResult",
    "ConflictError",
    "ConnectionFailedError",
    "DeniedError",
    "EntryInfo",
    "EventStream",
    "Execution",
    "ExecutionError",
    "FieldError",
    "InvalidRequestError",
    "Kernel",
    "Logs",
    "NotFoundError",
    "PayloadTooLargeError",
    "Plan",
    "ProcessInfo",
    "RangeNotSatisfiableError",
    "RateLimitError",
    "Result",
    "Sandbox",
    "ServiceUnavailableError",
    "Session",
    "SessionEvent",
    "Switchyard",
    "SwitchyardError",
    "Template",
    "Terminal",
    "UnprocessableError",
    "WaitTimeoutError",
    "WriteInfo",
]
