"""runner_channels: the box's egress and call sockets carried to the engine as tunnels the runner opens (protocol 6).

The test plays the engine: it answers each `tunnel_in` with `tunnel_write`s, as the engine does once it has connected
the tunnel to the session's proxy or the run's call socket.
"""

import base64

CALL_CLIENT = """
import os, socket
path = os.environ["SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\\0" + path[1:])
s.sendall(b"ping from the code")
s.shutdown(socket.SHUT_WR)
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode())
"""

PROXY_CLIENT = """
import socket
with socket.create_connection(("127.0.0.1", 3128), timeout=10) as s:
    s.sendall(b"GET http://example.com/ HTTP/1.1\\r\\nHost: example.com\\r\\n\\r\\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
print(data.decode())
"""

REPLACE = """
import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind("\\0" + os.environ["SOCKET"][1:])
    print("bound")
except OSError as err:
    print(err.errno)
"""


def open_channel(runner, kind, run=None):
    fields = {"kind": kind}
    if run is not None:
        fields["run"] = run
    return runner.reply(runner.request("channel_open", **fields))


def tunnel_bytes(runner, tunnel):
    """What the code sent through `tunnel` up to its half-close (`tend`)."""
    data = b""
    while True:
        message = runner.event(lambda m: m.get("tunnel") == tunnel and m.get("ev") in ("tdata", "tend", "tclosed"))
        if message["ev"] != "tdata":
            return data, message["ev"]
        data += base64.b64decode(message["data"])


def answer(runner, tunnel, data):
    ack = runner.reply(
        runner.request("tunnel_write", tunnel=tunnel, data=base64.b64encode(data).decode("ascii"), eof=True)
    )
    assert ack == {"ev": "ack", "id": ack["id"], "found": True}


def test_a_call_socket_carries_the_code_s_connection_as_a_tunnel_tagged_with_its_run(offline_runner):
    opened = open_channel(offline_runner, "call", "act_1")
    assert opened["ev"] == "channel_opened" and opened["socket"].startswith("@switchyard-call-")
    run = offline_runner.request("run", language="python", code=CALL_CLIENT, env={"SOCKET": opened["socket"]})
    incoming = offline_runner.event(lambda m: m.get("ev") == "tunnel_in")
    assert incoming["target"] == "call" and incoming["run"] == "act_1"
    sent, end = tunnel_bytes(offline_runner, incoming["tunnel"])
    assert (sent, end) == (b"ping from the code", "tend")
    answer(offline_runner, incoming["tunnel"], b"pong from the engine")
    assert offline_runner.event(lambda m: m.get("ev") == "tclosed") == {"ev": "tclosed", "tunnel": incoming["tunnel"]}
    done = offline_runner.reply(run, "exit")
    assert done["exitCode"] == 0
    assert offline_runner.output(run, 1) == b"pong from the engine\n"


def test_the_code_cannot_take_a_channel_s_name(offline_runner):
    opened = open_channel(offline_runner, "call", "act_1")
    done, out, _ = offline_runner.run(REPLACE, env={"SOCKET": opened["socket"]})
    assert done["exitCode"] == 0 and out == b"98\n"  # EADDRINUSE


def test_a_closed_call_channel_accepts_nothing_more(offline_runner):
    opened = open_channel(offline_runner, "call", "act_1")
    closed = offline_runner.reply(offline_runner.request("channel_close", run="act_1"))
    assert closed["found"] is True
    again = offline_runner.reply(offline_runner.request("channel_close", run="act_1"))
    assert again["found"] is False
    done, out, err = offline_runner.run(CALL_CLIENT, env={"SOCKET": opened["socket"]})
    assert done["exitCode"] == 1 and b"ConnectionRefusedError" in err
    assert not [m for m in offline_runner.backlog if m.get("ev") == "tunnel_in"]


def test_each_run_s_channel_has_its_own_random_name(offline_runner):
    first = open_channel(offline_runner, "call", "act_1")["socket"]
    second = open_channel(offline_runner, "call", "act_2")["socket"]
    assert first != second and len(first) == len("@switchyard-call-") + 32


def test_the_egress_channel_starts_the_forwarder_towards_it_and_tunnels_each_proxy_connection(offline_runner):
    opened = open_channel(offline_runner, "egress")
    assert opened["ev"] == "channel_opened" and opened["socket"].startswith("@switchyard-egress-")
    assert open_channel(offline_runner, "egress")["socket"] == opened["socket"]  # the box's one
    run = offline_runner.request("run", language="python", code=PROXY_CLIENT)
    # The runner's own check that the forwarder listens is a connection too (empty): the code's is the one with bytes.
    first = offline_runner.event(lambda m: m.get("ev") == "tdata")
    incoming = [m for m in offline_runner.backlog if m.get("ev") == "tunnel_in" and m["tunnel"] == first["tunnel"]]
    assert incoming == [{"ev": "tunnel_in", "tunnel": first["tunnel"], "target": "egress", "run": None}]
    head = base64.b64decode(first["data"])
    while b"\r\n\r\n" not in head:
        message = offline_runner.event(lambda m: m.get("tunnel") == first["tunnel"] and m.get("ev") == "tdata")
        head += base64.b64decode(message["data"])
    assert head.startswith(b"GET http://example.com/ HTTP/1.1\r\n")
    answer(offline_runner, first["tunnel"], b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    done = offline_runner.reply(run, "exit")
    assert done["exitCode"] == 0 and offline_runner.output(run, 1).endswith(b"\r\n\r\nok\n")


WAIT_FOR_CLOSE = """
import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\\0" + os.environ["SOCKET"][1:])
print(s.recv(100))
"""


def test_an_engine_that_closes_the_tunnel_cuts_the_code_s_connection(offline_runner):
    opened = open_channel(offline_runner, "call", "act_1")
    run = offline_runner.request("run", language="python", code=WAIT_FOR_CLOSE, env={"SOCKET": opened["socket"]})
    incoming = offline_runner.event(lambda m: m.get("ev") == "tunnel_in")
    closed = offline_runner.reply(offline_runner.request("tunnel_close", tunnel=incoming["tunnel"]))
    assert closed["found"] is True
    done = offline_runner.reply(run, "exit")
    assert done["exitCode"] == 0 and offline_runner.output(run, 1) == b"b''\n"


def test_malformed_channel_requests_are_refused(offline_runner):
    assert open_channel(offline_runner, "ssh")["message"] == "channel_open needs a kind: egress or call"
    assert open_channel(offline_runner, "call")["message"] == "a call channel needs its run's id"


PADDED_CLIENT = """
import os, socket
name = b"\\0" + os.environ["SOCKET"][1:].encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(name + b"\\0" * (108 - len(name)))  # what node 20 and older connect to
s.sendall(b"padded")
s.shutdown(socket.SHUT_WR)
print(s.recv(100).decode())
"""


def test_a_channel_also_answers_at_its_name_padded_to_the_whole_address_as_older_node_connects(offline_runner):
    opened = open_channel(offline_runner, "call", "act_1")
    run = offline_runner.request("run", language="python", code=PADDED_CLIENT, env={"SOCKET": opened["socket"]})
    incoming = offline_runner.event(lambda m: m.get("ev") == "tunnel_in")
    assert (incoming["target"], incoming["run"]) == ("call", "act_1")
    assert tunnel_bytes(offline_runner, incoming["tunnel"]) == (b"padded", "tend")
    answer(offline_runner, incoming["tunnel"], b"heard")
    assert offline_runner.reply(run, "exit")["exitCode"] == 0
    assert offline_runner.output(run, 1) == b"heard\n"
