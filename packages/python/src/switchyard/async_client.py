"""`AsyncSwitchyard`: the whole REST API for asyncio, method for method as `Switchyard` (requests built in `_core`)."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import unquote

import httpx

from . import _core as c
from . import models as m
from ._sse import SseParser, to_event
from ._streams import WriteData, async_body
from .client import DEFAULT_TIMEOUT
from .errors import SwitchyardError, WaitTimeoutError, connection_error

_T = TypeVar("_T")


class AsyncSwitchyard:
    """The async client of one engine; same settings, methods and errors as `Switchyard`, awaited."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url, self.api_key = c.resolve_settings(base_url, api_key)
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http_client is None
        self.sessions = _Sessions(self)
        self.actions = _Actions(self)
        self.files = _Files(self)
        self.checkpoints = _Checkpoints(self)
        self.kernels = _Kernels(self)
        self.terminals = _Terminals(self)
        self.ports = _Ports(self)
        self.browser = _Browser(self)
        self.plans = _Plans(self)
        self.tools = _Tools(self)
        self.policies = _Policies(self)
        self.approvals = _Approvals(self)
        self.skills = _Skills(self)
        self.hooks = _Hooks(self)

    # ---- plumbing ----

    async def run(self, call: c.Call[_T]) -> _T:
        """Sends one prepared request and parses its answer."""
        body = await self.request(
            call.method, call.path, query=call.params(), content=call.content(), headers=call.all_headers()
        )
        return call.parse(body)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | AsyncIterator[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Any request to the engine: its JSON answer, or its text. Non-2xx raises the typed error."""
        all_headers = {**c.auth_headers(self.api_key), **(headers or {})}
        if json is not None:
            content = c.Call("POST", path, json=json, has_body=True).content()
            all_headers.setdefault("content-type", "application/json")
        try:
            response = await self._http.request(
                method,
                self.base_url + path,
                params=c.query_params(query),
                content=content,
                headers=all_headers,
            )
        except httpx.TransportError as error:
            raise connection_error(self.base_url, error) from error
        return c.decode(response.status_code, response.content)

    async def stream(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        content: bytes | AsyncIterator[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """A request whose answer is read as it comes (the caller `aclose()`s it). Non-2xx raises the typed error."""
        request = self._http.build_request(
            method,
            self.base_url + path,
            params=c.query_params(query),
            content=content,
            headers={**c.auth_headers(self.api_key), **(headers or {})},
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as error:
            raise connection_error(self.base_url, error) from error
        if response.status_code >= 400:
            try:
                content = await response.aread()
            finally:
                await response.aclose()
            c.decode(response.status_code, content)
        return response

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncSwitchyard:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # ---- top level ----

    async def health(self) -> dict[str, Any]:
        return await self.run(c.health())

    async def templates(self) -> list[m.Template]:
        return await self.run(c.list_templates())

    async def whoami(self) -> dict[str, Any]:
        return await self.run(c.whoami())

    async def graph(
        self,
        session_id: str,
        *,
        types: list[str] | None = None,
        status: list[str] | None = None,
        since: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        return await self.run(c.graph(session_id, types, status, since, limit))

    def events(self, session_id: str, *, last_event_id: int | None = None, max_reconnects: int = 5) -> AsyncEventStream:
        """The session's events, live, as an async iterator (`async for e in client.events(sid)`)."""
        return AsyncEventStream(self, session_id, last_event_id, max_reconnects)

    async def _wait(
        self, get: Callable[[], Any], done: Callable[[Any], bool], timeout: float, interval: float, what: str
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = await get()
            if done(value):
                return value
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(f"{what} did not finish in {timeout} s", 0, "WAIT_TIMEOUT")
            await asyncio.sleep(interval)


class AsyncEventStream:
    """An async iterator of a session's events over SSE; `await stream.aclose()` ends it."""

    def __init__(
        self, client: AsyncSwitchyard, session_id: str, last_event_id: int | None, max_reconnects: int
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._last_id = None if last_event_id is None else str(last_event_id)
        self._max_reconnects = max_reconnects
        self._response: httpx.Response | None = None
        self._closed = False
        self.connected = asyncio.Event()
        """Set once the engine has subscribed this stream: events published from then on reach it."""
        self._gen = self._events()

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> m.SessionEvent:
        return await self._gen.__anext__()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        if self._response is not None:
            await self._response.aclose()
        await self._gen.aclose()

    async def _events(self) -> AsyncGenerator[m.SessionEvent, None]:
        failures = 0
        first = True
        delay = 1.0
        path = f"{c.session_path(self._session_id)}/events"
        while not self._closed:
            if not first:
                await asyncio.sleep(delay)
            try:
                response = await self._client.stream("GET", path, headers=c.event_headers(None, self._last_id))
            except SwitchyardError as error:
                if first or error.status != 0 or failures >= self._max_reconnects:
                    raise
                failures += 1
                continue
            first = False
            self._response = response
            parser = SseParser()
            try:
                async for chunk in response.aiter_text():
                    for message in parser.push(chunk):
                        if message.id:
                            self._last_id = message.id
                        event = to_event(message)
                        yield event
                        if event.type == "session.ended":
                            return
                    if parser.retry_ms is not None:
                        self.connected.set()
                failures = 0
            except (httpx.TransportError, httpx.StreamError):
                if self._closed:
                    return
            finally:
                await response.aclose()
            if parser.retry_ms is not None:
                delay = parser.retry_ms / 1000


class _Part:
    def __init__(self, client: AsyncSwitchyard) -> None:
        self._c = client


class _Sessions(_Part):
    async def create(
        self,
        *,
        template: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: int | None = None,
        policy: Mapping[str, Any] | None = None,
        network: Mapping[str, Any] | None = None,
        max_concurrent_actions: int | None = None,
    ) -> m.Session:
        return await self._c.run(
            c.create_session(
                template=template,
                metadata=metadata,
                ttl_seconds=ttl_seconds,
                policy=policy,
                network=network,
                max_concurrent_actions=max_concurrent_actions,
            )
        )

    async def get(self, session_id: str) -> m.Session:
        return await self._c.run(c.get_session(session_id))

    async def list(self) -> list[m.Session]:
        return await self._c.run(c.list_sessions())

    async def delete(self, session_id: str) -> None:
        await self._c.run(c.delete_session(session_id))

    async def fork(
        self, session_id: str, checkpoint_id: str | None = None, *, idempotency_key: str | None = None
    ) -> m.Session:
        return await self._c.run(c.fork_session(session_id, checkpoint_id, idempotency_key))


class _Actions(_Part):
    async def run(
        self,
        session_id: str,
        action: Mapping[str, Any],
        *,
        checkpoint: Literal["before"] | None = None,
        idempotency_key: str | None = None,
    ) -> m.Action:
        """Runs any action (`{"type": "code" | "file" | "browser" | "process" | "kernel" | "skill", …}`)."""
        return await self._c.run(
            c.run_action(session_id, action, checkpoint=checkpoint, idempotency_key=idempotency_key)
        )

    async def start(
        self,
        session_id: str,
        action: Mapping[str, Any],
        *,
        checkpoint: Literal["before"] | None = None,
        idempotency_key: str | None = None,
    ) -> m.Action:
        """Submits it and answers at once (`running`); follow it with `wait` or the events."""
        return await self._c.run(
            c.run_action(session_id, action, wait=False, checkpoint=checkpoint, idempotency_key=idempotency_key)
        )

    async def get(self, session_id: str, action_id: str) -> m.Action:
        return await self._c.run(c.get_action(session_id, action_id))

    async def list(self, session_id: str, *, cursor: str | None = None, limit: int | None = None) -> m.ActionPage:
        return await self._c.run(c.list_actions(session_id, cursor, limit))

    async def cancel(self, session_id: str, action_id: str) -> m.Action:
        return await self._c.run(c.cancel_action(session_id, action_id))

    async def retry(self, session_id: str, action_id: str, **options: Any) -> m.Action:
        """`action=` a revised action, `restore=True`, `escalate=True`, `reason=`, `wait=`, `checkpoint="before"`."""
        return await self._c.run(c.retry_action(session_id, action_id, **options))

    async def context(self, session_id: str, action_id: str, *, before: int | None = None) -> dict[str, Any]:
        return await self._c.run(c.action_context(session_id, action_id, before))

    async def wait(self, session_id: str, action_id: str, *, timeout: float = 600, interval: float = 0.25) -> m.Action:
        """Polls the action until it ends (no longer `running` or `awaiting_approval`)."""
        action: m.Action = await self._c._wait(
            lambda: self.get(session_id, action_id),
            lambda a: a.status not in ("running", "awaiting_approval"),
            timeout,
            interval,
            f"action {action_id}",
        )
        return action


class _Files(_Part):
    async def write(self, session_id: str, path: str, data: WriteData, *, overwrite: bool = True) -> m.WriteInfo:
        """Streams `data` into the file at `path` (`PUT …/files/content`): atomic, parents made, up to the quota."""
        body = await self._c.request(
            "PUT",
            c.files_content_path(session_id),
            query={"path": path, "overwrite": None if overwrite else "false"},
            content=async_body(data),
            headers={"content-type": "application/octet-stream"},
        )
        return m.WriteInfo.from_api(body)

    async def open(self, session_id: str, path: str, *, range: tuple[int, int | None] | None = None) -> httpx.Response:
        """The file's bytes as a streamed answer (`GET …/files/content`); close it when done."""
        headers = {}
        if range is not None:
            start, end = range
            headers["range"] = f"bytes={start}-{'' if end is None else end}"
        return await self._c.stream("GET", c.files_content_path(session_id), query={"path": path}, headers=headers)

    async def read_bytes(self, session_id: str, path: str) -> bytes:
        response = await self.open(session_id, path)
        try:
            return await response.aread()
        finally:
            await response.aclose()

    async def iter_bytes(self, session_id: str, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        response = await self.open(session_id, path)
        try:
            async for chunk in response.aiter_bytes(chunk_size):
                yield chunk
        finally:
            await response.aclose()

    async def upload_archive(
        self, session_id: str, tar: bytes | AsyncIterator[bytes], path: str | None = None
    ) -> m.ArchiveInfo:
        """Extracts a tar (or tar.gz) into the directory `path` (`PUT …/files/archive`; default the workspace root)."""
        body = await self._c.request(
            "PUT",
            c.files_archive_path(session_id),
            query={"path": path},
            content=tar,
            headers={"content-type": "application/x-tar"},
        )
        return m.ArchiveInfo.from_api(body)

    async def download_archive(self, session_id: str, path: str | None = None) -> httpx.Response:
        """The directory `path` as a streamed tar (`GET …/files/archive`); close it when done."""
        return await self._c.stream("GET", c.files_archive_path(session_id), query={"path": path})

    async def lineage(self, session_id: str, path: str) -> dict[str, Any]:
        return await self._c.run(c.file_lineage(session_id, path))


class _Checkpoints(_Part):
    async def create(
        self, session_id: str, label: str | None = None, *, idempotency_key: str | None = None
    ) -> m.Checkpoint:
        return await self._c.run(c.create_checkpoint(session_id, label, idempotency_key))

    async def list(self, session_id: str) -> list[m.Checkpoint]:
        return await self._c.run(c.list_checkpoints(session_id))

    async def get(self, session_id: str, checkpoint_id: str) -> m.Checkpoint:
        return await self._c.run(c.get_checkpoint(session_id, checkpoint_id))

    async def delete(self, session_id: str, checkpoint_id: str) -> None:
        await self._c.run(c.delete_checkpoint(session_id, checkpoint_id))

    async def restore(self, session_id: str, checkpoint_id: str) -> m.CheckpointRestore:
        return await self._c.run(c.restore_checkpoint(session_id, checkpoint_id))

    async def diff(self, session_id: str, checkpoint_id: str, to: str = "current") -> dict[str, Any]:
        return await self._c.run(c.diff_checkpoint(session_id, checkpoint_id, to))


class _Kernels(_Part):
    async def list(self, session_id: str) -> list[m.Kernel]:
        return await self._c.run(c.list_kernels(session_id))

    async def get(self, session_id: str, kernel_id: str) -> m.Kernel:
        return await self._c.run(c.get_kernel(session_id, kernel_id))

    async def interrupt(self, session_id: str, kernel_id: str) -> dict[str, Any]:
        return await self._c.run(c.interrupt_kernel(session_id, kernel_id))

    async def restart(self, session_id: str, kernel_id: str) -> m.Kernel:
        return await self._c.run(c.restart_kernel(session_id, kernel_id))

    async def delete(self, session_id: str, kernel_id: str) -> None:
        await self._c.run(c.delete_kernel(session_id, kernel_id))


class _Ports(_Part):
    """A session's servers: its listening ports, preview links, and requests through the engine's proxy."""

    async def list(self, session_id: str) -> list[dict[str, Any]]:
        return await self._c.run(c.list_ports(session_id))

    async def preview(self, session_id: str, port: int, ttl_seconds: int | None = None) -> dict[str, Any]:
        return await self._c.run(c.preview_port(session_id, port, ttl_seconds))

    async def request(
        self,
        session_id: str,
        port: int,
        method: str = "GET",
        path: str = "",
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One request to the session's server through the proxy: its JSON answer, or its text (non-2xx raises)."""
        return await self._c.request(method, c.port_path(session_id, port, path), content=content, headers=headers)


class _Browser(_Part):
    """Watching the session's browser (not an action: nothing is recorded, nothing runs in the page)."""

    async def view(self, session_id: str) -> dict[str, Any]:
        """`{image: bytes (JPEG), url, title, tab}` of the current tab; `NotFoundError` (`NO_BROWSER`) without one."""
        response = await self._c.stream("GET", c.browser_view_path(session_id))
        try:
            image = await response.aread()
        finally:
            await response.aclose()
        return {
            "image": image,
            "url": unquote(response.headers.get("x-switchyard-page-url", "")),
            "title": unquote(response.headers.get("x-switchyard-page-title", "")),
            "tab": response.headers.get("x-switchyard-tab", ""),
        }


class _Terminals(_Part):
    """Shells (PTYs) in a session's sandbox, driven over their WebSocket (`ws_path`; docs/terminals.md)."""

    async def open(
        self,
        session_id: str,
        *,
        cols: int | None = None,
        rows: int | None = None,
        cwd: str | None = None,
        command: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        return await self._c.run(c.open_terminal(session_id, cols=cols, rows=rows, cwd=cwd, command=command, env=env))

    async def list(self, session_id: str) -> list[m.Terminal]:
        return await self._c.run(c.list_terminals(session_id))

    async def get(self, session_id: str, terminal_id: str) -> m.Terminal:
        return await self._c.run(c.get_terminal(session_id, terminal_id))

    async def resize(self, session_id: str, terminal_id: str, cols: int, rows: int) -> m.Terminal:
        return await self._c.run(c.resize_terminal(session_id, terminal_id, cols, rows))

    async def token(self, session_id: str, terminal_id: str, ttl_seconds: int | None = None) -> dict[str, Any]:
        return await self._c.run(c.terminal_token(session_id, terminal_id, ttl_seconds))

    async def close(self, session_id: str, terminal_id: str) -> dict[str, Any]:
        return await self._c.run(c.close_terminal(session_id, terminal_id))


class _Plans(_Part):
    async def create(self, session_id: str, plan: Mapping[str, Any], *, idempotency_key: str | None = None) -> m.Plan:
        """`plan`: `{"steps": [{"id", "action", "dependsOn"?…}], "goal"?, …}` (docs/plans-and-events.md)."""
        return await self._c.run(c.create_plan(session_id, plan, idempotency_key))

    async def get(self, session_id: str, plan_id: str) -> m.Plan:
        return await self._c.run(c.get_plan(session_id, plan_id))

    async def list(self, session_id: str) -> list[m.Plan]:
        return await self._c.run(c.list_plans(session_id))

    async def replan(self, session_id: str, plan_id: str, body: Mapping[str, Any]) -> m.Plan:
        return await self._c.run(c.replan(session_id, plan_id, body))

    async def cancel(self, session_id: str, plan_id: str) -> m.Plan:
        return await self._c.run(c.cancel_plan(session_id, plan_id))

    async def wait(self, session_id: str, plan_id: str, *, timeout: float = 600, interval: float = 0.25) -> m.Plan:
        """Polls until the plan ends or needs a replan."""
        plan: m.Plan = await self._c._wait(
            lambda: self.get(session_id, plan_id),
            lambda p: p.status in c.FINAL_PLAN,
            timeout,
            interval,
            f"plan {plan_id}",
        )
        return plan


class _Tools(_Part):
    async def list(
        self, *, format: c.ToolFormat | None = None, strict: bool | None = None, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The tool catalog in a model API's shape; with `session_id`, what that session's policy offers."""
        return await self._c.run(c.list_tools(format, strict, session_id))

    async def call(self, session_id: str, calls: Any) -> Any:
        """Runs one tool call (any shape the engine takes: `{id, name, input}`, Anthropic, OpenAI) or a list of them."""
        return await self._c.run(c.call_tools(session_id, calls))


class _Policies(_Part):
    async def session(self, session_id: str) -> dict[str, Any]:
        return await self._c.run(c.session_policy(session_id))

    async def tenant(self, tenant: str) -> dict[str, Any]:
        return await self._c.run(c.tenant_policy(tenant))

    async def set_tenant(self, tenant: str, policy: Mapping[str, Any]) -> dict[str, Any]:
        return await self._c.run(c.set_tenant_policy(tenant, policy))

    async def delete_tenant(self, tenant: str) -> None:
        await self._c.run(c.delete_tenant_policy(tenant))


class _Approvals(_Part):
    async def list(self) -> list[dict[str, Any]]:
        return await self._c.run(c.list_approvals())

    async def approve(self, session_id: str, action_id: str, reason: str | None = None) -> dict[str, Any]:
        return await self._c.run(c.decide_approval(session_id, action_id, True, reason))

    async def reject(self, session_id: str, action_id: str, reason: str | None = None) -> dict[str, Any]:
        return await self._c.run(c.decide_approval(session_id, action_id, False, reason))


class _Skills(_Part):
    async def list(self) -> list[dict[str, Any]]:
        return await self._c.run(c.list_skills())

    async def get(self, name: str) -> dict[str, Any]:
        return await self._c.run(c.get_skill(name))

    async def add(self, skill: Mapping[str, Any]) -> dict[str, Any]:
        return await self._c.run(c.add_skill(skill))

    async def delete(self, name: str) -> None:
        await self._c.run(c.delete_skill(name))


class _Hooks(_Part):
    async def list(self) -> dict[str, Any]:
        return await self._c.run(c.list_hooks())

    async def deliveries(self, *, limit: int | None = None) -> builtins.list[dict[str, Any]]:
        return await self._c.run(c.hook_deliveries(limit))

    async def for_action(self, session_id: str, action_id: str) -> builtins.list[dict[str, Any]]:
        return await self._c.run(c.action_hooks(session_id, action_id))


__all__ = ["AsyncSwitchyard", "AsyncEventStream"]
