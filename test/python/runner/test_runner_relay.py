"""runner_relay: raw-byte connections from the engine to servers inside the box, over the box's relay socket."""

import base64
import hashlib
import os
import socket
import time

from test_runner_tunnels import ENV, open_tunnel, serve


def dial(relay_dir, port, timeout=10.0):
    """Connects to the relay as the engine does; answers (socket, the runner's first line)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(relay_dir / "relay.sock"))
    sock.sendall(b"%d\n" % port)
    line = b""
    while not line.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        line += chunk
    return sock, line.decode()


def read_all(sock):
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_hello_says_there_is_a_relay_only_where_the_box_has_its_directory(relay_runner, runner, relay_dir):
    assert relay_runner.hello["relay"] is True
    assert (relay_dir / "relay.sock").exists()
    assert oct((relay_dir / "relay.sock").stat().st_mode & 0o777) == "0o600"
    assert runner.hello["relay"] is False


def test_bytes_go_both_ways_untouched_and_each_half_close_is_passed_on(relay_runner, relay_dir, workspace):
    proc = serve(relay_runner, workspace, "echo", 8601)
    sock, line = dial(relay_dir, 8601)
    assert line == "ok %s -\n" % proc  # the background process whose tree holds the listening socket
    payload = os.urandom(3 << 20)  # more than the relay holds per direction: the sockets' own flow control
    sent = 0
    got = b""
    sock.setblocking(False)
    while sent < len(payload) or len(got) < len(payload):
        if sent < len(payload):
            try:
                sent += sock.send(payload[sent : sent + 65536])
            except BlockingIOError:
                pass
        try:
            got += sock.recv(65536)
        except BlockingIOError:
            time.sleep(0.001)
    sock.setblocking(True)
    sock.settimeout(10)
    sock.shutdown(socket.SHUT_WR)  # the server sees the end, says bye and closes: we see that end too
    assert hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()
    assert read_all(sock) == b"bye"
    sock.close()


def test_nothing_listening_is_an_err_line_naming_the_port_and_the_errno(relay_runner, relay_dir):
    sock, line = dial(relay_dir, 8602)
    assert line.startswith("err connect nothing accepts connections on port 8602: 127.0.0.1: connection refused")
    assert read_all(sock) == b""
    sock.close()


def test_a_malformed_first_line_is_refused(relay_runner, relay_dir):
    for first in (b"http\n", b"0\n", b"70000\n", b"1234567890123456"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(str(relay_dir / "relay.sock"))
        sock.sendall(first)
        answer = read_all(sock)
        assert answer.startswith(b"err request the first line must be a port"), (first, answer)
        assert answer.endswith(b"\n") and answer.count(b"\n") == 1
        sock.close()


def test_the_egress_forwarder_is_no_session_port(relay_runner, relay_dir):
    assert relay_runner.reply(relay_runner.request("egress"))["ev"] == "ack"
    sock, line = dial(relay_dir, 3128)
    assert line == "err connect nothing accepts connections on port 3128: it is the runner's egress forwarder\n"
    sock.close()


def test_relayed_and_json_tunnels_share_the_box_s_limit(relay_runner, relay_dir, workspace):
    serve(relay_runner, workspace, "hold", 8603)
    held = []
    for i in range(256):
        sock, line = dial(relay_dir, 8603)
        assert line.startswith("ok "), (i, line)
        held.append(sock)
    refused = open_tunnel(relay_runner, "tun_over", 8603)
    assert refused["ev"] == "error" and refused["code"] == "tunnel_limit"
    sock, line = dial(relay_dir, 8603)
    assert line == "err tunnel_limit this box has 256 tunnels open, the most it may\n"
    sock.close()
    held.pop().close()
    deadline = time.monotonic() + 10
    while True:  # the runner notices the closed one on its next look at it
        sock, line = dial(relay_dir, 8603)
        if line.startswith("ok ") or time.monotonic() > deadline:
            break
        sock.close()
        time.sleep(0.05)
    assert line.startswith("ok ")
    for s in held + [sock]:
        s.close()


def test_the_engine_hanging_up_ends_the_server_s_stream_after_what_was_sent(relay_runner, relay_dir, workspace):
    proc = serve(relay_runner, workspace, "lazy", 8604)
    sock, line = dial(relay_dir, 8604)
    assert line.startswith("ok ")
    payload = os.urandom(1000)
    sock.sendall(payload)
    sock.close()
    (workspace / "go").write_text("")
    # The server reads what came, then the end of its stream: it prints the count and the digest, and exits.
    done = relay_runner.event(lambda m: m.get("ev") == "pexit" and m.get("proc") == proc)
    out = b"".join(
        base64.b64decode(m["data"]) for m in relay_runner.backlog if m.get("ev") == "pout" and m.get("proc") == proc
    )
    assert done["exitCode"] == 0
    assert out.decode().split() == ["1000", hashlib.sha256(payload).hexdigest()]


def test_the_owner_follows_a_new_server_on_the_same_port(relay_runner, relay_dir, workspace):
    first = serve(relay_runner, workspace, "hold", 8605)
    sock, line = dial(relay_dir, 8605)
    assert line == "ok %s -\n" % first
    sock.close()
    sock, line = dial(relay_dir, 8605)  # the owner found last time, checked with one readlink
    assert line == "ok %s -\n" % first
    sock.close()
    relay_runner.reply(relay_runner.request("proc_signal", proc=first, signal="KILL"), "ack")
    relay_runner.event(lambda m: m.get("ev") == "pexit" and m.get("proc") == first)
    second = "srv-again"
    command = "exec python3 serve.py hold 8605"
    started = relay_runner.request("proc_start", proc=second, command=command, cwd="", env=ENV)
    relay_runner.reply(started, "proc_started")
    deadline = time.monotonic() + 10
    while True:
        sock, line = dial(relay_dir, 8605)
        sock.close()
        if line == "ok %s -\n" % second or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert line == "ok %s -\n" % second
