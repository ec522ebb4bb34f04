"""The egress forwarder of a container whose sessions may reach the network (egress_forwarder.py), kept running.

A pooled container has the directory /run/switchyard-egress; when a session with network claims it, the engine makes
its egress proxy's socket appear there and asks for the forwarder (`{"op": "egress"}`). The runner starts it beside
itself, protects its tree from the cleanup after fresh runs, and starts it again if code kills it. Containers of
sessions without network never start one. Under bubblewrap (the subprocess tier, offline) there is no such directory.
Where there is no directory the engine can fill (a Kubernetes pod), the forwarder relays to the runner's own egress
back channel instead (runner_channels.py), which the runner carries to the engine's proxy over its stdio.
"""

import os
import socket
import time

from runner_spawn import RequestError, SpawnError, now, spawn
from runner_trees import kill_tree

EGRESS_DIR = "/run/switchyard-egress"
FORWARDER = os.path.join(os.path.dirname(os.path.realpath(__file__)), "egress_forwarder.py")
RESTART_SECONDS = 1.0
PORT = 3128
# How long the request waits for a new forwarder to listen (the code's first request must find it).
LISTEN_SECONDS = 3.0


class Egress:
    def __init__(self, runner):
        self.runner = runner
        self.pid = None
        self.restart_at = None
        self.wanted = False
        self.proxy_path = os.path.join(EGRESS_DIR, "proxy.sock")

    def request(self, request):
        """`{"op": "egress", "id": N}` -> `{"ev": "ack", "id": N, "pid": int}` once it runs."""
        if not os.path.isdir(EGRESS_DIR):
            raise RequestError("egress", "this sandbox has no %s" % EGRESS_DIR)
        self.start_towards(os.path.join(EGRESS_DIR, "proxy.sock"))
        self.runner.send({"ev": "ack", "id": request.get("id"), "pid": self.pid})

    def start_towards(self, proxy_path):
        """Keeps the forwarder running towards `proxy_path` (a file, or an abstract socket's `@name`). A box has one
        way out, so the path is set once (a box is given either a directory or a back channel, never both)."""
        self.wanted = True
        self.proxy_path = proxy_path
        if self.pid is None:
            self.start()
        if self.pid is None or not listening(LISTEN_SECONDS):
            raise RequestError("egress", "the egress forwarder did not start")

    def roots(self):
        return {self.pid} if self.pid is not None else set()

    def start(self):
        self.restart_at = None
        devnull = os.open("/dev/null", os.O_RDWR)
        root = os.open("/", os.O_PATH | os.O_DIRECTORY)
        try:
            argv = ["/usr/bin/python3", "-I", FORWARDER, self.proxy_path]
            self.pid = spawn(
                argv, {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, {0: devnull, 1: devnull, 2: devnull}, root
            )
            self.runner.adopt(self.pid, self.on_exit)
        except SpawnError:
            self.restart_at = now() + RESTART_SECONDS
        finally:
            os.close(devnull)
            os.close(root)

    def on_exit(self, _status):
        self.pid = None
        if self.wanted:
            self.restart_at = now() + RESTART_SECONDS

    def timeout(self):
        return None if self.restart_at is None else max(0.0, self.restart_at - now())

    def tick(self):
        if self.restart_at is not None and now() >= self.restart_at and not self.runner.closing:
            self.start()

    def shutdown(self):
        if self.pid is not None:
            kill_tree(self.pid, [])


def listening(within):
    """True once something accepts on 127.0.0.1:3128 (polled: the forwarder is a separate process)."""
    deadline = time.monotonic() + within
    while True:
        try:
            with socket.create_connection(("127.0.0.1", PORT), timeout=0.2):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
