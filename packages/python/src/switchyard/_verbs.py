"""What `Sandbox` and `AsyncSandbox` share beyond requests: actions built from verbs, and answers read back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import _core as c
from . import models as m
from .errors import (
    ActionFailedError,
    ConflictError,
    DeniedError,
    InvalidRequestError,
    NotFoundError,
    SwitchyardError,
)

OutputCallback = Callable[[str], Any]

_NOT_FOUND = {"ENOENT", "FILE_NOT_FOUND", "NOT_FOUND", "PROCESS_NOT_FOUND"}
_EXISTS = {"EEXIST", "FILE_EXISTS"}


def check(action: m.Action) -> m.Action:
    """The action when it succeeded; else the typed error its `status` and `error.code` say."""
    if action.status == "succeeded":
        return action
    error = action.error or {}
    code = str(error.get("code") or action.status.upper())
    message = str(error.get("message") or action.stderr.strip() or f"{action.type} action {action.status}")
    cls: type[SwitchyardError] | None = None
    status = 0
    if action.status == "denied":
        cls, status = DeniedError, 403
    elif code in _NOT_FOUND:
        cls, status = NotFoundError, 404
    elif code in _EXISTS:
        cls, status = ConflictError, 409
    elif error.get("class") == "validation":
        cls, status = InvalidRequestError, 400
    failed = ActionFailedError(message, status, code, action)
    if cls is None:
        raise failed
    raise cls(message, status, code) from failed


def command_action(cmd: str, cwd: str | None, env: Mapping[str, str] | None, timeout_ms: int | None) -> dict[str, Any]:
    return c.code_action(c.shell_command(cmd, cwd), "bash", None, timeout_ms, env)


def command_result(action: m.Action) -> m.CommandResult:
    error = None
    if action.error:
        error = str(action.error.get("message") or action.error.get("code"))
    elif action.status not in ("succeeded", "failed"):
        error = action.status
    return m.CommandResult(action.exit_code, action.stdout, action.stderr, error, action)


def process_start_action(cmd: str, cwd: str | None, env: Mapping[str, str] | None, name: str | None) -> dict[str, Any]:
    return {
        "type": "process",
        "op": "start",
        "command": cmd,
        **c.camel_fields({"cwd": cwd, "env": dict(env) if env else None, "name": name}),
    }


def process_action(op: str, process_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "process", "op": op, "processId": process_id, **c.camel_fields(fields)}


def logs_of(action: m.Action) -> m.Logs:
    entries = c.output_of(action).get("entries") or []
    out = "".join(e.get("text", "") for e in entries if e.get("stream") == "stdout")
    err = "".join(e.get("text", "") for e in entries if e.get("stream") == "stderr")
    return m.Logs(out, err)


class ProcessState:
    """What the event stream has told of one background process: output so far, in order, and its end.

    Shared by the sync and async handles; fed from the session's follower (`process.output`, `process.exited`).
    """

    def __init__(self, process_id: str, on_stdout: OutputCallback | None, on_stderr: OutputCallback | None) -> None:
        self.process_id = process_id
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.last_seq = -1
        self.exit: dict[str, Any] | None = None
        self.exited = threading.Event()

    def feed(self, event: m.SessionEvent) -> None:
        data = event.data
        if event.type == "process.output":
            seq = data.get("seq")
            # A reconnected stream replays what it already sent: each chunk is delivered once.
            if isinstance(seq, int):
                if seq <= self.last_seq:
                    return
                self.last_seq = seq
            chunk = str(data.get("chunk", ""))
            if data.get("stream") == "stderr":
                self.stderr.append(chunk)
                if self.on_stderr:
                    self.on_stderr(chunk)
            else:
                self.stdout.append(chunk)
                if self.on_stdout:
                    self.on_stdout(chunk)
        elif event.type in ("process.exited", "session.ended"):
            self.exit = data
            self.exited.set()

    def result(self, process: m.ProcessInfo | None) -> m.CommandResult:
        exit_code = process.exit_code if process else None
        if exit_code is None and self.exit is not None and isinstance(self.exit.get("exitCode"), int):
            exit_code = self.exit["exitCode"]
        error = None
        if process is not None and process.signal:
            error = f"ended by {process.signal}"
        return m.CommandResult(exit_code, "".join(self.stdout), "".join(self.stderr), error)


class Dispatcher:
    """Routes a session's process events to the handles waiting for them.

    A process's first output can come before its start answers with its id: while a start is under way, events of
    processes nobody registered yet are kept (bounded) and handed over when the handle registers.
    """

    _MAX_PENDING = 10_000

    def __init__(self) -> None:
        # Re-entrant: an output callback may start another background command. Handles are fed under it, so a
        # process's chunks reach its callbacks in order even while it registers.
        self._lock = threading.RLock()
        self._states: dict[str, ProcessState] = {}
        self._pending: dict[str, list[m.SessionEvent]] = {}
        self._starting = 0

    def begin_start(self) -> None:
        with self._lock:
            self._starting += 1

    def end_start(self) -> None:
        with self._lock:
            self._starting -= 1
            if self._starting == 0:
                self._pending.clear()

    def register(self, state: ProcessState) -> None:
        with self._lock:
            self._states[state.process_id] = state
            for event in self._pending.pop(state.process_id, []):
                state.feed(event)

    def dispatch(self, event: m.SessionEvent) -> None:
        if event.type == "session.ended":
            with self._lock:
                for state in self._states.values():
                    state.feed(event)
            return
        if not event.type.startswith("process."):
            return
        process_id = str(event.data.get("processId", ""))
        with self._lock:
            found = self._states.get(process_id)
            if found is None:
                if self._starting > 0:
                    pending = self._pending.setdefault(process_id, [])
                    if len(pending) < self._MAX_PENDING:
                        pending.append(event)
                return
            found.feed(event)
            if event.type == "process.exited":
                self._states.pop(process_id, None)
