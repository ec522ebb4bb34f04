"""`Switchyard`: the whole REST API, synchronous, one method per endpoint (requests built in `_core`)."""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, TypeVar
from urllib.parse import unquote

import httpx

from . import _core as c
from . import models as m
from ._sse import SseParser, to_event
from ._streams import WriteData, sync_body
from .errors import SwitchyardError, WaitTimeoutError, connection_error, error_from_response

_T = TypeVar("_T")

DEFAULT_TIMEOUT = httpx.Timeout(None, connect=10.0)


class Switchyard:
    """A client of one engine. Settings, by precedence: argument > env (SWITCHYARD_URL, SWITCHYARD_API_KEY) > default.

    Every method raises a `SwitchyardError` subclass when the engine refuses the request (`switchyard.errors`).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url, self.api_key = c.resolve_settings(base_url, api_key)
        self._http = http_client or httpx.Client(timeout=timeout)
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

    def run(self, call: c.Call[_T]) -> _T:
        """Sends one prepared request and parses its answer."""
        return call.parse(
            self.request(
                call.method, call.path, query=call.params(), content=call.content(), headers=call.all_headers()
            )
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | Iterator[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Any request to the engine (`path` from the root, e.g. `/v1/whoami`): its JSON answer, or its text.

        `json` sends a JSON body; `content` raw bytes or a chunk iterator. Non-2xx raises the typed error.
        """
        all_headers = {**c.auth_headers(self.api_key), **(headers or {})}
        if json is not None:
            content = c.Call("POST", path, json=json, has_body=True).content()
            all_headers.setdefault("content-type", "application/json")
        try:
            response = self._http.request(
                method,
                self.base_url + path,
                params=c.query_params(query),
                content=content,
                headers=all_headers,
            )
        except httpx.TransportError as error:
            raise connection_error(self.base_url, error) from error
        return c.decode(response.status_code, response.content)

    def stream(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        content: bytes | Iterator[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """A request whose answer is read as it comes (the caller closes it). Non-2xx raises the typed error."""
        request = self._http.build_request(
            method,
            self.base_url + path,
            params=c.query_params(query),
            content=content,
            headers={**c.auth_headers(self.api_key), **(headers or {})},
        )
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as error:
            raise connection_error(self.base_url, error) from error
        if response.status_code >= 400:
            try:
                content = response.read()
            finally:
                response.close()
            c.decode(response.status_code, content)
        return response

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Switchyard:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ---- top level ----

    def health(self) -> dict[str, Any]:
        return self.run(c.health())

    def templates(self) -> list[m.Template]:
        return self.run(c.list_templates())

    def whoami(self) -> dict[str, Any]:
        return self.run(c.whoami())

    def graph(
        self,
        session_id: str,
        *,
        types: list[str] | None = None,
        status: list[str] | None = None,
        since: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        return self.run(c.graph(session_id, types, status, since, limit))

    def events(self, session_id: str, *, last_event_id: int | None = None, max_reconnects: int = 5) -> EventStream:
        """The session's events, live; reconnects with Last-Event-ID after a dropped connection.

        Ends after `session.ended`, or when closed (`with client.events(sid) as events: for e in events: …`).
        """
        return EventStream(self, session_id, last_event_id, max_reconnects)

    def _wait(
        self, get: Callable[[], Any], done: Callable[[Any], bool], timeout: float, interval: float, what: str
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = get()
            if done(value):
                return value
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(f"{what} did not finish in {timeout} s", 0, "WAIT_TIMEOUT")
            time.sleep(interval)


class EventStream:
    """An iterator of a session's events over SSE (`GET …/events`), closeable from another thread."""

    def __init__(self, client: Switchyard, session_id: str, last_event_id: int | None, max_reconnects: int) -> None:
        self._client = client
        self._session_id = session_id
        self._last_id = None if last_event_id is None else str(last_event_id)
        self._max_reconnects = max_reconnects
        self._response: httpx.Response | None = None
        self._closed = False
        self._lock = threading.Lock()
        self.connected = threading.Event()
        """Set once the engine has subscribed this stream: events published from then on reach it."""
        self._gen = self._events()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> m.SessionEvent:
        return next(self._gen)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            response = self._response
        if response is not None:
            response.close()

    def _events(self) -> Iterator[m.SessionEvent]:
        failures = 0
        first = True
        delay = 1.0
        path = f"{c.session_path(self._session_id)}/events"
        while not self._closed:
            if not first:
                time.sleep(delay)
            try:
                response = self._client.stream("GET", path, headers=c.event_headers(None, self._last_id))
            except SwitchyardError as error:
                # The first connection failing is the caller's to see; a later one is a drop ridden out.
                if first or error.status != 0 or failures >= self._max_reconnects:
                    raise
                failures += 1
                continue
            first = False
            with self._lock:
                if self._closed:
                    response.close()
                    return
                self._response = response
            parser = SseParser()
            try:
                for chunk in response.iter_text():
                    for message in parser.push(chunk):
                        if message.id:
                            self._last_id = message.id
                        event = to_event(message)
                        yield event
                        if event.type == "session.ended":
                            return
                    if parser.retry_ms is not None:
                        # The engine writes `retry:` right after it subscribed this stream.
                        self.connected.set()
                failures = 0
            except (httpx.TransportError, httpx.StreamError, RuntimeError):
                if self._closed:
                    return
            finally:
                response.close()
            if parser.retry_ms is not None:
                delay = parser.retry_ms / 1000


class _Part:
    def __init__(self, client: Switchyard) -> None:
        self._c = client


class _Sessions(_Part):
    def create(
        self,
        *,
        template: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: int | None = None,
        policy: Mapping[str, Any] | None = None,
        network: Mapping[str, Any] | None = None,
        max_concurrent_actions: int | None = None,
    ) -> m.Session:
        return self._c.run(
            c.create_session(
                template=template,
                metadata=metadata,
                ttl_seconds=ttl_seconds,
                policy=policy,
                network=network,
                max_concurrent_actions=max_concurrent_actions,
            )
        )

    def get(self, session_id: str) -> m.Session:
        return self._c.run(c.get_session(session_id))

    def list(self) -> list[m.Session]:
        return self._c.run(c.list_sessions())

    def delete(self, session_id: str) -> None:
        self._c.run(c.delete_session(session_id))

    def fork(
        self, session_id: str, checkpoint_id: str | None = None, *, idempotency_key: str | None = None
    ) -> m.Session:
        return self._c.run(c.fork_session(session_id, checkpoint_id, idempotency_key))


class _Actions(_Part):
    def run(
        self,
        session_id: str,
        action: Mapping[str, Any],
        *,
        checkpoint: Literal["before"] | None = None,
        idempotency_key: str | None = None,
    ) -> m.Action:
        """Runs any action (`{"type": "code" | "file" | "browser" | "process" | "kernel" | "skill", …}`)."""
        return self._c.run(c.run_action(session_id, action, checkpoint=checkpoint, idempotency_key=idempotency_key))

    def start(
        self,
        session_id: str,
        action: Mapping[str, Any],
        *,
        checkpoint: Literal["before"] | None = None,
        idempotency_key: str | None = None,
    ) -> m.Action:
        """Submits it and answers at once (`running`); follow it with `wait` or the events."""
        return self._c.run(
            c.run_action(session_id, action, wait=False, checkpoint=checkpoint, idempotency_key=idempotency_key)
        )

    def get(self, session_id: str, action_id: str) -> m.Action:
        return self._c.run(c.get_action(session_id, action_id))

    def list(self, session_id: str, *, cursor: str | None = None, limit: int | None = None) -> m.ActionPage:
        return self._c.run(c.list_actions(session_id, cursor, limit))

    def cancel(self, session_id: str, action_id: str) -> m.Action:
        return self._c.run(c.cancel_action(session_id, action_id))

    def retry(self, session_id: str, action_id: str, **options: Any) -> m.Action:
        """`action=` a revised action, `restore=True`, `escalate=True`, `reason=`, `wait=`, `checkpoint="before"`."""
        return self._c.run(c.retry_action(session_id, action_id, **options))

    def context(self, session_id: str, action_id: str, *, before: int | None = None) -> dict[str, Any]:
        return self._c.run(c.action_context(session_id, action_id, before))

    def wait(self, session_id: str, action_id: str, *, timeout: float = 600, interval: float = 0.25) -> m.Action:
        """Polls the action until it ends (no longer `running` or `awaiting_approval`)."""
        action: m.Action = self._c._wait(
            lambda: self.get(session_id, action_id),
            lambda a: a.status not in ("running", "awaiting_approval"),
            timeout,
            interval,
            f"action {action_id}",
        )
        return action


class _Files(_Part):
    def write(self, session_id: str, path: str, data: WriteData, *, overwrite: bool = True) -> m.WriteInfo:
        """Streams `data` into the file at `path` (`PUT …/files/content`): atomic, parents made, up to the quota."""
        body = self._c.request(
            "PUT",
            c.files_content_path(session_id),
            query={"path": path, "overwrite": None if overwrite else "false"},
            content=sync_body(data),
            headers={"content-type": "application/octet-stream"},
        )
        return m.WriteInfo.from_api(body)

    def open(self, session_id: str, path: str, *, range: tuple[int, int | None] | None = None) -> httpx.Response:
        """The file's bytes as a streamed answer (`GET …/files/content`); close it when done."""
        headers = {}
        if range is not None:
            start, end = range
            headers["range"] = f"bytes={start}-{'' if end is None else end}"
        return self._c.stream("GET", c.files_content_path(session_id), query={"path": path}, headers=headers)

    def read_bytes(self, session_id: str, path: str) -> bytes:
        response = self.open(session_id, path)
        try:
            return response.read()
        finally:
            response.close()

    def iter_bytes(self, session_id: str, path: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        response = self.open(session_id, path)
        try:
            yield from response.iter_bytes(chunk_size)
        finally:
            response.close()

    def upload_archive(self, session_id: str, tar: bytes | Iterator[bytes], path: str | None = None) -> m.ArchiveInfo:
        """Extracts a tar (or tar.gz) into the directory `path` (`PUT …/files/archive`; default the workspace root)."""
        body = self._c.request(
            "PUT",
            c.files_archive_path(session_id),
            query={"path": path},
            content=tar,
            headers={"content-type": "application/x-tar"},
        )
        return m.ArchiveInfo.from_api(body)

    def download_archive(self, session_id: str, path: str | None = None) -> httpx.Response:
        """The directory `path` as a streamed tar (`GET …/files/archive`); close it when done."""
        return self._c.stream("GET", c.files_archive_path(session_id), query={"path": path})

    def lineage(self, session_id: str, path: str) -> dict[str, Any]:
        return self._c.run(c.file_lineage(session_id, path))


class _Checkpoints(_Part):
    def create(self, session_id: str, label: str | None = None, *, idempotency_key: str | None = None) -> m.Checkpoint:
        return self._c.run(c.create_checkpoint(session_id, label, idempotency_key))

    def list(self, session_id: str) -> list[m.Checkpoint]:
        return self._c.run(c.list_checkpoints(session_id))

    def get(self, session_id: str, checkpoint_id: str) -> m.Checkpoint:
        return self._c.run(c.get_checkpoint(session_id, checkpoint_id))

    def delete(self, session_id: str, checkpoint_id: str) -> None:
        self._c.run(c.delete_checkpoint(session_id, checkpoint_id))

    def restore(self, session_id: str, checkpoint_id: str) -> m.CheckpointRestore:
        return self._c.run(c.restore_checkpoint(session_id, checkpoint_id))

    def diff(self, session_id: str, checkpoint_id: str, to: str = "current") -> dict[str, Any]:
        return self._c.run(c.diff_checkpoint(session_id, checkpoint_id, to))


class _Kernels(_Part):
    def list(self, session_id: str) -> list[m.Kernel]:
        return self._c.run(c.list_kernels(session_id))

    def get(self, session_id: str, kernel_id: str) -> m.Kernel:
        return self._c.run(c.get_kernel(session_id, kernel_id))

    def interrupt(self, session_id: str, kernel_id: str) -> dict[str, Any]:
        return self._c.run(c.interrupt_kernel(session_id, kernel_id))

    def restart(self, session_id: str, kernel_id: str) -> m.Kernel:
        return self._c.run(c.restart_kernel(session_id, kernel_id))

    def delete(self, session_id: str, kernel_id: str) -> None:
        self._c.run(c.delete_kernel(session_id, kernel_id))


class _Ports(_Part):
    """A session's servers: its listening ports, preview links, and requests through the engine's proxy."""

    def list(self, session_id: str) -> list[dict[str, Any]]:
        return self._c.run(c.list_ports(session_id))

    def preview(self, session_id: str, port: int, ttl_seconds: int | None = None) -> dict[str, Any]:
        return self._c.run(c.preview_port(session_id, port, ttl_seconds))

    def request(
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
        return self._c.request(method, c.port_path(session_id, port, path), content=content, headers=headers)


class _Browser(_Part):
    """Watching the session's browser (not an action: nothing is recorded, nothing runs in the page)."""

    def view(self, session_id: str) -> dict[str, Any]:
        """`{image: bytes (JPEG), url, title, tab}` of the current tab; `NotFoundError` (`NO_BROWSER`) without one."""
        response = self._c.stream("GET", c.browser_view_path(session_id))
        try:
            image = response.read()
        finally:
            response.close()
        return {
            "image": image,
            "url": unquote(response.headers.get("x-switchyard-page-url", "")),
            "title": unquote(response.headers.get("x-switchyard-page-title", "")),
            "tab": response.headers.get("x-switchyard-tab", ""),
        }


class _Terminals(_Part):
    """Shells (PTYs) in a session's sandbox, driven over their WebSocket (`ws_path`; docs/terminals.md)."""

    def open(
        self,
        session_id: str,
        *,
        cols: int | None = None,
        rows: int | None = None,
        cwd: str | None = None,
        command: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        return self._c.run(c.open_terminal(session_id, cols=cols, rows=rows, cwd=cwd, command=command, env=env))

    def list(self, session_id: str) -> list[m.Terminal]:
        return self._c.run(c.list_terminals(session_id))

    def get(self, session_id: str, terminal_id: str) -> m.Terminal:
        return self._c.run(c.get_terminal(session_id, terminal_id))

    def resize(self, session_id: str, terminal_id: str, cols: int, rows: int) -> m.Terminal:
        return self._c.run(c.resize_terminal(session_id, terminal_id, cols, rows))

    def token(self, session_id: str, terminal_id: str, ttl_seconds: int | None = None) -> dict[str, Any]:
        return self._c.run(c.terminal_token(session_id, terminal_id, ttl_seconds))

    def close(self, session_id: str, terminal_id: str) -> dict[str, Any]:
        return self._c.run(c.close_terminal(session_id, terminal_id))


class _Plans(_Part):
    def create(self, session_id: str, plan: Mapping[str, Any], *, idempotency_key: str | None = None) -> m.Plan:
        """`plan`: `{"steps": [{"id", "action", "dependsOn"?…}], "goal"?, …}` (docs/plans-and-events.md)."""
        return self._c.run(c.create_plan(session_id, plan, idempotency_key))

    def get(self, session_id: str, plan_id: str) -> m.Plan:
        return self._c.run(c.get_plan(session_id, plan_id))

    def list(self, session_id: str) -> list[m.Plan]:
        return self._c.run(c.list_plans(session_id))

    def replan(self, session_id: str, plan_id: str, body: Mapping[str, Any]) -> m.Plan:
        return self._c.run(c.replan(session_id, plan_id, body))

    def cancel(self, session_id: str, plan_id: str) -> m.Plan:
        return self._c.run(c.cancel_plan(session_id, plan_id))

    def wait(self, session_id: str, plan_id: str, *, timeout: float = 600, interval: float = 0.25) -> m.Plan:
        """Polls until the plan ends or needs a replan."""
        plan: m.Plan = self._c._wait(
            lambda: self.get(session_id, plan_id),
            lambda p: p.status in c.FINAL_PLAN,
            timeout,
            interval,
            f"plan {plan_id}",
        )
        return plan


class _Tools(_Part):
    def list(
        self, *, format: c.ToolFormat | None = None, strict: bool | None = None, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The tool catalog in a model API's shape; with `session_id`, what that session's policy offers."""
        return self._c.run(c.list_tools(format, strict, session_id))

    def call(self, session_id: str, calls: Any) -> Any:
        """Runs one tool call (any shape the engine takes: `{id, name, input}`, Anthropic, OpenAI) or a list of them."""
        return self._c.run(c.call_tools(session_id, calls))


class _Policies(_Part):
    def session(self, session_id: str) -> dict[str, Any]:
        return self._c.run(c.session_policy(session_id))

    def tenant(self, tenant: str) -> dict[str, Any]:
        return self._c.run(c.tenant_policy(tenant))

    def set_tenant(self, tenant: str, policy: Mapping[str, Any]) -> dict[str, Any]:
        return self._c.run(c.set_tenant_policy(tenant, policy))

    def delete_tenant(self, tenant: str) -> None:
        self._c.run(c.delete_tenant_policy(tenant))


class _Approvals(_Part):
    def list(self) -> list[dict[str, Any]]:
        return self._c.run(c.list_approvals())

    def approve(self, session_id: str, action_id: str, reason: str | None = None) -> dict[str, Any]:
        return self._c.run(c.decide_approval(session_id, action_id, True, reason))

    def reject(self, session_id: str, action_id: str, reason: str | None = None) -> dict[str, Any]:
        return self._c.run(c.decide_approval(session_id, action_id, False, reason))


class _Skills(_Part):
    def list(self) -> list[dict[str, Any]]:
        return self._c.run(c.list_skills())

    def get(self, name: str) -> dict[str, Any]:
        return self._c.run(c.get_skill(name))

    def add(self, skill: Mapping[str, Any]) -> dict[str, Any]:
        return self._c.run(c.add_skill(skill))

    def delete(self, name: str) -> None:
        self._c.run(c.delete_skill(name))


class _Hooks(_Part):
    def list(self) -> dict[str, Any]:
        return self._c.run(c.list_hooks())

    def deliveries(self, *, limit: int | None = None) -> builtins.list[dict[str, Any]]:
        return self._c.run(c.hook_deliveries(limit))

    def for_action(self, session_id: str, action_id: str) -> builtins.list[dict[str, Any]]:
        return self._c.run(c.action_hooks(session_id, action_id))


__all__ = ["Switchyard", "EventStream", "error_from_response"]
