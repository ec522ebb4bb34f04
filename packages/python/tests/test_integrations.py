"""The adapters with the real openai-agents and langchain-core packages, over an in-process transport.

What the engine answers is canned here (the e2e drives a real one): this checks what each framework gets and what
reaches the engine when it invokes a tool as it would in a run.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from agents.tool_context import ToolContext

from switchyard import AsyncSandbox, AsyncSwitchyard, Sandbox, Switchyard
from switchyard.integrations._common import answer_text
from switchyard.integrations.langchain import async_structured_tools, structured_tools
from switchyard.integrations.openai_agents import async_function_tools, function_tools
from switchyard.models import Session

SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
OPEN = {"type": "object", "properties": {"x": {"type": "object"}}, "required": []}
TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run bash", "parameters": SCHEMA, "strict": True}},
    {"type": "function", "function": {"name": "skill", "description": "A skill", "parameters": OPEN, "strict": False}},
]


class Engine:
    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.queries: list[dict[str, str]] = []

    def respond(self, request: httpx.Request, body: bytes) -> httpx.Response:
        if request.url.path == "/v1/tools":
            self.queries.append(dict(request.url.params))
            return httpx.Response(200, json={"tools": TOOLS})
        call = json.loads(body)
        self.calls.append(call)
        text = f"[stdout]\n{call['input'].get('command')}\n\n[exit_code]\n0"
        return httpx.Response(200, json={"tool_use_id": call["id"], "content": text, "is_error": False})

    def sync(self, request: httpx.Request) -> httpx.Response:
        return self.respond(request, request.read())

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        return self.respond(request, await request.aread())


def sandbox(engine: Engine) -> Sandbox:
    client = Switchyard("http://engine", http_client=httpx.Client(transport=httpx.MockTransport(engine.sync)))
    return Sandbox(client, Session(id="ses_1"))


def test_function_tools_carry_the_engine_schemas_and_call_through_tool_calls() -> None:
    engine = Engine()
    tools = function_tools(sandbox(engine))
    assert engine.queries == [{"format": "openai", "strict": "true", "sessionId": "ses_1"}]
    assert [(t.name, t.strict_json_schema) for t in tools] == [("bash", True), ("skill", False)]
    assert tools[0].params_json_schema["properties"] == SCHEMA["properties"]
    args = json.dumps({"command": "echo hi"})
    ctx = ToolContext(context=None, tool_name="bash", tool_call_id="call_7", tool_arguments=args)
    answer = asyncio.run(tools[0].on_invoke_tool(ctx, args))
    assert answer == "[stdout]\necho hi\n\n[exit_code]\n0"
    assert engine.calls == [{"id": "call_7", "name": "bash", "input": {"command": "echo hi"}}]


def test_structured_tools_invoke_as_langchain_does() -> None:
    engine = Engine()
    tools = structured_tools(sandbox(engine))
    assert engine.queries == [{"format": "openai", "sessionId": "ses_1"}]
    assert tools[0].args == SCHEMA["properties"]
    assert tools[0].invoke({"command": "ls"}) == "[stdout]\nls\n\n[exit_code]\n0"
    # ainvoke of a sync tool runs it in a thread.
    assert asyncio.run(tools[0].ainvoke({"command": "pwd"})).startswith("[stdout]\npwd")
    assert [c["input"] for c in engine.calls] == [{"command": "ls"}, {"command": "pwd"}]


def test_async_adapters() -> None:
    engine = Engine()

    async def run() -> tuple[str, str]:
        client = AsyncSwitchyard(
            "http://engine", http_client=httpx.AsyncClient(transport=httpx.MockTransport(engine.handle_async))
        )
        sbx = AsyncSandbox(client, Session(id="ses_1"))
        [agents_bash, _] = await async_function_tools(sbx)
        ctx = ToolContext(context=None, tool_name="bash", tool_call_id="c1", tool_arguments="{}")
        first = await agents_bash.on_invoke_tool(ctx, '{"command": "a"}')
        [lc_bash, _] = await async_structured_tools(sbx)
        return first, await lc_bash.ainvoke({"command": "b"})

    assert asyncio.run(run()) == ("[stdout]\na\n\n[exit_code]\n0", "[stdout]\nb\n\n[exit_code]\n0")


def test_answer_text_of_image_blocks() -> None:
    blocks = [
        {"type": "text", "text": "[image]\ndot.png: image/png, 69 B"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
    ]
    assert answer_text({"content": blocks}) == "[image]\ndot.png: image/png, 69 B\n[image image/png]"
