"""The sync and async clients over an in-process transport (httpx.MockTransport) that records what they send.

The engine itself is driven in test/e2e/python-sdk.e2e-spec.ts; here, what the wire carries is checked exactly.
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import httpx
import pytest

from switchyard import AsyncSwitchyard, InvalidRequestError, NotFoundError, Switchyard
from switchyard import _verbs as v
from switchyard.models import SessionEvent

SSE = (
    "retry: 1000\n\n"
    'id: 1\nevent: process.output\ndata: {"processId": "prc_1", "stream": "stdout", "seq": 0, "chunk": "a"}\n\n'
    'id: 2\nevent: process.exited\ndata: {"processId": "prc_1", "exitCode": 0}\n\n'
    "event: session.ended\ndata: {}\n\n"
)


class Engine:
    """Answers like the engine, and keeps each request with its body read whole."""

    def __init__(self) -> None:
        self.requests: list[tuple[httpx.Request, bytes]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return self.respond(request, request.read())

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        return self.respond(request, await request.aread())

    def respond(self, request: httpx.Request, body: bytes) -> httpx.Response:
        self.requests.append((request, body))
        path = request.url.path
        if path == "/v1/sessions" and request.method == "POST":
            return httpx.Response(201, json={"id": "ses_1", **json.loads(body)})
        if path == "/v1/sessions/missing":
            return httpx.Response(404, json={"error": {"code": "NOT_FOUND", "message": "session missing not found"}})
        if path.endswith("/files/content") and request.method == "PUT":
            return httpx.Response(200, json={"path": request.url.params["path"], "size": len(body), "sha256": "0" * 64})
        if path.endswith("/files/content"):
            return httpx.Response(200, content=b"\x00\x01bytes")
        if "/terminals" in path:
            terminal = {"id": "trm_1", "status": "open", "tier": "pooled", "cols": 80, "rows": 24, "cwd": ""}
            if request.method == "GET" and path.endswith("/terminals"):
                return httpx.Response(200, json={"terminals": [terminal]})
            sent = json.loads(body) if body else {}
            return httpx.Response(200, json={**terminal, **sent, "wsPath": f"{path}/ws"})
        if path.endswith("/events"):
            return httpx.Response(200, content=SSE.encode(), headers={"content-type": "text/event-stream"})
        return httpx.Response(
            400,
            json={
                "error": {
                    "code": "VALIDATION_FAILED",
                    "message": "bad",
                    "fields": [{"path": "code", "message": "required"}],
                }
            },
        )


def sync_client(engine: Engine) -> Switchyard:
    return Switchyard("http://engine", "key-1", http_client=httpx.Client(transport=httpx.MockTransport(engine)))


def test_sync_requests_errors_and_streams() -> None:
    engine = Engine()
    sy = sync_client(engine)
    session = sy.sessions.create(template="data-science", ttl_seconds=5)
    assert session.id == "ses_1" and session.ttl_seconds == 5
    request, body = engine.requests[0]
    assert request.headers["authorization"] == "Bearer key-1"
    assert json.loads(body) == {"template": "data-science", "ttlSeconds": 5}
    with pytest.raises(NotFoundError) as nf:
        sy.sessions.get("missing")
    assert nf.value.code == "NOT_FOUND"
    with pytest.raises(InvalidRequestError) as bad:
        sy.actions.run("ses_1", {"type": "code"})
    assert bad.value.field == "code"
    # A file object goes up in chunks, whole; the query names the path and overwrite=false when asked.
    data = bytes(range(256)) * 9000
    info = sy.files.write("ses_1", "d/big.bin", io.BytesIO(data), overwrite=False)
    request, body = engine.requests[-1]
    assert body == data and info.size == len(data)
    assert request.url.params["path"] == "d/big.bin" and request.url.params["overwrite"] == "false"
    assert "content-length" not in request.headers  # streamed (chunked), not buffered
    assert sy.files.read_bytes("ses_1", "d/big.bin") == b"\x00\x01bytes"
    events = list(sy.events("ses_1"))
    assert [(e.type, e.id) for e in events] == [("process.output", 1), ("process.exited", 2), ("session.ended", None)]


def test_terminals_requests() -> None:
    engine = Engine()
    sy = sync_client(engine)
    opened = sy.terminals.open("ses_1", cols=100, rows=30, env={"A": "1"})
    assert json.loads(engine.requests[-1][1]) == {"cols": 100, "rows": 30, "env": {"A": "1"}}
    assert opened["cols"] == 100
    resized = sy.terminals.resize("ses_1", "trm_1", 120, 40)
    assert (resized.id, resized.cols, resized.rows) == ("trm_1", 120, 40)
    assert engine.requests[-1][0].url.path == "/v1/sessions/ses_1/terminals/trm_1/resize"
    assert [t.id for t in sy.terminals.list("ses_1")] == ["trm_1"]
    sy.terminals.token("ses_1", "trm_1", ttl_seconds=60)
    assert json.loads(engine.requests[-1][1]) == {"ttlSeconds": 60}
    sy.terminals.close("ses_1", "trm_1")
    assert (engine.requests[-1][0].method, engine.requests[-1][0].url.path) == (
        "DELETE",
        "/v1/sessions/ses_1/terminals/trm_1",
    )

    async def run() -> str:
        client = AsyncSwitchyard(
            "http://engine", http_client=httpx.AsyncClient(transport=httpx.MockTransport(engine.handle_async))
        )
        return (await client.terminals.get("ses_1", "trm_1")).id

    assert asyncio.run(run()) == "trm_1"


def test_async_client_mirrors_it() -> None:
    engine = Engine()

    async def run() -> list[SessionEvent]:
        sy = AsyncSwitchyard(
            "http://engine", http_client=httpx.AsyncClient(transport=httpx.MockTransport(engine.handle_async))
        )
        assert (await sy.sessions.create(metadata={"k": "v"})).metadata == {"k": "v"}

        async def chunks() -> Any:
            yield b"one,"
            yield b"two"

        assert (await sy.files.write("ses_1", "f.txt", chunks())).size == 7
        with pytest.raises(NotFoundError):
            await sy.sessions.get("missing")
        return [e async for e in sy.events("ses_1")]

    events = asyncio.run(run())
    assert [body for r, body in engine.requests if r.method == "PUT"] == [b"one,two"]
    assert "authorization" not in engine.requests[0][0].headers
    assert [e.type for e in events] == ["process.output", "process.exited", "session.ended"]


def test_dispatcher_hands_early_output_to_the_handle_in_order() -> None:
    dispatcher = v.Dispatcher()
    seen: list[str] = []
    dispatcher.begin_start()
    # Output of the new process, before its start answered with its id; and another process's, never registered.
    dispatcher.dispatch(
        SessionEvent("process.output", {"processId": "prc_1", "seq": 0, "chunk": "a", "stream": "stdout"})
    )
    dispatcher.dispatch(
        SessionEvent("process.output", {"processId": "prc_9", "seq": 0, "chunk": "x", "stream": "stdout"})
    )
    state = v.ProcessState("prc_1", seen.append, None)
    dispatcher.register(state)
    dispatcher.end_start()
    dispatcher.dispatch(
        SessionEvent("process.output", {"processId": "prc_1", "seq": 1, "chunk": "b", "stream": "stdout"})
    )
    # A replay after a reconnection repeats a chunk: delivered once.
    dispatcher.dispatch(
        SessionEvent("process.output", {"processId": "prc_1", "seq": 1, "chunk": "b", "stream": "stdout"})
    )
    dispatcher.dispatch(
        SessionEvent("process.output", {"processId": "prc_1", "seq": 2, "chunk": "e", "stream": "stderr"})
    )
    assert not state.exited.is_set()
    dispatcher.dispatch(SessionEvent("process.exited", {"processId": "prc_1", "exitCode": 4}))
    assert seen == ["a", "b"] and state.exited.is_set()
    result = state.result(None)
    assert (result.exit_code, result.stdout, result.stderr) == (4, "ab", "e")
