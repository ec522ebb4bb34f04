"""Bodies that go up in chunks: what `files.write` accepts, turned into a byte iterator (sync) or async iterator."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import IO, Any

from ._tar import CHUNK

#: What `files.write` takes: text (written as UTF-8), bytes, a binary file object, or an iterator of byte chunks
#: (an async one too, in the async client).
WriteData = str | bytes | bytearray | memoryview | IO[bytes] | Iterable[bytes] | AsyncIterable[bytes]


def _read_chunks(f: IO[Any], chunk_size: int) -> Iterator[bytes]:
    while True:
        chunk = f.read(chunk_size)
        if not chunk:
            return
        yield chunk.encode() if isinstance(chunk, str) else bytes(chunk)


def sync_body(data: WriteData, chunk_size: int = CHUNK) -> bytes | Iterator[bytes]:
    """Bytes for small in-memory data; a chunk iterator (streamed with chunked encoding) for files and iterators."""
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        return _read_chunks(data, chunk_size)  # type: ignore[arg-type]
    if isinstance(data, AsyncIterable):
        raise TypeError("an async iterator is for AsyncSandbox; Sandbox.files.write takes a sync one")
    return (bytes(c) for c in data)


async def _aread_chunks(f: IO[Any], chunk_size: int) -> AsyncIterator[bytes]:
    # A disk read may block: each one runs in a worker thread so the event loop keeps going.
    while True:
        chunk = await asyncio.to_thread(f.read, chunk_size)
        if not chunk:
            return
        yield chunk.encode() if isinstance(chunk, str) else bytes(chunk)


async def _aiter_sync(it: Iterator[bytes]) -> AsyncIterator[bytes]:
    done = object()
    while True:
        chunk = await asyncio.to_thread(next, it, done)
        if chunk is done:
            return
        yield chunk  # type: ignore[misc]


def async_body(data: WriteData | Iterator[bytes], chunk_size: int = CHUNK) -> bytes | AsyncIterator[bytes]:
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        return _aread_chunks(data, chunk_size)  # type: ignore[arg-type]
    if isinstance(data, AsyncIterable):
        return data.__aiter__()
    return _aiter_sync(iter(data))


def local_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)
