"""What the engine answers, as dataclasses with snake_case fields.

Each model names the OpenAPI schema it reads (`__schema__`, in packages/client/openapi.json) and each of its API
fields the property it comes from (`metadata["api"]`): tests/test_openapi_models.py fails when a field names a
property the schema does not have, or a required property of the schema has no field. `raw` keeps the answer as the
engine sent it, so a property this SDK does not know yet is still reachable.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, cast

_T = TypeVar("_T")


def _api(name: str, default: Any = None) -> Any:
    """A field read from the property `name` of the schema."""
    return field(default=default, metadata={"api": name})


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


def _build(cls: type[_T], body: Any, **converted: Any) -> _T:
    """`cls` from an answer's JSON object: each API field from its property, absent ones as their default."""
    data: dict[str, Any] = body if isinstance(body, dict) else {}
    kwargs: dict[str, Any] = {}
    factory: Any = cls
    for f in dataclasses.fields(factory):
        name = f.metadata.get("api")
        if name is not None and name in data:
            kwargs[f.name] = data[name]
    kwargs.update(converted)
    return cast(_T, factory(**kwargs, raw=data))


@dataclass
class Session:
    __schema__: ClassVar[str] = "Session"
    id: str = _api("id", "")
    tenant: str = _api("tenant", "")
    created_at: str = _api("createdAt", "")
    expires_at: str = _api("expiresAt", "")
    last_active_at: str = _api("lastActiveAt", "")
    ttl_seconds: int = _api("ttlSeconds", 0)
    metadata: dict[str, Any] = _api("metadata")
    max_concurrent_actions: int = _api("maxConcurrentActions", 1)
    network: dict[str, Any] = _api("network")
    activity: dict[str, Any] = _api("activity")
    template: str | None = _api("template")
    forked_from: dict[str, Any] | None = _api("forkedFrom")
    policy: dict[str, Any] | None = _api("policy")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Session:
        return _build(cls, body)


@dataclass
class Action:
    """The result envelope of any action (code, file, browser, process, kernel, skill): `status` tells how it ended.

    A failed exit is a result, not an exception: look at `status`, `exit_code` and `error`.
    """

    __schema__: ClassVar[str] = "ActionResult"
    id: str = _api("id", "")
    session_id: str = _api("sessionId", "")
    type: str = _api("type", "")
    status: str = _api("status", "")
    exit_code: int | None = _api("exitCode")
    stdout: str = _api("stdout", "")
    stderr: str = _api("stderr", "")
    output: Any = _api("output")
    truncated: dict[str, bool] = _api("truncated")
    duration_ms: float = _api("durationMs", 0)
    started_at: str = _api("startedAt", "")
    ended_at: str | None = _api("endedAt")
    tier: str = _api("tier", "")
    risk: dict[str, Any] = _api("risk")
    error: dict[str, Any] | None = _api("error")
    redacted: bool | None = _api("redacted")
    request_id: str | None = _api("requestId")
    egress: list[dict[str, Any]] | None = _api("egress")
    hints: list[str] | None = _api("hints")
    checkpoint: dict[str, Any] | None = _api("checkpoint")
    restored: dict[str, Any] | None = _api("restored")
    annotations: dict[str, Any] | None = _api("annotations")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Action:
        return _build(cls, body)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


@dataclass
class ActionPage:
    __schema__: ClassVar[str] = "ActionPage"
    actions: list[Action] = _api("actions")
    next_cursor: str | None = _api("nextCursor")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> ActionPage:
        items = body.get("actions", []) if isinstance(body, dict) else []
        return _build(cls, body, actions=[Action.from_api(a) for a in items])


@dataclass
class Result:
    """One rich result of a kernel cell: a Jupyter MIME bundle it displayed, or its final value (`is_main_result`).

    `png` and `jpeg` are base64 as the kernel displayed them; `json` is the JSON value; the others are strings.
    """

    __schema__: ClassVar[str] = "DisplayResult"
    data: dict[str, Any] = _api("data")
    metadata: dict[str, Any] | None = _api("metadata")
    is_main_result: bool = _api("isMainResult", False)
    files: list[dict[str, Any]] | None = _api("files")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Result:
        r = _build(cls, body)
        if r.data is None:
            r.data = {}
        return r

    def _mime(self, mime: str) -> Any:
        return (self.data or {}).get(mime)

    def _text(self, mime: str) -> str | None:
        value = self._mime(mime)
        return value if isinstance(value, str) else None

    @property
    def text(self) -> str | None:
        return self._text("text/plain")

    @property
    def html(self) -> str | None:
        return self._text("text/html")

    @property
    def markdown(self) -> str | None:
        return self._text("text/markdown")

    @property
    def latex(self) -> str | None:
        return self._text("text/latex")

    @property
    def svg(self) -> str | None:
        return self._text("image/svg+xml")

    @property
    def png(self) -> str | None:
        return self._text("image/png")

    @property
    def jpeg(self) -> str | None:
        return self._text("image/jpeg")

    @property
    def json(self) -> Any:
        return self._mime("application/json")

    def formats(self) -> list[str]:
        """The MIME types it holds."""
        return list((self.data or {}).keys())


@dataclass
class Logs:
    stdout: str = ""
    stderr: str = ""


@dataclass
class ExecutionError:
    """Why a cell or program failed: the exception's `name` and `value` as Python prints them, and the traceback."""

    name: str
    value: str
    traceback: str


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")


@dataclass
class Execution:
    """What `run_code` answers: the cell's rich `results`, its `logs`, its `error` and the whole `action`.

    `results` are what the cell displayed, in order, then its final expression's value (`is_main_result`) last:
    the engine (as Jupyter) sends that value before the figures the cell left open, so a cell ending in
    `df.plot()` has its chart at `results[0]` and the `<Axes>` value after it. The engine's order is in
    `action.output["results"]`.
    """

    results: list[Result]
    logs: Logs
    error: ExecutionError | None
    action: Action

    @property
    def text(self) -> str | None:
        """The main result's text/plain (the value of the cell's last expression), when there is one."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        output = self.action.output
        result = output.get("result") if isinstance(output, dict) else None
        return result if isinstance(result, str) else None

    @classmethod
    def from_action(cls, action: Action) -> Execution:
        output = action.output if isinstance(action.output, dict) else {}
        results = [Result.from_api(r) for r in output.get("results") or []]
        results.sort(key=lambda r: r.is_main_result)  # stable: the displayed ones keep their order
        return cls(results, Logs(action.stdout, action.stderr), execution_error(action), action)


def execution_error(action: Action) -> ExecutionError | None:
    """None when it succeeded; else the engine's error, or the exception named by the last line of stderr."""
    if action.status == "succeeded":
        return None
    if action.error:
        return ExecutionError(
            str(action.error.get("code") or action.error.get("class") or action.status),
            str(action.error.get("message", "")),
            action.stderr,
        )
    lines = [line for line in action.stderr.splitlines() if line.strip()]
    match = _EXCEPTION_LINE.match(lines[-1]) if lines else None
    if match:
        return ExecutionError(match.group(1), match.group(2) or "", action.stderr)
    return ExecutionError(action.status, f"exit code {action.exit_code}", action.stderr)


@dataclass
class CommandResult:
    """A command's end: a non-zero `exit_code` is a result, not an exception."""

    exit_code: int | None
    stdout: str
    stderr: str
    error: str | None = None
    action: Action | None = None


@dataclass
class Checkpoint:
    __schema__: ClassVar[str] = "Checkpoint"
    id: str = _api("id", "")
    session_id: str = _api("sessionId", "")
    label: str | None = _api("label")
    created_at: str = _api("createdAt", "")
    files: int = _api("files", 0)
    directories: int = _api("directories", 0)
    bytes: int = _api("bytes", 0)
    auto: bool = _api("auto", False)
    action_id: str | None = _api("actionId")
    seq: int | None = _api("seq")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Checkpoint:
        return _build(cls, body)


@dataclass
class CheckpointRestore:
    __schema__: ClassVar[str] = "CheckpointRestore"
    checkpoint: Checkpoint = _api("checkpoint")
    restored: dict[str, Any] = _api("restored")
    running: dict[str, list[str]] = _api("running")
    note: str | None = _api("note")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> CheckpointRestore:
        cp = body.get("checkpoint") if isinstance(body, dict) else None
        return _build(cls, body, checkpoint=Checkpoint.from_api(cp))


@dataclass
class Kernel:
    __schema__: ClassVar[str] = "Kernel"
    id: str = _api("id", "")
    session_id: str = _api("sessionId", "")
    language: str = _api("language", "")
    tier: str = _api("tier", "")
    execution_count: int = _api("executionCount", 0)
    busy: bool = _api("busy", False)
    pid: int | None = _api("pid")
    started_at: str = _api("startedAt", "")
    last_used_at: str = _api("lastUsedAt", "")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Kernel:
        return _build(cls, body)


@dataclass
class Terminal:
    """A terminal of the session (a PTY in its sandbox), as the engine last reported it (docs/terminals.md)."""

    __schema__: ClassVar[str] = "Terminal"
    id: str = _api("id", "")
    status: str = _api("status", "")
    tier: str = _api("tier", "")
    cols: int = _api("cols", 0)
    rows: int = _api("rows", 0)
    cwd: str = _api("cwd", "")
    command: str | None = _api("command")
    pid: int | None = _api("pid")
    created_at: str = _api("createdAt", "")
    bytes_in: int = _api("bytesIn", 0)
    bytes_out: int = _api("bytesOut", 0)
    clients: int = _api("clients", 0)
    ended_at: str | None = _api("endedAt")
    exit_code: int | None = _api("exitCode")
    signal: str | None = _api("signal")
    end_reason: str | None = _api("endReason")
    ws_path: str | None = _api("wsPath")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Terminal:
        return _build(cls, body)


@dataclass
class ProcessInfo:
    """A background process of the session, as the engine last reported it."""

    __schema__: ClassVar[str] = "Process"
    id: str = _api("id", "")
    name: str | None = _api("name")
    command: str = _api("command", "")
    tier: str = _api("tier", "")
    pid: int | None = _api("pid")
    started_at: str = _api("startedAt", "")
    running: bool = _api("running", False)
    ended_at: str | None = _api("endedAt")
    exit_code: int | None = _api("exitCode")
    signal: str | None = _api("signal")
    end_reason: str | None = _api("endReason")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> ProcessInfo:
        return _build(cls, body)


@dataclass
class Plan:
    __schema__: ClassVar[str] = "Plan"
    id: str = _api("id", "")
    session_id: str = _api("sessionId", "")
    tenant: str = _api("tenant", "")
    goal: str | None = _api("goal")
    status: str = _api("status", "")
    max_parallel: int = _api("maxParallel", 1)
    checkpoints: str = _api("checkpoints", "none")
    policy: dict[str, Any] | None = _api("policy")
    created_at: str = _api("createdAt", "")
    updated_at: str = _api("updatedAt", "")
    ended_at: str | None = _api("endedAt")
    steps: list[dict[str, Any]] = _api("steps")
    failed_step: str | None = _api("failedStep")
    failure_context: dict[str, Any] | None = _api("failureContext")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Plan:
        return _build(cls, body)


@dataclass
class Template:
    __schema__: ClassVar[str] = "Template"
    name: str = _api("name", "")
    description: str = _api("description", "")
    kind: str = _api("kind", "")
    image: str = _api("image", "")
    state: str = _api("state", "")
    packages: dict[str, Any] = _api("packages")
    env: dict[str, str] = _api("env")
    build: str | None = _api("build")
    built_image: str | None = _api("builtImage")
    error: str | None = _api("error")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> Template:
        return _build(cls, body)


@dataclass
class EntryInfo:
    """One entry of a directory listing (a `file` action's `list`)."""

    # An inline schema: the items of a `list` op's `entries`.
    __schema__: ClassVar[str] = "FileListOutput#entries"
    path: str = _api("path", "")
    type: str = _api("type", "")
    size: int = _api("size", 0)
    raw: dict[str, Any] = _raw()

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @classmethod
    def from_api(cls, body: Any) -> EntryInfo:
        return _build(cls, body)


@dataclass
class WriteInfo:
    """What a streamed upload (`PUT …/files/content`) answers."""

    __schema__: ClassVar[str] = "FileUpload"

    path: str = _api("path", "")
    size: int = _api("size", 0)
    sha256: str = _api("sha256", "")
    action_id: str | None = _api("actionId")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> WriteInfo:
        return _build(cls, body)


@dataclass
class ArchiveInfo:
    """What a directory upload (`PUT …/files/archive`) answers."""

    __schema__: ClassVar[str] = "ArchiveUpload"

    path: str = _api("path", "")
    files: int = _api("files", 0)
    directories: int = _api("directories", 0)
    bytes: int = _api("bytes", 0)
    action_id: str | None = _api("actionId")
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_api(cls, body: Any) -> ArchiveInfo:
        return _build(cls, body)


@dataclass
class SessionEvent:
    """One event of a session's stream (`GET …/events`): `id` is None on `events.gap` and `session.ended`."""

    type: str
    data: dict[str, Any]
    id: int | None = None
