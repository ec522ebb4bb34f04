from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from switchyard._tar import extract_tar, iter_tar


def test_the_stream_is_a_tar_of_the_directory(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "a.txt").write_text("hello")
    big = os.urandom(3 * 512 + 7)
    (src / "sub" / "big.bin").write_bytes(big)
    (src / ("n" * 120 + ".txt")).write_text("a long name goes in a pax header")
    (src / "link").symlink_to("a.txt")
    (src / "empty").mkdir()
    chunks = list(iter_tar(src, chunk_size=1000))
    assert max(len(c) for c in chunks) <= 1024 * 2
    data = b"".join(chunks)
    assert len(data) % 512 == 0
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = sorted(tar.getnames())
        assert names == sorted(["a.txt", "sub", "sub/deep", "sub/big.bin", "n" * 120 + ".txt", "link", "empty"])
        member = tar.extractfile("sub/big.bin")
        assert member is not None and member.read() == big
        assert tar.getmember("link").issym()
    out = tmp_path / "out"
    extract_tar(io.BytesIO(data), out)
    assert (out / "sub" / "big.bin").read_bytes() == big and (out / "empty").is_dir()


def test_extraction_refuses_an_entry_outside_the_destination(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    buf.seek(0)
    with pytest.raises(tarfile.TarError):
        extract_tar(buf, tmp_path / "dest")
    assert not (tmp_path / "escape.txt").exists()


def test_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError):
        list(iter_tar(tmp_path / "f"))
