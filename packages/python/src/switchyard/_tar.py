"""Directories as tar streams: built chunk by chunk from the disk (never whole in memory), extracted safely."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol, cast

CHUNK = 1 << 20
_BLOCK = 512


def iter_tar(root: str | os.PathLike[str], chunk_size: int = CHUNK) -> Iterator[bytes]:
    """A POSIX (pax) tar of `root`'s contents, entries relative to it, yielded as it is read from the disk.

    Each entry is its header (`TarInfo.tobuf`) then its bytes, padded to 512: what `tarfile` writes, without holding
    a file in memory. Symbolic links go as links; devices, sockets and fifos are skipped.
    """
    base = Path(root)
    if not base.is_dir():
        raise NotADirectoryError(str(base))
    for directory, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(dirnames) + sorted(filenames):
            full = Path(directory, name)
            rel = full.relative_to(base).as_posix()
            st = full.lstat()
            info = tarfile.TarInfo(rel)
            info.mode = st.st_mode & 0o7777
            info.mtime = int(st.st_mtime)
            if full.is_symlink():
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(full)
            elif full.is_dir():
                info.type = tarfile.DIRTYPE
            elif full.is_file():
                info.size = st.st_size
            else:
                continue
            yield info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
            if info.type == tarfile.REGTYPE:
                yield from _file_blocks(full, info.size, chunk_size)
    yield b"\0" * (_BLOCK * 2)


def _file_blocks(path: Path, size: int, chunk_size: int) -> Iterator[bytes]:
    sent = 0
    with open(path, "rb") as f:
        while sent < size:
            chunk = f.read(min(chunk_size, size - sent))
            if not chunk:
                # Shrunk while being read: the header already promised `size` bytes.
                raise OSError(f"{path} changed size while it was being uploaded")
            sent += len(chunk)
            yield chunk
    if size % _BLOCK:
        yield b"\0" * (_BLOCK - size % _BLOCK)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def extract_tar(stream: Readable, destination: str | os.PathLike[str]) -> None:
    """Extracts a tar read as a stream into `destination`, refusing entries that would land outside it."""
    os.makedirs(destination, exist_ok=True)
    with tarfile.open(fileobj=cast(IO[bytes], stream), mode="r|*") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(destination, filter="data")
            return
        root = os.path.realpath(destination)
        for member in tar:
            target = os.path.realpath(os.path.join(root, member.name))
            if os.path.commonpath([root, target]) != root or member.islnk() or member.isdev():
                raise tarfile.TarError(f"unsafe entry in the archive: {member.name}")
            tar.extract(member, root)
