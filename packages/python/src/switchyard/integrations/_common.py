"""What the adapters share: a tool call to the engine in the `{id, name, input}` shape, and its answer as text."""

from __future__ import annotations

import json
import uuid
from typing import Any

from ..errors import InvalidRequestError


def tool_call(name: str, arguments: str | dict[str, Any] | None, call_id: str | None = None) -> dict[str, Any]:
    """The engine's generic call shape; `arguments` as the model sent them (a JSON string) or already parsed."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError as error:
            raise InvalidRequestError(f"{name}: arguments are not JSON ({error})", 400, "INVALID_ARGUMENTS") from error
    else:
        parsed = arguments or {}
    return {"id": call_id or f"call_{uuid.uuid4().hex[:16]}", "name": name, "input": parsed}


def answer_text(answer: Any) -> str:
    """The answer's `content` as text: a string as is; Anthropic-style blocks joined (an image named, not inlined)."""
    content = answer.get("content") if isinstance(answer, dict) else answer
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append(f"[image {block.get('source', {}).get('media_type', '')}]")
    return "\n".join(parts)


def missing(package: str, extra: str) -> ImportError:
    return ImportError(f"{package} is not installed: pip install 'switchyard[{extra}]' (or pip install {package})")
