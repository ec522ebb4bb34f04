"""loop_host_helper.py: the root helper's replies for what can be done without a loop device or a mount.

It runs as root, as in the engine (the helper only ever runs as root).
"""

import os
import time


def test_it_says_ready_first(loop_helper):
    assert loop_helper.first == {"ready": True}


def test_format_makes_an_image_of_the_size_and_runs_the_commands_on_it(loop_helper, tmp_path):
    image = tmp_path / "ws.img"
    marker = tmp_path / "ran"
    reply = loop_helper.call(
        "format",
        image=str(image),
        bytes=1 << 20,
        commands=[["/bin/sh", "-c", 'echo "formatting $0" >&2; touch "$1"', str(image), str(marker)]],
    )
    assert reply == {"ok": True, "id": 1, "stderr": ["formatting %s\n" % image]}
    assert os.path.getsize(image) == 1 << 20
    assert marker.exists()


def test_a_failing_format_command_removes_the_image_and_says_why(loop_helper, tmp_path):
    image = tmp_path / "ws.img"
    reply = loop_helper.call(
        "format", image=str(image), bytes=4096, commands=[["/bin/sh", "-c", "echo no space left >&2; exit 3"]]
    )
    assert reply["ok"] is False and reply["errno"] == "EIO"
    assert reply["message"] == "/bin/sh: no space left"
    assert not image.exists()


def test_format_never_overwrites_an_image(loop_helper, tmp_path):
    image = tmp_path / "ws.img"
    image.write_bytes(b"precious")
    reply = loop_helper.call("format", image=str(image), bytes=4096, commands=[])
    assert reply["ok"] is False and reply["errno"] == "EEXIST"
    assert image.read_bytes() == b"precious"


def test_remove_workspace_trashes_the_image_and_removes_the_directory(loop_helper, tmp_path):
    image, trashed, target = tmp_path / "ws.img", tmp_path / "ws.img.trash", tmp_path / "ws"
    image.write_bytes(b"x" * 100)
    target.mkdir()
    reply = loop_helper.call("remove_workspace", image=str(image), trashed=str(trashed), target=str(target))
    assert reply == {"ok": True, "id": 1}
    assert not image.exists() and not target.exists()
    deadline = time.monotonic() + 5
    while trashed.exists() and time.monotonic() < deadline:  # unlinked after the reply
        time.sleep(0.01)
    assert not trashed.exists()


def test_unmounting_what_is_not_a_mount_is_an_error_reply(loop_helper, tmp_path):
    reply = loop_helper.call("umount", target=str(tmp_path))
    assert reply["ok"] is False and reply["errno"] == "EINVAL"


def test_detaching_a_missing_device_is_an_error_reply(loop_helper, tmp_path):
    reply = loop_helper.call("detach", device=str(tmp_path / "loop-none"))
    assert reply["ok"] is False and reply["errno"] == "ENOENT"


def test_an_unknown_op_is_refused_and_the_helper_goes_on(loop_helper, tmp_path):
    reply = loop_helper.call("explode")
    assert reply == {"ok": False, "errno": "EINVAL", "message": "KeyError('explode')", "id": 1}
    assert loop_helper.call("detach", device=str(tmp_path / "none"))["errno"] == "ENOENT"
