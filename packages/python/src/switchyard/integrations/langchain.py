"""The session's tools as LangChain `StructuredTool`s (`pip install 'switchyard[langchain]'`).

    from switchyard.integrations.langchain import structured_tools
    tools = structured_tools(sbx)          # e.g. model.bind_tools(tools), or a LangGraph ToolNode
    tools[0].invoke({"command": "ls"})

Each tool's `args_schema` is the engine's JSON Schema (`GET /v1/tools?format=openai`, what this session's policy
offers); a call runs through `POST /v1/sessions/:id/tool-calls` and answers the result's text. A sync `Sandbox`
gives tools with a sync `func` (and `ainvoke` runs it in a thread); an `AsyncSandbox` gives tools with a `coroutine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..async_sandbox import AsyncSandbox
from ..sandbox import Sandbox
from ._common import answer_text, missing, tool_call

if TYPE_CHECKING:
    from langchain_core.tools import StructuredTool


def _structured_tool_class() -> Any:
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as error:
        raise missing("langchain-core", "langchain") from error
    return StructuredTool


def structured_tools(sandbox: Sandbox) -> list[StructuredTool]:
    structured_tool = _structured_tool_class()
    tools = []
    for definition in sandbox.tools.definitions("openai"):
        fn = definition["function"]

        def run(_name: str = fn["name"], **arguments: Any) -> str:
            return answer_text(sandbox.tools.call(tool_call(_name, arguments)))

        tools.append(
            structured_tool(
                name=fn["name"], description=fn.get("description", ""), args_schema=fn["parameters"], func=run
            )
        )
    return tools


async def async_structured_tools(sandbox: AsyncSandbox) -> list[StructuredTool]:
    structured_tool = _structured_tool_class()
    tools = []
    for definition in await sandbox.tools.definitions("openai"):
        fn = definition["function"]

        async def run(_name: str = fn["name"], **arguments: Any) -> str:
            return answer_text(await sandbox.tools.call(tool_call(_name, arguments)))

        tools.append(
            structured_tool(
                name=fn["name"], description=fn.get("description", ""), args_schema=fn["parameters"], coroutine=run
            )
        )
    return tools
