"""runner_languages: how each kernel starts and how a cell is handed to it."""

import json
import marshal
import struct
import subprocess

import pytest
from runner_languages import (
    HANDSHAKE,
    bash_quote,
    cell_request,
    first_request,
    go_request,
    kernel_argv,
    kernel_fds,
)
from runner_spawn import RequestError


@pytest.mark.parametrize(
    "text",
    ["plain", "it's \"quoted\"", "back\\slash", "new\nline\ttab\r", "$(rm -rf /) `x` ${HOME}", "\x7f\x01é€"],
)
def test_bash_quote_is_one_word_bash_reads_back_unchanged(text):
    out = subprocess.run(
        ["/bin/bash", "--norc", "--noprofile", "-c", "printf %s " + bash_quote(text)],
        capture_output=True,
        check=True,
    ).stdout
    assert out.decode("utf-8") == text
    assert "\n" not in bash_quote(text)


def test_bash_quote_drops_nul_which_bash_strings_cannot_hold():
    assert bash_quote("a\0b") == "$'ab'"


def test_kernel_argv_per_language():
    assert kernel_argv("python", "/usr/bin/python3")[:2] == ["/usr/bin/python3", "-u"]
    assert kernel_argv("python", "/usr/bin/python3")[2].endswith("/kernel_python.py")
    assert kernel_argv("node", "/usr/bin/node")[2].endswith("/kernel_node.js")
    assert kernel_argv("bash", "/bin/bash")[-1] == "-i"


def test_kernel_fds_bash_reads_requests_on_stdin_the_others_on_fd_3():
    assert kernel_fds("bash", 9, 10, 11, 12, 13) == {0: 10, 1: 11, 2: 12, 4: 13}
    assert kernel_fds("python", 9, 10, 11, 12, 13) == {0: 9, 1: 11, 2: 12, 3: 10, 4: 13}


def test_first_request_sources_the_bash_setup_only():
    assert first_request("bash").startswith(b". $'") and first_request("bash").endswith(b"kernel_bash.sh'\n")
    assert first_request("python") == b"" and first_request("node") == b""


def test_go_request_per_kernel():
    assert "bash" in HANDSHAKE and "node" in HANDSHAKE and "python" not in HANDSHAKE
    assert json.loads(go_request("node", True)) == {"go": True}
    assert json.loads(go_request("node", False)) == {"go": False}
    assert b": go\n" in go_request("bash", True) and b": stop\n" in go_request("bash", False)


def test_python_cell_request_is_a_length_prefixed_marshal_frame():
    data = cell_request("python", 7, "print(1)", {"A": "b"}, "S", "E", {"maxBytes": 5, "other": 1})
    (length,) = struct.unpack(">I", data[:4])
    assert length == len(data) - 4
    assert marshal.loads(data[4:]) == {
        "cell": 7,
        "code": "print(1)",
        "env": {"A": "b"},
        "start": "S",
        "end": "E",
        "results": {"maxBytes": 5},
    }


def test_node_cell_request_is_one_json_line():
    data = cell_request("node", 3, "1 +\n2", {}, "S", "E")
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data) == {"cell": 3, "code": "1 +\n2", "env": {}, "start": "S", "end": "E", "results": {}}


def test_bash_cell_request_is_one_line_that_exports_the_env_and_evals_the_code():
    data = cell_request("bash", 1, "echo \"$GREETING\"\nexit 3", {"GREETING": "hi 'there'"}, "S", "E")
    assert data.count(b"\n") == 1
    # Run the line with stand-ins for the kernel's functions: the code sees the variable and its status is reported.
    script = (
        "__sw_begin() { echo begin \"$1\" \"$2\"; }; __sw_end() { echo end \"$1\"; }; exit() { return \"$1\"; }\n"
        + data.decode("utf-8")
    )
    out = subprocess.run(["/bin/bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True).stdout
    assert out == "begin S E\nhi 'there'\nend 3\n"


def test_bash_cell_request_refuses_variables_bash_cannot_set():
    with pytest.raises(RequestError) as refused:
        cell_request("bash", 1, "true", {"OK": "1", "NOT-OK": "2", "1X": "3"}, "S", "E")
    assert refused.value.code == "env"
    assert "1X, NOT-OK" in str(refused.value)
