"""An incremental `text/event-stream` parser (the HTML spec's rules), shared by the sync and async event iterators."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .models import SessionEvent

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass
class SseMessage:
    event: str
    data: str
    id: str | None = None


class SseParser:
    """Feed it decoded chunks in order; it returns the messages they complete.

    Comments (`: keep-alive`) are dropped; lines may end in LF, CR or CRLF and break anywhere between chunks.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self.retry_ms: int | None = None

    def push(self, chunk: str) -> list[SseMessage]:
        self._buffer += chunk
        out: list[SseMessage] = []
        while True:
            match = _LINE_END.search(self._buffer)
            # A lone CR at the end may be the first half of a CRLF: wait for the next chunk.
            if not match or (match.group() == "\r" and match.start() == len(self._buffer) - 1):
                break
            line = self._buffer[: match.start()]
            self._buffer = self._buffer[match.end() :]
            message = self._line(line)
            if message:
                out.append(message)
        return out

    def _line(self, line: str) -> SseMessage | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseMessage | None:
        message = None
        if self._data:
            message = SseMessage(self._event or "message", "\n".join(self._data), self._id)
        self._data = []
        self._event = ""
        self._id = None
        return message


def to_event(message: SseMessage) -> SessionEvent:
    try:
        parsed = json.loads(message.data)
        data = parsed if isinstance(parsed, dict) else {"value": parsed}
    except ValueError:
        data = {"raw": message.data}
    event_id = int(message.id) if message.id and message.id.isdigit() else None
    return SessionEvent(type=message.event, data=data, id=event_id)
