"""tree_tool.py (the checkpoint tree tool): count, sync, diff and prune over real trees, through its JSON lines."""

import errno
import os
import stat

import pytest


def make_tree(root):
    """A small workspace: files (one executable), a subdirectory, a symlink (never followed) and a fifo."""
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\nbeta\n")
    (root / "sub" / "b.bin").write_bytes(b"\0\1\2" * 100)
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("/etc/passwd", root / "link")
    os.mkfifo(root / "pipe")
    os.utime(root / "a.txt", ns=(1_000_000_000, 1_000_000_000))


def snapshot(root):
    """Every entry under `root` with what a checkpoint keeps of it."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    seen[rel] = ("file", f.read(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                seen[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                seen[rel] = ("other",)
    return seen


def test_it_says_ready_first(tree_tool):
    assert tree_tool.first == {"ready": True}


def test_count_counts_files_links_and_directories_but_not_fifos(tree_tool, tmp_path):
    make_tree(tmp_path / "ws")
    reply = tree_tool.call("count", root=str(tmp_path / "ws"))
    assert reply == {"ok": True, "id": 1, "files": 4, "directories": 1, "bytes": 11 + 300 + 10}


def test_sync_makes_the_destination_hold_what_the_source_holds(tree_tool, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    dst.mkdir()
    (dst / "stale.txt").write_text("gone after the sync")
    reply = tree_tool.call("sync", src=str(src), dst=str(dst), trust="content")
    assert reply["ok"] is True
    assert reply["copied"] == 5 and reply["removed"] == 1 and reply["skipped"] == 1 and reply["kept"] == 0
    assert reply["bytesCopied"] == 321
    expected = {k: v for k, v in snapshot(src).items() if v != ("other",)}
    assert snapshot(dst) == expected  # data, modes, mtimes; the link as a link; no fifo


def test_a_second_sync_keeps_what_is_unchanged_and_copies_what_changed_behind_equal_metadata(tree_tool, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src)
    dst.mkdir()
    tree_tool.call("sync", src=str(src), dst=str(dst), trust="content")
    # Same size and mtime, other bytes: only a byte-by-byte comparison tells.
    (src / "a.txt").write_text("ALPHA\nbeta\n")
    os.utime(src / "a.txt", ns=(1_000_000_000, 1_000_000_000))
    reply = tree_tool.call("sync", src=str(src), dst=str(dst), trust="content")
    assert reply["copied"] == 1 and reply["kept"] == 3 and reply["removed"] == 0
    assert (dst / "a.txt").read_text() == "ALPHA\nbeta\n"


def test_diff_lists_added_removed_and_modified_with_text_diffs(tree_tool, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_tree(a)
    make_tree(b)
    (b / "a.txt").write_text("alpha\ngamma\n")
    (b / "sub" / "b.bin").write_bytes(b"\0\x09" * 7)
    os.remove(b / "run.sh")
    (b / "new").mkdir()
    (b / "new" / "n.txt").write_text("n")
    os.chmod(b / "sub", 0o700)
    os.remove(b / "link")
    os.symlink("elsewhere", b / "link")
    reply = tree_tool.call(
        "diff", a=str(a), b=str(b), trust="content", maxEntries=100, maxTextBytes=1000, maxDiffBytes=10000
    )
    assert reply["ok"] is True and reply["truncated"] is False
    assert reply["added"] == [{"path": "new", "type": "dir"}, {"path": "new/n.txt", "type": "file", "size": 1}]
    assert reply["removed"] == [{"path": "run.sh", "type": "file", "size": 10}]
    modified = {m["path"]: m for m in reply["modified"]}
    assert modified["a.txt"]["diff"] == "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n"
    assert modified["sub/b.bin"]["diffOmitted"] == "binary"
    assert modified["link"] == {
        "path": "link",
        "type": "symlink",
        "targetBefore": "/etc/passwd",
        "targetAfter": "elsewhere",
    }
    assert set(modified) == {"a.txt", "sub/b.bin", "link"}


def test_diff_stops_at_max_entries(tree_tool, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for i in range(5):
        (b / ("f%d" % i)).write_text("x")
    reply = tree_tool.call("diff", a=str(a), b=str(b), trust="content", maxEntries=2, maxTextBytes=10, maxDiffBytes=10)
    assert reply["truncated"] is True and len(reply["added"]) == 2


def test_prune_takes_out_fifos_and_keeps_the_directory_times(tree_tool, tmp_path):
    root = tmp_path / "ws"
    make_tree(root)
    os.mkfifo(root / "sub" / "deep-pipe")
    os.utime(root / "sub", ns=(5_000_000_000, 5_000_000_000))
    reply = tree_tool.call("prune", root=str(root))
    assert reply == {"ok": True, "id": 1, "dropped": 2}
    assert not os.path.lexists(root / "pipe") and not os.path.lexists(root / "sub" / "deep-pipe")
    assert os.stat(root / "sub").st_mtime_ns == 5_000_000_000


def test_a_root_that_is_a_link_is_never_followed(tree_tool, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "secret").write_text("not to be read through a link")
    os.symlink(tmp_path / "real", tmp_path / "link")
    reply = tree_tool.call("count", root=str(tmp_path / "link"))
    # O_DIRECTORY | O_NOFOLLOW on a link: the link itself is opened, and it is no directory.
    assert reply["ok"] is False and reply["errno"] == errno.errorcode[errno.ENOTDIR]


@pytest.mark.parametrize(
    ("request_fields", "code"),
    [({"op": "count", "root": "/nonexistent/ws"}, "ENOENT"), ({"op": "teleport"}, "EINVAL")],
)
def test_failures_are_replies_and_the_tool_goes_on(tree_tool, tmp_path, request_fields, code):
    op = request_fields.pop("op")
    reply = tree_tool.call(op, **request_fields)
    assert reply["ok"] is False and reply["errno"] == code
    (tmp_path / "ws").mkdir()
    assert tree_tool.call("count", root=str(tmp_path / "ws"))["ok"] is True
