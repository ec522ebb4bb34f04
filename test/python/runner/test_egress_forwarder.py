"""egress_forwarder.py: relays 127.0.0.1 connections to the egress proxy's socket, or says why it cannot.

It runs here as its own process on a free loopback port (its PORT set to 0; in a sandbox it is 3128), with a stub
of the proxy on a Unix socket: nothing leaves 127.0.0.1.
"""

import os
import resource
import socket
import subprocess
import sys

import egress_forwarder
import pytest
from conftest import RUNNER_DIR
from egress_forwarder import NO_NETWORK, max_relays, refusal
from proxy_stub import ProxyStub

# The forwarder on a free port, its nofile limit lowered first when asked (argv[3]).
LAUNCH = (
    "import resource, sys; sys.dont_write_bytecode = True; sys.path.insert(0, sys.argv[1]); "
    "n = int(sys.argv[3]); n and resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); import egress_forwarder as m; "
    "m.PORT = 0; f = m.Forwarder(sys.argv[2]); print(f.listener.getsockname()[1], flush=True); f.serve()"
)
REQUEST = b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"


class Running:
    def __init__(self, proxy_path, nofile=0):
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", LAUNCH, RUNNER_DIR, str(proxy_path), str(nofile)],
            stdout=subprocess.PIPE,
        )
        self.port = int(self.proc.stdout.readline())

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def forwarder_for(tmp_path):
    started = []

    def start(proxy_path, nofile=0):
        started.append(Running(proxy_path, nofile))
        return started[-1]

    yield start
    for running in started:
        running.stop()


def read_all(sock):
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_without_a_proxy_socket_a_client_is_told_it_has_no_network(forwarder_for, tmp_path):
    forwarder = forwarder_for(tmp_path / "proxy.sock")
    with forwarder.connect() as client:
        client.sendall(REQUEST)
        answer = read_all(client)
    assert answer.startswith(b"HTTP/1.1 403 switchyard: this session has no network\r\n")
    assert answer.endswith((NO_NETWORK + "\n").encode())


def test_a_connection_is_relayed_to_the_proxy_socket_both_ways(forwarder_for, tmp_path):
    proxy = ProxyStub(tmp_path / "proxy.sock")
    try:
        forwarder = forwarder_for(tmp_path / "proxy.sock")
        with forwarder.connect() as client:
            client.sendall(REQUEST)
            answer = read_all(client)
    finally:
        proxy.close()
    assert proxy.heads == [REQUEST]
    assert answer == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


def test_past_the_relays_its_descriptors_allow_a_client_is_answered_503(forwarder_for, tmp_path):
    proxy = ProxyStub(tmp_path / "proxy.sock", hold=True)
    try:
        # RESERVED_FDS + 2: room for exactly one relay.
        forwarder = forwarder_for(tmp_path / "proxy.sock", nofile=egress_forwarder.RESERVED_FDS + 2)
        with forwarder.connect() as first, forwarder.connect() as second:
            first.sendall(REQUEST)
            second.sendall(REQUEST)
            answer = read_all(second)
            assert answer.startswith(b"HTTP/1.1 503 ")
            assert b"has 1 connections open through its egress forwarder" in answer
    finally:
        proxy.close()


def test_refusal_is_a_complete_http_answer():
    answer = refusal(403, "nope", "you may not")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 403 nope"
    assert b"Content-Length: %d" % len(body) in head and b"Connection: close" in head
    assert body == b"you may not\n"


@pytest.mark.parametrize(
    ("soft", "relays"),
    [(1024, (1024 - egress_forwarder.RESERVED_FDS) // 2), (10, 1), (1 << 20, 1024), (resource.RLIM_INFINITY, 1024)],
)
def test_max_relays_follows_the_nofile_limit(monkeypatch, soft, relays):
    monkeypatch.setattr(egress_forwarder.resource, "getrlimit", lambda _which: (soft, soft))
    assert max_relays() == relays


def test_without_a_proxy_argument_it_says_how_to_run_it():
    done = subprocess.run(
        [sys.executable, "-I", os.path.join(RUNNER_DIR, "egress_forwarder.py")], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.startswith("usage: egress_forwarder.py <proxy socket>")
