"""What differs between the kernels: how each starts, and how a cell is handed to it.

node reads one JSON request per line on fd 3 (kernel_node.js); python reads marshal frames there (a 4-byte length,
then `marshal.dumps` of the request: a python kernel then starts without importing json, whose `re` costs more than
the rest of its start-up). bash is an interactive shell that reads its requests as command lines on fd 0
(kernel_bash.sh): each cell is two lines of fully quoted shell, so nothing in the code or the environment can break
out of them. Every kernel replies in JSON lines on fd 4.
"""

import json
import marshal
import os
import struct

from runner_spawn import RequestError

KERNEL_DIR = os.path.dirname(os.path.realpath(__file__))
INTERPRETERS = {"python": "/usr/bin/python3", "node": "/usr/bin/node", "bash": "/bin/bash"}
# Every byte below 0x20 escaped, so a request stays on one line; a NUL cannot be in a bash string and is dropped.
BASH_QUOTE = {c: "\\x%02x" % c for c in range(32)}
BASH_QUOTE.update({0: None, 0x7F: "\\x7f", ord("\\"): "\\\\", ord("'"): "\\'"})


def bash_quote(text):
    """`text` as one bash word (ANSI-C quoting)."""
    return "$'" + text.translate(BASH_QUOTE) + "'"


def kernel_argv(language, interpreter):
    if language == "python":
        return [interpreter, "-u", os.path.join(KERNEL_DIR, "kernel_python.py")]
    if language == "node":
        return [interpreter, "--expose-internals", os.path.join(KERNEL_DIR, "kernel_node.js")]
    # Interactive, so SIGINT aborts the whole command line (the cell, loops included) and the shell lives on.
    return [interpreter, "--norc", "--noprofile", "--noediting", "+o", "history", "+H", "-i"]


def kernel_fds(language, devnull, requests, stdout, stderr, replies):
    """The kernel's descriptors (child fd -> runner fd)."""
    if language == "bash":
        return {0: requests, 1: stdout, 2: stderr, 4: replies}
    return {0: devnull, 1: stdout, 2: stderr, 3: requests, 4: replies}


def first_request(language):
    """What the kernel reads before any cell: bash sources its setup (not an rc file: /etc/bash.bashrc stays out)."""
    if language == "bash":
        return (". %s\n" % bash_quote(os.path.join(KERNEL_DIR, "kernel_bash.sh"))).encode("utf-8")
    return b""


# Kernels that wait for the runner's go-ahead after their start token (kernel_node.js and kernel_bash.sh say why).
HANDSHAKE = frozenset({"node", "bash"})


def go_request(language, go):
    """The go-ahead for a cell whose start token came (no go: an interrupt came first, the cell does not run)."""
    if language == "bash":
        return b"\\builtin : go\n\\__sw_report\n" if go else b"\\builtin : stop\n\\__sw_report\n"
    return b'{"go":true}\n' if go else b'{"go":false}\n'


def result_limits(limits):
    """The caps on a cell's rich results (python and node kernels write what is over them to the workspace)."""
    limits = limits if isinstance(limits, dict) else {}
    return {k: limits[k] for k in ("maxBytes", "cellMaxBytes") if isinstance(limits.get(k), int)}


def cell_request(language, cell_id, code, env, start, end, results=None):
    """The request that runs one cell, as bytes for the kernel's request pipe."""
    if language == "python":
        frame = marshal.dumps(
            {"cell": cell_id, "code": code, "env": env, "start": start, "end": end, "results": result_limits(results)}
        )
        return struct.pack(">I", len(frame)) + frame
    if language == "node":
        message = {"cell": cell_id, "code": code, "env": env, "start": start, "end": end}
        message["results"] = result_limits(results)
        return (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
    bad = sorted(k for k in env if not (k.isidentifier() and k.isascii()))
    if bad:
        raise RequestError("env", "bash cannot set %s" % ", ".join(bad))
    line = "\\__sw_begin %s %s && { " % (bash_quote(start), bash_quote(end))
    if env:
        line += "\\builtin export %s; " % " ".join("%s=%s" % (k, bash_quote(v)) for k, v in env.items())
    line += "\\builtin eval -- %s </dev/null; \\__sw_end $?; }\n" % bash_quote(code)
    return line.encode("utf-8", "replace")
