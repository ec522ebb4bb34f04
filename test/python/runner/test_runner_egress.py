"""runner_egress: the runner keeps the egress forwarder running on the sandbox's own 127.0.0.1:3128."""

import time

from proxy_stub import ProxyStub

CLIENT = """
import socket
with socket.create_connection(("127.0.0.1", 3128), timeout=5) as s:
    s.sendall(b"GET http://example.com/ HTTP/1.1\\r\\nHost: example.com\\r\\n\\r\\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
print(data.split(b"\\r\\n")[0].decode(), data.split(b"\\r\\n\\r\\n")[1].decode())
"""


def egress(runner):
    return runner.reply(runner.request("egress"))


def test_the_forwarder_answers_no_network_until_the_proxy_socket_appears(runner, egress_dir):
    ack = egress(runner)
    assert ack["ev"] == "ack" and ack["pid"] > 2
    _, out, _ = runner.run(CLIENT)
    assert out.startswith(b"HTTP/1.1 403 switchyard: this session has no network")
    proxy = ProxyStub(egress_dir / "proxy.sock")
    try:
        _, out, _ = runner.run(CLIENT)
    finally:
        proxy.close()
    assert out == b"HTTP/1.1 200 OK ok\n"
    assert proxy.heads[0].startswith(b"GET http://example.com/ HTTP/1.1\r\n")


def test_the_forwarder_survives_fresh_runs_and_comes_back_when_code_kills_it(runner):
    first = egress(runner)["pid"]
    done, _, _ = runner.run("print('a run')")
    assert done["leftovers"] == 0
    assert egress(runner)["pid"] == first
    runner.run("import os, signal\nos.kill(%d, signal.SIGKILL)" % first)
    deadline = time.monotonic() + 10
    while True:
        again = egress(runner)
        if again.get("pid") not in (None, first) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert again["ev"] == "ack" and again["pid"] != first


def test_a_sandbox_without_the_egress_directory_refuses(offline_runner):
    refused = egress(offline_runner)
    assert refused["ev"] == "error" and refused["code"] == "egress"
    assert refused["message"] == "this sandbox has no /run/switchyard-egress"
