"""The session's tools as the OpenAI Agents SDK's `FunctionTool`s (`pip install 'switchyard[openai-agents]'`).

    from agents import Agent
    from switchyard.integrations.openai_agents import function_tools
    agent = Agent(name="coder", tools=function_tools(sbx))

Each tool's schema is the engine's strict one (`GET /v1/tools?format=openai&strict=true`, what this session's
policy offers); invoking it runs the call through `POST /v1/sessions/:id/tool-calls`. A refused or failed call is
text for the model (`is_error` answers say why), not an exception that would end the run.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..async_sandbox import AsyncSandbox
from ..sandbox import Sandbox
from ._common import answer_text, missing, tool_call

if TYPE_CHECKING:
    from agents import FunctionTool


def _function_tool_class() -> Any:
    try:
        from agents import FunctionTool
    except ImportError as error:
        raise missing("openai-agents", "openai-agents") from error
    return FunctionTool


def _build(definitions: list[dict[str, Any]], invoke: Any) -> list[FunctionTool]:
    function_tool = _function_tool_class()
    tools = []
    for definition in definitions:
        fn = definition["function"]

        async def on_invoke_tool(ctx: Any, arguments: str, _name: str = fn["name"]) -> str:
            call = tool_call(_name, arguments, getattr(ctx, "tool_call_id", None))
            return answer_text(await invoke(call))

        tools.append(
            function_tool(
                name=fn["name"],
                description=fn.get("description", ""),
                params_json_schema=fn["parameters"],
                on_invoke_tool=on_invoke_tool,
                # A skill whose input strict mode cannot say is served with strict false: keep it that way.
                strict_json_schema=bool(fn.get("strict", True)),
            )
        )
    return tools


def function_tools(sandbox: Sandbox) -> list[FunctionTool]:
    """`FunctionTool`s for a `Sandbox`; each call runs in a worker thread so the agent's event loop keeps going."""
    definitions = sandbox.tools.definitions("openai", strict=True)

    async def invoke(call: dict[str, Any]) -> Any:
        return await asyncio.to_thread(sandbox.tools.call, call)

    return _build(definitions, invoke)


async def async_function_tools(sandbox: AsyncSandbox) -> list[FunctionTool]:
    """`FunctionTool`s for an `AsyncSandbox`."""
    return _build(await sandbox.tools.definitions("openai", strict=True), sandbox.tools.call)
