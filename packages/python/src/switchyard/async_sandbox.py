"""`AsyncSandbox`: the same verbs as `Sandbox`, for asyncio (`async with await AsyncSandbox.create(…) as sbx`)."""

from __future__ import annotations

import asyncio
import builtins
import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal, overload

import httpx

from . import _core as c
from . import _verbs as v
from . import models as m
from ._streams import WriteData, async_body
from ._tar import CHUNK, extract_tar, iter_tar
from .async_client import AsyncEventStream, AsyncSwitchyard
from .errors import NotFoundError, WaitTimeoutError

_DRAIN_SECONDS = 10.0


class AsyncSandbox:
    """A session for asyncio: `await AsyncSandbox.create(…)` or `.connect(id)`; `async with` deletes it."""

    def __init__(self, client: AsyncSwitchyard, session: m.Session, *, owns_client: bool = False) -> None:
        self.client = client
        self.session = session
        self._owns_client = owns_client
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)
        self.kernels = AsyncKernels(self)
        self.browser = AsyncBrowser(self)
        self.plans = AsyncPlans(self)
        self.tools = AsyncTools(self)
        self.actions = AsyncActions(self)
        self._follower: _AsyncFollower | None = None

    @property
    def id(self) -> str:
        return self.session.id

    session_id = id

    @classmethod
    async def create(
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
        client: AsyncSwitchyard | None = None,
    ) -> AsyncSandbox:
        owner = client is None
        sy = client or AsyncSwitchyard(base_url, api_key)
        try:
            session = await sy.sessions.create(
                template=template,
                metadata=metadata,
                ttl_seconds=ttl_seconds,
                policy=policy,
                network=network,
                max_concurrent_actions=max_concurrent_actions,
            )
        except BaseException:
            if owner:
                await sy.close()
            raise
        return cls(sy, session, owns_client=owner)

    @classmethod
    async def connect(
        cls,
        session_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncSwitchyard | None = None,
    ) -> AsyncSandbox:
        owner = client is None
        sy = client or AsyncSwitchyard(base_url, api_key)
        try:
            session = await sy.sessions.get(session_id)
        except BaseException:
            if owner:
                await sy.close()
            raise
        return cls(sy, session, owns_client=owner)

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.kill()

    async def refresh(self) -> m.Session:
        self.session = await self.client.sessions.get(self.id)
        return self.session

    async def kill(self) -> bool:
        """Deletes the session; False when it was already gone."""
        try:
            await self.client.sessions.delete(self.id)
            return True
        except NotFoundError:
            return False
        finally:
            await self.close()

    async def close(self) -> None:
        follower, self._follower = self._follower, None
        if follower:
            await follower.stop()
        if self._owns_client:
            await self.client.close()

    async def run_code(
        self,
        code: str,
        language: Literal["python", "node", "bash"] = "python",
        *,
        state: Literal["session", "fresh"] = "session",
        timeout_ms: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> m.Execution:
        action = await self.client.actions.run(self.id, c.code_action(code, language, state, timeout_ms, env))
        return m.Execution.from_action(action)

    async def checkpoint(self, name: str | None = None) -> m.Checkpoint:
        return await self.client.checkpoints.create(self.id, name)

    async def checkpoints(self) -> list[m.Checkpoint]:
        return await self.client.checkpoints.list(self.id)

    async def restore(self, checkpoint: m.Checkpoint | str) -> m.CheckpointRestore:
        return await self.client.checkpoints.restore(self.id, c.checkpoint_id(checkpoint))

    async def diff(self, checkpoint: m.Checkpoint | str, to: str = "current") -> dict[str, Any]:
        return await self.client.checkpoints.diff(self.id, c.checkpoint_id(checkpoint), to)

    async def fork(self, checkpoint: m.Checkpoint | str | None = None) -> AsyncSandbox:
        cp = None if checkpoint is None else c.checkpoint_id(checkpoint)
        return AsyncSandbox(self.client, await self.client.sessions.fork(self.id, cp))

    async def retry(self, action: m.Action | str, **options: Any) -> m.Action:
        action_id = action.id if isinstance(action, m.Action) else action
        return await self.client.actions.retry(self.id, action_id, **options)

    def events(self, *, last_event_id: int | None = None) -> AsyncEventStream:
        """The session's events as an async iterator (`async for event in sbx.events(): …`)."""
        return self.client.events(self.id, last_event_id=last_event_id)

    async def graph(self, **query: Any) -> dict[str, Any]:
        return await self.client.graph(self.id, **query)

    async def policy(self) -> dict[str, Any]:
        return await self.client.policies.session(self.id)

    def _events_follower(self) -> _AsyncFollower:
        if self._follower is None or self._follower.task.done():
            self._follower = _AsyncFollower(self.client, self.id)
        return self._follower


class _AsyncFollower:
    """The session's event stream, read by a task that hands process events to their handles."""

    def __init__(self, client: AsyncSwitchyard, session_id: str) -> None:
        self.dispatcher = v.Dispatcher()
        self._stream = client.events(session_id)
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for event in self._stream:
                self.dispatcher.dispatch(event)
        finally:
            self._stream.connected.set()

    async def wait_connected(self, timeout: float = 30.0) -> None:
        try:
            await asyncio.wait_for(self._stream.connected.wait(), timeout)
        except asyncio.TimeoutError:
            raise WaitTimeoutError("the session's event stream did not open", 0, "WAIT_TIMEOUT") from None
        if self.task.done() and self.task.exception() is not None:
            raise self.task.exception()  # type: ignore[misc]

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - it is being stopped
            pass


class _Part:
    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._s = sandbox

    @property
    def _c(self) -> AsyncSwitchyard:
        return self._s.client

    @property
    def _id(self) -> str:
        return self._s.id


class AsyncCommands(_Part):
    @overload
    async def run(
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
    async def run(
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
    ) -> AsyncCommandHandle: ...

    async def run(
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
    ) -> m.CommandResult | AsyncCommandHandle:
        """As `Sandbox.commands.run`; background output reaches the callbacks from the event-stream task."""
        if not background:
            action = await self._c.actions.run(self._id, v.command_action(cmd, cwd, env, timeout_ms))
            result = v.command_result(action)
            if on_stdout and result.stdout:
                on_stdout(result.stdout)
            if on_stderr and result.stderr:
                on_stderr(result.stderr)
            return result
        follower = self._s._events_follower()
        await follower.wait_connected()
        follower.dispatcher.begin_start()
        try:
            action = v.check(await self._c.actions.run(self._id, v.process_start_action(cmd, cwd, env, name)))
            output = c.output_of(action)
            state = v.ProcessState(str(output.get("processId")), on_stdout, on_stderr)
            follower.dispatcher.register(state)
        finally:
            follower.dispatcher.end_start()
        return AsyncCommandHandle(self._s, state, m.ProcessInfo.from_api(output.get("process")))

    async def list(self) -> list[m.ProcessInfo]:
        action = v.check(await self._c.actions.run(self._id, {"type": "process", "op": "list"}))
        return [m.ProcessInfo.from_api(p) for p in c.output_of(action).get("processes") or []]


class AsyncCommandHandle:
    def __init__(self, sandbox: AsyncSandbox, state: v.ProcessState, process: m.ProcessInfo) -> None:
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
        return "".join(self._state.stdout)

    @property
    def stderr(self) -> str:
        return "".join(self._state.stderr)

    async def _run(self, op: str, **fields: Any) -> m.Action:
        return await self._s.client.actions.run(self._s.id, v.process_action(op, self.process_id, **fields))

    async def wait(self, timeout: float | None = None) -> m.CommandResult:
        step_ms = 60_000 if timeout is None else max(1, int(timeout * 1000))
        while True:
            action = await self._run("wait", timeout_ms=step_ms)
            output = c.output_of(action)
            if output.get("exited") or action.status == "succeeded":
                break
            if action.status != "timed_out":
                v.check(action)
            if timeout is not None:
                raise WaitTimeoutError(f"process {self.process_id} still runs after {timeout} s", 0, "WAIT_TIMEOUT")
        self.process = m.ProcessInfo.from_api(output.get("process"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _DRAIN_SECONDS
        # The stream task sets it on `process.exited`, which the engine publishes after the last output.
        while not self._state.exited.is_set() and loop.time() < deadline:
            await asyncio.sleep(0.01)
        return self._state.result(self.process)

    async def kill(self, grace_ms: int | None = None) -> m.ProcessInfo:
        action = v.check(await self._run("stop", grace_ms=grace_ms))
        self.process = m.ProcessInfo.from_api(c.output_of(action).get("process"))
        return self.process

    async def signal(self, signal: Literal["TERM", "INT", "KILL", "HUP", "USR1", "USR2"]) -> None:
        v.check(await self._run("signal", signal=signal))

    async def send_stdin(self, data: str, *, eof: bool = False) -> None:
        v.check(await self._run("write", data=data, eof=eof or None))

    async def logs(self, *, tail: int | None = None) -> m.Logs:
        return v.logs_of(v.check(await self._run("logs", tail=tail)))


class AsyncFiles(_Part):
    @overload
    async def read(self, path: str, format: Literal["text"] = "text") -> str: ...
    @overload
    async def read(self, path: str, format: Literal["bytes"]) -> bytes: ...
    @overload
    async def read(self, path: str, format: Literal["stream"]) -> AsyncIterator[bytes]: ...

    async def read(self, path: str, format: c.ReadFormat = "text") -> str | bytes | AsyncIterator[bytes]:
        if format == "stream":
            return _achunks(await self._c.files.open(self._id, path))
        data = await self._c.files.read_bytes(self._id, path)
        return data if format == "bytes" else data.decode()

    async def write(self, path: str, data: WriteData, *, overwrite: bool = True) -> m.WriteInfo:
        """Text, bytes, a binary file object, or a (sync or async) iterator of chunks, streamed up."""
        return await self._c.files.write(self._id, path, data, overwrite=overwrite)

    async def list(self, path: str = "", *, recursive: bool = False) -> list[m.EntryInfo]:
        out: list[m.EntryInfo] = []
        cursor: str | None = None
        while True:
            action = v.check(
                await self._c.actions.run(
                    self._id, c.file_action("list", path or None, recursive=recursive or None, cursor=cursor)
                )
            )
            out.extend(c.entries(action))
            cursor = c.output_of(action).get("nextCursor")
            if not cursor:
                return out

    async def stat(self, path: str) -> dict[str, Any]:
        return c.output_of(v.check(await self._c.actions.run(self._id, c.file_action("stat", path))))

    async def exists(self, path: str) -> bool:
        return (await self._c.actions.run(self._id, c.file_action("stat", path))).status == "succeeded"

    async def make_dir(self, path: str) -> bool:
        output = c.output_of(v.check(await self._c.actions.run(self._id, c.file_action("mkdir", path))))
        return bool(output.get("created"))

    async def remove(self, path: str, *, recursive: bool = True) -> None:
        v.check(await self._c.actions.run(self._id, c.file_action("delete", path, recursive=recursive)))

    async def rename(self, old_path: str, new_path: str, *, overwrite: bool = False) -> None:
        action = c.file_action("move", old_path, to=new_path, overwrite=overwrite or None)
        v.check(await self._c.actions.run(self._id, action))

    async def upload(self, local: str | os.PathLike[str], remote: str) -> m.WriteInfo | m.ArchiveInfo:
        """A local file or directory (as a tar built while it goes up; disk reads in worker threads)."""
        if Path(local).is_dir():
            body = async_body(iter_tar(local))
            assert not isinstance(body, bytes)
            return await self._c.files.upload_archive(self._id, body, remote or None)
        with open(local, "rb") as f:
            return await self.write(remote, f)

    async def download(self, remote: str, local: str | os.PathLike[str]) -> Path:
        """A file or directory of the workspace to `local`; the bytes land on disk as they come."""
        target = Path(local)
        is_dir = (await self.stat(remote)).get("type") == "dir"
        response = await (
            self._c.files.download_archive(self._id, remote or None) if is_dir else self._c.files.open(self._id, remote)
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                async for chunk in response.aiter_bytes(CHUNK):
                    await asyncio.to_thread(f.write, chunk)
            if is_dir:
                await asyncio.to_thread(_extract_file, tmp, target)
            else:
                os.replace(tmp, target)
        finally:
            await response.aclose()
            Path(tmp).unlink(missing_ok=True)
        return target

    async def lineage(self, path: str) -> dict[str, Any]:
        return await self._c.files.lineage(self._id, path)


def _extract_file(tar_path: str, target: Path) -> None:
    with open(tar_path, "rb") as f:
        extract_tar(f, target)


async def _achunks(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_bytes(CHUNK):
            yield chunk
    finally:
        await response.aclose()


class AsyncKernels(_Part):
    async def list(self) -> list[m.Kernel]:
        return await self._c.kernels.list(self._id)

    async def get(self, kernel_id: str) -> m.Kernel:
        return await self._c.kernels.get(self._id, kernel_id)

    async def interrupt(self, kernel_id: str) -> dict[str, Any]:
        return await self._c.kernels.interrupt(self._id, kernel_id)

    async def restart(self, kernel_id: str) -> m.Kernel:
        return await self._c.kernels.restart(self._id, kernel_id)

    async def delete(self, kernel_id: str) -> None:
        await self._c.kernels.delete(self._id, kernel_id)


class AsyncBrowser(_Part):
    async def run(self, op: str, **fields: Any) -> m.Action:
        return await self._c.actions.run(self._id, {"type": "browser", "op": op, **c.camel_fields(fields)})

    async def navigate(self, url: str, **fields: Any) -> m.Action:
        return await self.run("navigate", url=url, **fields)

    async def extract(
        self, mode: Literal["text", "html", "links", "accessibility"] = "text", **fields: Any
    ) -> m.Action:
        return await self.run("extract", mode=mode, **fields)

    async def screenshot(self, path: str, **fields: Any) -> m.Action:
        return await self.run("screenshot", path=path, **fields)


class AsyncPlans(_Part):
    async def create(self, steps: list[Mapping[str, Any]], **options: Any) -> m.Plan:
        return await self._c.plans.create(self._id, {"steps": list(steps), **c.camel_fields(options)})

    async def get(self, plan_id: str) -> m.Plan:
        return await self._c.plans.get(self._id, plan_id)

    async def list(self) -> list[m.Plan]:
        return await self._c.plans.list(self._id)

    async def replan(self, plan_id: str, steps: builtins.list[Mapping[str, Any]], **options: Any) -> m.Plan:
        return await self._c.plans.replan(self._id, plan_id, {"steps": list(steps), **c.camel_fields(options)})

    async def cancel(self, plan_id: str) -> m.Plan:
        return await self._c.plans.cancel(self._id, plan_id)

    async def wait(self, plan_id: str, *, timeout: float = 600) -> m.Plan:
        return await self._c.plans.wait(self._id, plan_id, timeout=timeout)


class AsyncTools(_Part):
    async def definitions(self, format: c.ToolFormat = "openai", *, strict: bool | None = None) -> list[dict[str, Any]]:
        return await self._c.tools.list(format=format, strict=strict, session_id=self._id)

    async def call(self, calls: Any) -> Any:
        return await self._c.tools.call(self._id, calls)


class AsyncActions(_Part):
    async def run(self, action: Mapping[str, Any], **options: Any) -> m.Action:
        return await self._c.actions.run(self._id, action, **options)

    async def start(self, action: Mapping[str, Any], **options: Any) -> m.Action:
        return await self._c.actions.start(self._id, action, **options)

    async def get(self, action_id: str) -> m.Action:
        return await self._c.actions.get(self._id, action_id)

    async def list(self, *, cursor: str | None = None, limit: int | None = None) -> m.ActionPage:
        return await self._c.actions.list(self._id, cursor=cursor, limit=limit)

    async def cancel(self, action_id: str) -> m.Action:
        return await self._c.actions.cancel(self._id, action_id)

    async def wait(self, action_id: str, *, timeout: float = 600) -> m.Action:
        return await self._c.actions.wait(self._id, action_id, timeout=timeout)
