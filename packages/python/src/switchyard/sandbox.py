"""`Sandbox`: one session of the engine behind E2B-like verbs (code, commands, files, checkpoints), synchronous."""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, overload

import httpx

from . import _core as c
from . import _verbs as v
from . import models as m
from ._streams import WriteData
from ._tar import CHUNK, extract_tar, iter_tar
from .client import EventStream, Switchyard
from .errors import NotFoundError, WaitTimeoutError

#: How long `CommandHandle.wait` waits for the event stream to deliver a process's last output after it exited.
_DRAIN_SECONDS = 10.0


class Sandbox:
    """A session: `Sandbox.create(template=…)` makes one, `Sandbox.connect(id)` re-attaches; `with` deletes it."""

    def __init__(self, client: Switchyard, session: m.Session, *, owns_client: bool = False) -> None:
        self.client = client
        self.session = session
        self._owns_client = owns_client
        self.commands = Commands(self)
        self.files = Files(self)
        self.kernels = Kernels(self)
        self.browser = Browser(self)
        self.plans = Plans(self)
        self.tools = Tools(self)
        self.actions = Actions(self)
        self._follower: _Follower | None = None
        self._follower_lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.session.id

    session_id = id

    @classmethod
    def create(
        cls,
        template: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: int | None = None,
        policy: Mapping[str, Any] | None = None,
        network: Mapping[str, Any] | None = None,
        max_concurrent_actions: int | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Switchyard | None = None,
    ) -> Sandbox:
        """A new session (`POST /v1/sessions`). `client=` shares one HTTP client between sandboxes."""
        owner = client is None
        sy = client or Switchyard(base_url, api_key)
        try:
            session = sy.sessions.create(
                template=template,
                metadata=metadata,
                ttl_seconds=ttl_seconds,
                policy=policy,
                network=network,
                max_concurrent_actions=max_concurrent_actions,
            )
        except BaseException:
            if owner:
                sy.close()
            raise
        return cls(sy, session, owns_client=owner)

    @classmethod
    def connect(
        cls,
        session_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Switchyard | None = None,
    ) -> Sandbox:
        """Re-attaches to a running session; raises NotFoundError when there is none."""
        owner = client is None
        sy = client or Switchyard(base_url, api_key)
        try:
            session = sy.sessions.get(session_id)
        except BaseException:
            if owner:
                sy.close()
            raise
        return cls(sy, session, owns_client=owner)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()

    def refresh(self) -> m.Session:
        self.session = self.client.sessions.get(self.id)
        return self.session

    def kill(self) -> bool:
        """Deletes the session (its sandboxes, kernels and processes end) and closes what this object opened.

        False when it was already gone (expired, deleted elsewhere): leaving a `with` block never fails on that.
        """
        try:
            self.client.sessions.delete(self.id)
            return True
        except NotFoundError:
            return False
        finally:
            self.close()

    def close(self) -> None:
        """Lets go of the session without deleting it (`Sandbox.connect` re-attaches)."""
        follower = self._follower
        self._follower = None
        if follower:
            follower.stop()
        if self._owns_client:
            self.client.close()

    # ---- code ----

    def run_code(
        self,
        code: str,
        language: Literal["python", "node", "bash"] = "python",
        *,
        state: Literal["session", "fresh"] = "session",
        timeout_ms: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Execution:
        """Runs `code` as a kernel cell (`state="session"`, the default: variables stay) or a fresh program.

        A failing cell is a result (`execution.error`), not an exception.
        """
        action = self.client.actions.run(self.id, c.code_action(code, language, state, timeout_ms, env))
        return m.Execution.from_action(action)

    # ---- checkpoints ----

    def checkpoint(self, name: str | None = None) -> m.Checkpoint:
        return self.client.checkpoints.create(self.id, name)

    def checkpoints(self) -> list[m.Checkpoint]:
        return self.client.checkpoints.list(self.id)

    def restore(self, checkpoint: m.Checkpoint | str) -> m.CheckpointRestore:
        return self.client.checkpoints.restore(self.id, c.checkpoint_id(checkpoint))

    def diff(self, checkpoint: m.Checkpoint | str, to: str = "current") -> dict[str, Any]:
        return self.client.checkpoints.diff(self.id, c.checkpoint_id(checkpoint), to)

    def fork(self, checkpoint: m.Checkpoint | str | None = None) -> Sandbox:
        """A new session whose workspace is a copy of this one (now, or at `checkpoint`); it shares this client."""
        cp = None if checkpoint is None else c.checkpoint_id(checkpoint)
        return Sandbox(self.client, self.client.sessions.fork(self.id, cp))

    def retry(self, action: m.Action | str, **options: Any) -> m.Action:
        """Retries an action: `action=` revised, `restore=True`, `escalate=True`, `reason=` (plans-and-events.md)."""
        action_id = action.id if isinstance(action, m.Action) else action
        return self.client.actions.retry(self.id, action_id, **options)

    # ---- events and the rest ----

    def events(self, *, last_event_id: int | None = None) -> EventStream:
        """The session's events, live, until it ends (`for event in sbx.events(): …`); close it to stop early."""
        return self.client.events(self.id, last_event_id=last_event_id)

    def graph(self, **query: Any) -> dict[str, Any]:
        return self.client.graph(self.id, **query)

    def policy(self) -> dict[str, Any]:
        return self.client.policies.session(self.id)

    def _events_follower(self) -> _Follower:
        with self._follower_lock:
            if self._follower is None or not self._follower.alive():
                self._follower = _Follower(self.client, self.id)
            return self._follower


Execution = m.Execution


class _Follower:
    """The session's event stream, read by a daemon thread that hands process events to their handles."""

    def __init__(self, client: Switchyard, session_id: str) -> None:
        self.dispatcher = v.Dispatcher()
        self._stream = client.events(session_id)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"switchyard-events-{session_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._stream:
                self.dispatcher.dispatch(event)
        except BaseException as error:  # noqa: BLE001 - kept for the waiter to see
            self._error = error
        finally:
            self._stream.connected.set()

    def wait_connected(self, timeout: float = 30.0) -> None:
        """Returns once the engine streams this session's events to us, so no output of a new process is missed."""
        if not self._stream.connected.wait(timeout) or self._error is not None:
            raise self._error or WaitTimeoutError("the session's event stream did not open", 0, "WAIT_TIMEOUT")

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stream.close()


class _Part:
    def __init__(self, sandbox: Sandbox) -> None:
        self._s = sandbox

    @property
    def _c(self) -> Switchyard:
        return self._s.client

    @property
    def _id(self) -> str:
        return self._s.id


class Commands(_Part):
    @overload
    def run(
        self,
        cmd: str,
        *,
        background: Literal[False] = False,
        on_stdout: v.OutputCallback | None = None,
        on_stderr: v.OutputCallback | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        name: str | None = None,
    ) -> m.CommandResult: ...

    @overload
    def run(
        self,
        cmd: str,
        *,
        background: Literal[True],
        on_stdout: v.OutputCallback | None = None,
        on_stderr: v.OutputCallback | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        name: str | None = None,
    ) -> CommandHandle: ...

    def run(
        self,
        cmd: str,
        *,
        background: bool = False,
        on_stdout: v.OutputCallback | None = None,
        on_stderr: v.OutputCallback | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        name: str | None = None,
    ) -> m.CommandResult | CommandHandle:
        """Runs a shell command (bash) in the workspace (`cwd` relative to it).

        Foreground: waits and answers its `CommandResult` (the callbacks get its whole output once it ended).
        `background=True`: starts a process and answers a handle at once; its output reaches `on_stdout` and
        `on_stderr` as the engine streams it (`process.output` events), on the session's event thread.
        """
        if not background:
            action = self._c.actions.run(self._id, v.command_action(cmd, cwd, env, timeout_ms))
            result = v.command_result(action)
            if on_stdout and result.stdout:
                on_stdout(result.stdout)
            if on_stderr and result.stderr:
                on_stderr(result.stderr)
            return result
        follower = self._s._events_follower()
        follower.wait_connected()
        follower.dispatcher.begin_start()
        try:
            action = v.check(self._c.actions.run(self._id, v.process_start_action(cmd, cwd, env, name)))
            output = c.output_of(action)
            state = v.ProcessState(str(output.get("processId")), on_stdout, on_stderr)
            follower.dispatcher.register(state)
        finally:
            follower.dispatcher.end_start()
        return CommandHandle(self._s, state, m.ProcessInfo.from_api(output.get("process")))

    def list(self) -> list[m.ProcessInfo]:
        action = v.check(self._c.actions.run(self._id, {"type": "process", "op": "list"}))
        return [m.ProcessInfo.from_api(p) for p in c.output_of(action).get("processes") or []]

    def connect(
        self,
        process_id: str,
        *,
        on_stdout: v.OutputCallback | None = None,
        on_stderr: v.OutputCallback | None = None,
    ) -> CommandHandle:
        """A handle on a running process (by id or name); its output from now on reaches the callbacks."""
        follower = self._s._events_follower()
        follower.wait_connected()
        action = v.check(self._c.actions.run(self._id, v.process_action("logs", process_id, tail=1)))
        output = c.output_of(action)
        state = v.ProcessState(str(output.get("processId", process_id)), on_stdout, on_stderr)
        follower.dispatcher.register(state)
        return CommandHandle(self._s, state, m.ProcessInfo.from_api(output.get("process")))


class CommandHandle:
    """A background command: `wait()` for its end, `kill()` it, read its `logs()`, write to its stdin."""

    def __init__(self, sandbox: Sandbox, state: v.ProcessState, process: m.ProcessInfo) -> None:
        self._s = sandbox
        self._state = state
        self.process = process

    @property
    def process_id(self) -> str:
        return self._state.process_id

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def stdout(self) -> str:
        """What the stream has delivered of its stdout so far."""
        return "".join(self._state.stdout)

    @property
    def stderr(self) -> str:
        return "".join(self._state.stderr)

    def _run(self, op: str, **fields: Any) -> m.Action:
        return self._s.client.actions.run(self._s.id, v.process_action(op, self.process_id, **fields))

    def wait(self, timeout: float | None = None) -> m.CommandResult:
        """Waits for it to exit (raises WaitTimeoutError after `timeout` seconds), then for its last output."""
        step_ms = 60_000 if timeout is None else max(1, int(timeout * 1000))
        while True:
            action = self._run("wait", timeout_ms=step_ms)
            output = c.output_of(action)
            if output.get("exited") or action.status == "succeeded":
                break
            if action.status != "timed_out":
                v.check(action)
            if timeout is not None:
                raise WaitTimeoutError(f"process {self.process_id} still runs after {timeout} s", 0, "WAIT_TIMEOUT")
        self.process = m.ProcessInfo.from_api(output.get("process"))
        # The engine publishes `process.exited` after the last output: once it arrived, every chunk did.
        self._state.exited.wait(_DRAIN_SECONDS)
        return self._state.result(self.process)

    def kill(self, grace_ms: int | None = None) -> m.ProcessInfo:
        """Stops it and everything it started (TERM, then KILL after `grace_ms`, default 2000)."""
        action = v.check(self._run("stop", grace_ms=grace_ms))
        self.process = m.ProcessInfo.from_api(c.output_of(action).get("process"))
        return self.process

    def signal(self, signal: Literal["TERM", "INT", "KILL", "HUP", "USR1", "USR2"]) -> None:
        v.check(self._run("signal", signal=signal))

    def send_stdin(self, data: str, *, eof: bool = False) -> None:
        v.check(self._run("write", data=data, eof=eof or None))

    def logs(self, *, tail: int | None = None) -> m.Logs:
        """Its output as the engine keeps it (bounded: the oldest goes first)."""
        return v.logs_of(v.check(self._run("logs", tail=tail)))


class Files(_Part):
    @overload
    def read(self, path: str, format: Literal["text"] = "text") -> str: ...
    @overload
    def read(self, path: str, format: Literal["bytes"]) -> bytes: ...
    @overload
    def read(self, path: str, format: Literal["stream"]) -> Iterator[bytes]: ...

    def read(self, path: str, format: c.ReadFormat = "text") -> str | bytes | Iterator[bytes]:
        """The file's content (`GET …/files/content`): text (UTF-8), bytes, or a stream of byte chunks."""
        if format == "stream":
            # Opened now, so a missing file raises here rather than at the first chunk.
            return _chunks(self._c.files.open(self._id, path))
        data = self._c.files.read_bytes(self._id, path)
        return data if format == "bytes" else data.decode()

    def write(self, path: str, data: WriteData, *, overwrite: bool = True) -> m.WriteInfo:
        """Writes text, bytes, a binary file object or an iterator of chunks, streamed (`PUT …/files/content`)."""
        return self._c.files.write(self._id, path, data, overwrite=overwrite)

    def list(self, path: str = "", *, recursive: bool = False) -> list[m.EntryInfo]:
        out: list[m.EntryInfo] = []
        cursor: str | None = None
        while True:
            action = v.check(
                self._c.actions.run(
                    self._id, c.file_action("list", path or None, recursive=recursive or None, cursor=cursor)
                )
            )
            out.extend(c.entries(action))
            cursor = c.output_of(action).get("nextCursor")
            if not cursor:
                return out

    def stat(self, path: str) -> dict[str, Any]:
        return c.output_of(v.check(self._c.actions.run(self._id, c.file_action("stat", path))))

    def exists(self, path: str) -> bool:
        action = self._c.actions.run(self._id, c.file_action("stat", path))
        return action.status == "succeeded"

    def make_dir(self, path: str) -> bool:
        """Makes the directory (and its parents); False when it already existed."""
        output = c.output_of(v.check(self._c.actions.run(self._id, c.file_action("mkdir", path))))
        return bool(output.get("created"))

    def remove(self, path: str, *, recursive: bool = True) -> None:
        v.check(self._c.actions.run(self._id, c.file_action("delete", path, recursive=recursive)))

    def rename(self, old_path: str, new_path: str, *, overwrite: bool = False) -> None:
        v.check(
            self._c.actions.run(self._id, c.file_action("move", old_path, to=new_path, overwrite=overwrite or None))
        )

    def upload(self, local: str | os.PathLike[str], remote: str) -> m.WriteInfo | m.ArchiveInfo:
        """A local file (streamed) or directory (as a tar built while it goes up) to `remote` in the workspace."""
        if Path(local).is_dir():
            return self._c.files.upload_archive(self._id, iter_tar(local), remote or None)
        with open(local, "rb") as f:
            return self.write(remote, f)

    def download(self, remote: str, local: str | os.PathLike[str]) -> Path:
        """A file or directory of the workspace to `local` (a directory's tar is extracted as it streams)."""
        target = Path(local)
        if self.stat(remote).get("type") == "dir":
            response = self._c.files.download_archive(self._id, remote or None)
            try:
                extract_tar(_ResponseReader(response), target)
            finally:
                response.close()
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part")
        response = self._c.files.open(self._id, remote)
        try:
            with open(tmp, "wb") as f:
                for chunk in response.iter_bytes(CHUNK):
                    f.write(chunk)
            os.replace(tmp, target)
        finally:
            response.close()
            tmp.unlink(missing_ok=True)
        return target

    def lineage(self, path: str) -> dict[str, Any]:
        return self._c.files.lineage(self._id, path)


def _chunks(response: httpx.Response) -> Iterator[bytes]:
    try:
        yield from response.iter_bytes(CHUNK)
    finally:
        response.close()


class _ResponseReader:
    """A streamed answer as a readable binary file, for `tarfile`'s stream mode."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.iter_bytes(CHUNK)
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        if size < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out


class Kernels(_Part):
    def list(self) -> list[m.Kernel]:
        return self._c.kernels.list(self._id)

    def get(self, kernel_id: str) -> m.Kernel:
        return self._c.kernels.get(self._id, kernel_id)

    def interrupt(self, kernel_id: str) -> dict[str, Any]:
        return self._c.kernels.interrupt(self._id, kernel_id)

    def restart(self, kernel_id: str) -> m.Kernel:
        return self._c.kernels.restart(self._id, kernel_id)

    def delete(self, kernel_id: str) -> None:
        self._c.kernels.delete(self._id, kernel_id)


class Browser(_Part):
    def run(self, op: str, **fields: Any) -> m.Action:
        """Any browser op (`navigate`, `click`, `fill`, `extract`, `screenshot`…; snake_case fields), as an action."""
        return self._c.actions.run(self._id, {"type": "browser", "op": op, **c.camel_fields(fields)})

    def navigate(self, url: str, **fields: Any) -> m.Action:
        return self.run("navigate", url=url, **fields)

    def extract(self, mode: Literal["text", "html", "links", "accessibility"] = "text", **fields: Any) -> m.Action:
        return self.run("extract", mode=mode, **fields)

    def screenshot(self, path: str, **fields: Any) -> m.Action:
        return self.run("screenshot", path=path, **fields)


class Plans(_Part):
    def create(self, steps: list[Mapping[str, Any]], **options: Any) -> m.Plan:
        """A plan of steps (`{"id", "action", "dependsOn"?…}`); options: goal, max_parallel, checkpoints, wait…"""
        return self._c.plans.create(self._id, {"steps": list(steps), **c.camel_fields(options)})

    def get(self, plan_id: str) -> m.Plan:
        return self._c.plans.get(self._id, plan_id)

    def list(self) -> list[m.Plan]:
        return self._c.plans.list(self._id)

    def replan(self, plan_id: str, steps: builtins.list[Mapping[str, Any]], **options: Any) -> m.Plan:
        return self._c.plans.replan(self._id, plan_id, {"steps": list(steps), **c.camel_fields(options)})

    def cancel(self, plan_id: str) -> m.Plan:
        return self._c.plans.cancel(self._id, plan_id)

    def wait(self, plan_id: str, *, timeout: float = 600) -> m.Plan:
        return self._c.plans.wait(self._id, plan_id, timeout=timeout)


class Tools(_Part):
    def definitions(self, format: c.ToolFormat = "openai", *, strict: bool | None = None) -> list[dict[str, Any]]:
        """The tools its policy offers, in a model API's shape (`openai`, `openai-responses`, `anthropic`)."""
        return self._c.tools.list(format=format, strict=strict, session_id=self._id)

    def call(self, calls: Any) -> Any:
        """Runs a tool call as the model sent it (or a list of them); answers in the call's own shape."""
        return self._c.tools.call(self._id, calls)


class Actions(_Part):
    def run(self, action: Mapping[str, Any], **options: Any) -> m.Action:
        return self._c.actions.run(self._id, action, **options)

    def start(self, action: Mapping[str, Any], **options: Any) -> m.Action:
        return self._c.actions.start(self._id, action, **options)

    def get(self, action_id: str) -> m.Action:
        return self._c.actions.get(self._id, action_id)

    def list(self, *, cursor: str | None = None, limit: int | None = None) -> m.ActionPage:
        return self._c.actions.list(self._id, cursor=cursor, limit=limit)

    def cancel(self, action_id: str) -> m.Action:
        return self._c.actions.cancel(self._id, action_id)

    def wait(self, action_id: str, *, timeout: float = 600) -> m.Action:
        return self._c.actions.wait(self._id, action_id, timeout=timeout)
