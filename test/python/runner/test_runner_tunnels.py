"""runner_tunnels: the engine's TCP connections to servers inside the box, with flow control both ways."""

import base64
import hashlib
import time

WINDOW = 1 << 20
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

# A server for the tests, run as a background process: `serve.py <mode> <port> [host]`.
SERVER = r"""
import hashlib, os, socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
family = socket.AF_INET6 if ":" in host else socket.AF_INET
listener = socket.socket(family, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind((host, port))
listener.listen(512)
if mode == "hold":  # accepts nothing: connections wait in the backlog
    time.sleep(100)
conn, _ = listener.accept()
if mode == "echo":  # echoes until the client shuts its side, then says bye and closes
    while data := conn.recv(65536):
        conn.sendall(data)
    conn.sendall(b"bye")
elif mode == "flood":  # sends 4 MiB as fast as the client takes them, then closes
    block = bytes(range(256)) * 256
    for _ in range(64):
        conn.sendall(block)
elif mode == "lazy":  # reads nothing until /workspace/go exists, then counts what came
    while not os.path.exists("/workspace/go"):
        time.sleep(0.01)
    digest, total = hashlib.sha256(), 0
    while data := conn.recv(65536):
        digest.update(data)
        total += len(data)
    print(total, digest.hexdigest(), flush=True)
conn.close()
"""


def serve(runner, workspace, mode, port, host="127.0.0.1"):
    """Starts the test server as background process `srv-<port>`; returns once it listens."""
    (workspace / "serve.py").write_text(SERVER)
    proc = "srv-%d" % port
    command = "exec python3 serve.py %s %d %s" % (mode, port, host)
    runner.reply(runner.request("proc_start", proc=proc, command=command, cwd="", env=ENV), "proc_started")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if any(p["port"] == port for p in runner.reply(runner.request("ports"), "ports")["ports"]):
            return proc
        time.sleep(0.02)
    raise AssertionError("the test server did not listen on %d" % port)


def open_tunnel(runner, tunnel, port):
    return runner.reply(runner.request("tunnel_open", tunnel=tunnel, port=port))


def write(runner, tunnel, data, eof=False, timeout=15.0):
    request_id = runner.request("tunnel_write", tunnel=tunnel, data=base64.b64encode(data).decode(), eof=eof)
    return runner.reply(request_id, "ack", timeout)


def take(runner, tunnel):
    """The tdata bytes of `tunnel` received so far (taken off the backlog), and its other events."""
    mine = [m for m in runner.backlog if m.get("tunnel") == tunnel and m.get("ev") in ("tdata", "tend", "tclosed")]
    runner.backlog = [m for m in runner.backlog if m not in mine]
    data = b"".join(base64.b64decode(m["data"]) for m in mine if m["ev"] == "tdata")
    return data, [m for m in mine if m["ev"] != "tdata"]


def until_closed(runner, tunnel, end=False):
    """Reads `tunnel` to its `tclosed`, acknowledging what arrives (and, with `end`, shutting the engine's side once
    the server shut its own): its bytes and its other events in order."""
    data, others = b"", []
    while True:
        message = runner.event(lambda m: m.get("tunnel") == tunnel and m.get("ev") in ("tdata", "tend", "tclosed"))
        if message["ev"] == "tdata":
            chunk = base64.b64decode(message["data"])
            data += chunk
            runner.send({"op": "tunnel_ack", "tunnel": tunnel, "bytes": len(chunk)})
            continue
        others.append(message)
        if message["ev"] == "tend" and end:
            runner.request("tunnel_write", tunnel=tunnel, data="", eof=True)
        if message["ev"] == "tclosed":
            return data, others


def settle(runner, seconds=0.3):
    """Lets the runner go on for a while, keeping what it sends on the backlog."""
    deadline = time.monotonic() + seconds
    try:
        while True:
            runner.backlog.append(runner.read_line(deadline))
    except TimeoutError:
        pass


def test_a_tunnel_carries_a_request_and_its_answer_and_names_the_process_that_listens(runner, workspace):
    proc = serve(runner, workspace, "echo", 8000)
    opened = open_tunnel(runner, "tun_1", 8000)
    assert opened["ev"] == "tunnel_opened" and opened["tunnel"] == "tun_1"
    assert opened["proc"] == proc and opened["kernel"] is None
    assert write(runner, "tun_1", b"hello ")["found"] is True
    assert write(runner, "tun_1", b"world", eof=True)["found"] is True
    data, others = until_closed(runner, "tun_1")
    # Half-close: the server saw the engine's end, and still answered after it.
    assert data == b"hello worldbye"
    assert others == [{"ev": "tend", "tunnel": "tun_1"}, {"ev": "tclosed", "tunnel": "tun_1"}]


def test_nothing_listening_is_refused_with_code_connect_naming_both_addresses(runner):
    refused = open_tunnel(runner, "tun_1", 8999)
    assert refused["ev"] == "error" and refused["code"] == "connect"
    assert refused["message"] == (
        "nothing accepts connections on port 8999: 127.0.0.1: connection refused (ECONNREFUSED); "
        "::1: connection refused (ECONNREFUSED)"
    )
    assert write(runner, "tun_1", b"x")["found"] is False


def test_a_server_on_ipv6_loopback_only_is_reached_on_the_second_address(runner, workspace):
    serve(runner, workspace, "echo", 8001, "::1")
    assert open_tunnel(runner, "tun_6", 8001)["ev"] == "tunnel_opened"
    write(runner, "tun_6", b"six", eof=True)
    assert until_closed(runner, "tun_6")[0] == b"sixbye"


def test_the_runner_stops_reading_at_a_window_of_unacknowledged_bytes(runner, workspace):
    serve(runner, workspace, "flood", 8002)
    assert open_tunnel(runner, "tun_f", 8002)["ev"] == "tunnel_opened"
    settle(runner)
    first, _ = take(runner, "tun_f")
    # No ack yet: at most the window, plus the one read that crossed it.
    assert WINDOW <= len(first) < WINDOW + 64 * 1024
    settle(runner)
    assert take(runner, "tun_f")[0] == b""  # it waits for the engine
    runner.send({"op": "tunnel_ack", "tunnel": "tun_f", "bytes": len(first)})
    # The server is done, but a tunnel is half-closed until the engine shuts its side too.
    rest, others = until_closed(runner, "tun_f", end=True)
    block = bytes(range(256)) * 256
    assert first + rest == block * 64
    assert [m["ev"] for m in others] == ["tend", "tclosed"]


def test_writes_are_acknowledged_only_while_the_socket_takes_them(runner, workspace):
    proc = serve(runner, workspace, "lazy", 8003)
    assert open_tunnel(runner, "tun_w", 8003)["ev"] == "tunnel_opened"
    piece = bytes(range(256)) * 1024  # 256 KiB
    sent = 0
    held = None
    while sent < 64 * WINDOW:  # the kernel's socket buffers take some MiB first
        request_id = runner.request("tunnel_write", tunnel="tun_w", data=base64.b64encode(piece).decode(), eof=False)
        sent += len(piece)
        try:
            runner.reply(request_id, "ack", timeout=0.5)
        except TimeoutError:
            held = request_id
            break
    assert held is not None, "every write was acknowledged at once: no backpressure"
    (workspace / "go").write_text("")
    assert runner.reply(held, "ack")["found"] is True
    write(runner, "tun_w", b"", eof=True)
    done = runner.event(lambda m: m.get("ev") == "pexit" and m.get("proc") == proc)
    out = b"".join(
        base64.b64decode(m["data"]) for m in runner.backlog if m.get("ev") == "pout" and m.get("proc") == proc
    )
    assert done["exitCode"] == 0
    assert out.decode().split() == [str(sent), hashlib.sha256(piece * (sent // len(piece))).hexdigest()]


def test_close_ends_a_tunnel_at_once_and_unknown_tunnels_are_not_found(runner, workspace):
    serve(runner, workspace, "hold", 8004)
    assert open_tunnel(runner, "tun_c", 8004)["ev"] == "tunnel_opened"
    assert runner.reply(runner.request("tunnel_close", tunnel="tun_c"), "ack")["found"] is True
    assert runner.event(lambda m: m.get("tunnel") == "tun_c") == {"ev": "tclosed", "tunnel": "tun_c"}
    assert runner.reply(runner.request("tunnel_close", tunnel="tun_c"), "ack")["found"] is False
    assert write(runner, "nope", b"x")["found"] is False


def test_tunnel_refusals_and_the_limit(runner, workspace):
    serve(runner, workspace, "hold", 8005)
    assert open_tunnel(runner, "tun_0", 8005)["ev"] == "tunnel_opened"
    assert open_tunnel(runner, "tun_0", 8005)["code"] == "exists"
    for bad in (0, 65536, "80", True, None):
        refused = runner.reply(runner.request("tunnel_open", tunnel="tun_x", port=bad), "error")
        assert refused["message"] == "tunnel_open needs a port from 1 to 65535" and "code" not in refused
    for n in range(1, 256):
        assert open_tunnel(runner, "tun_%d" % n, 8005)["ev"] == "tunnel_opened"
    refused = open_tunnel(runner, "tun_256", 8005)
    assert refused["code"] == "tunnel_limit"
    assert refused["message"] == "this box has 256 tunnels open, the most it may"
    assert runner.reply(runner.request("tunnel_close", tunnel="tun_7"), "ack")["found"] is True
    assert open_tunnel(runner, "tun_256", 8005)["ev"] == "tunnel_opened"
    write(runner, "tun_0", b"", eof=True)
    refused = runner.reply(runner.request("tunnel_write", tunnel="tun_0", data=""), "error")
    assert refused["code"] == "closed"


def test_a_server_that_dies_closes_its_tunnels(runner, workspace):
    proc = serve(runner, workspace, "hold", 8006)
    assert open_tunnel(runner, "tun_d", 8006)["ev"] == "tunnel_opened"
    runner.reply(runner.request("proc_signal", proc=proc, signal="KILL"), "ack")
    # A connection still in the listener's backlog is reset when it closes.
    assert until_closed(runner, "tun_d") == (
        b"",
        [{"ev": "tclosed", "tunnel": "tun_d", "error": "connection reset by peer (ECONNRESET)"}],
    )


def test_the_egress_forwarder_is_no_session_port(runner):
    assert runner.reply(runner.request("egress"))["ev"] == "ack"
    refused = open_tunnel(runner, "tun_e", 3128)
    assert refused["code"] == "connect"
    assert refused["message"] == "nothing accepts connections on port 3128: port 3128 is the runner's egress forwarder"
    assert runner.reply(runner.request("ports"), "ports")["ports"] == []
