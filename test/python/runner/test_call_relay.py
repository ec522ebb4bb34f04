"""call_relay: a skill's abstract call socket relayed over stdio, for the node SDK (node 18 cannot connect to one)."""

import os
import socket
import subprocess
import sys
import threading

from conftest import RUNNER_DIR

RELAY = os.path.join(RUNNER_DIR, "call_relay.py")


def listen():
    """An abstract socket that answers each line with it upper-cased, then ends its side once the client ended its."""
    name = "@switchyard-call-test-%s" % os.urandom(8).hex()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\0" + name[1:])
    server.listen()
    seen = []

    def serve():
        conn, _ = server.accept()
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        seen.append(data)
        conn.sendall(data.upper())
        conn.close()
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return name, seen, thread


def test_bytes_go_both_ways_and_each_end_is_passed_on():
    name, seen, thread = listen()
    relay = subprocess.run(
        [sys.executable, "-I", RELAY, name], input=b'{"id":1,"op":"input"}\n', capture_output=True, timeout=10
    )
    thread.join(5)
    # stdin's end reached the socket as its half-close (the server read to its end), the socket's end ended stdout.
    assert seen == [b'{"id":1,"op":"input"}\n']
    assert relay.stdout == b'{"ID":1,"OP":"INPUT"}\n'
    assert relay.returncode == 0


def test_a_socket_nobody_listens_on_or_a_path_fails_with_a_reason():
    missing = subprocess.run(
        [sys.executable, "-I", RELAY, "@switchyard-call-nobody-%s" % os.urandom(8).hex()],
        input=b"",
        capture_output=True,
        timeout=10,
    )
    assert missing.returncode == 1 and b"cannot connect" in missing.stderr
    path = subprocess.run([sys.executable, "-I", RELAY, "/tmp/call.sock"], capture_output=True, timeout=10)
    assert path.returncode == 2 and b"@name" in path.stderr
