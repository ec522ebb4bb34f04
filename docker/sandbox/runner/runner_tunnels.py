"""Tunnels (protocol 5): TCP connections from the engine to a server listening inside this box, relayed as messages.

A box has no network route in or out, so the engine reaches a session's dev server through its runner: `tunnel_open`
connects to 127.0.0.1:<port> (then [::1]:<port>), bytes go both ways as base64 in `tunnel_write` and `tdata`, each
side may shut its write half (`eof`, `tend`), and `tclosed` is a tunnel's last event. Flow control both ways with a
1 MiB window: a `tunnel_write` is acknowledged once what is queued towards the socket is below it (the engine awaits
each ack), and the runner stops reading a socket while more than it of what it sent is not yet acknowledged by
`tunnel_ack`. Nothing here blocks: every socket is non-blocking in the one selector loop, no thread per connection
(a container's pids limit counts threads).
"""

import base64
import binascii
import errno
import os
import selectors
import socket

from runner_spawn import READ_CHUNK, RequestError, now

WINDOW = 1 << 20
MAX_TUNNELS = 256
# One tunnel_write carries at most this (the engine sends 256 KiB pieces); with the window, what a tunnel queues here.
MAX_WRITE_BYTES = 1 << 20
SEND_CHUNK = 256 * 1024
CONNECT_SECONDS = 10.0
ADDRESSES = ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1"))
MAX_ID_CHARS = 128


def describe(code):
    """`connection refused (ECONNREFUSED)` for an errno."""
    return "%s (%s)" % (os.strerror(code).lower(), errno.errorcode.get(code, "E%d" % code))


class Tunnel:
    def __init__(self, tunnel_id, port, open_id):
        self.id = tunnel_id
        self.port = port
        self.open_id = open_id  # the tunnel_open request, answered once connected or refused
        self.sock = None
        self.family = None
        self.attempts = list(ADDRESSES)
        self.failures = []
        self.connecting = False
        self.deadline = None
        self.open = False  # tunnel_opened was sent
        self.queue = bytearray()  # towards the socket
        self.waiting = []  # ids of tunnel_write requests answered once the queue is below the window
        self.eof = False  # shut the socket's write side once the queue is written
        self.write_shut = False
        self.read_eof = False  # the server shut its write side (`tend` was sent)
        self.unacked = 0  # bytes sent as tdata the engine has not acknowledged
        self.events = 0  # what the selector watches the socket for
        self.error = None  # why the socket closed, when it failed


class Tunnels:
    def __init__(self, runner, ports):
        self.runner = runner
        self.ports = ports
        self.table = {}

    # -- requests ---------------------------------------------------------------------------------------------

    def open(self, request):
        tunnel_id = request.get("tunnel")
        if not isinstance(tunnel_id, str) or not tunnel_id or len(tunnel_id) > MAX_ID_CHARS:
            raise RequestError(None, "tunnel_open needs a tunnel id")
        port = request.get("port")
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise RequestError(None, "tunnel_open needs a port from 1 to 65535")
        if tunnel_id in self.table:
            raise RequestError("exists", "tunnel %s already exists" % tunnel_id)
        if len(self.table) + len(self.runner.relay.links) >= MAX_TUNNELS:
            raise RequestError("tunnel_limit", "this box has %d tunnels open, the most it may" % MAX_TUNNELS)
        tunnel = Tunnel(tunnel_id, port, request.get("id"))
        self.table[tunnel_id] = tunnel
        self.attempt(tunnel)

    def write(self, request):
        tunnel = self.table.get(request.get("tunnel"))
        if tunnel is None or not tunnel.open:
            self.runner.send({"ev": "ack", "id": request.get("id"), "found": False})
            return
        if tunnel.eof:
            raise RequestError("closed", "the write side of tunnel %s is already shut" % tunnel.id)
        try:
            data = base64.b64decode(request.get("data") or "", validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise RequestError(None, "tunnel_write data is not base64") from None
        if len(data) > MAX_WRITE_BYTES:
            raise RequestError(None, "a tunnel_write carries at most %d bytes" % MAX_WRITE_BYTES)
        tunnel.queue += data
        tunnel.eof = bool(request.get("eof"))
        self.flush(tunnel)
        if self.table.get(tunnel.id) is not tunnel:
            # Gone while writing: failed, or (eof after the server's own) all written and the tunnel ended cleanly.
            self.runner.send({"ev": "ack", "id": request.get("id"), "found": tunnel.error is None})
        elif len(tunnel.queue) < WINDOW and not tunnel.waiting:
            self.runner.send({"ev": "ack", "id": request.get("id"), "found": True})
        else:
            tunnel.waiting.append(request.get("id"))

    def ack(self, request):
        """`{"op": "tunnel_ack", "tunnel", "bytes"}`: no answer."""
        tunnel = self.table.get(request.get("tunnel"))
        count = request.get("bytes")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise RequestError(None, "tunnel_ack needs a byte count")
        if tunnel is not None and tunnel.open:
            tunnel.unacked = max(0, tunnel.unacked - count)
            self.update(tunnel)

    def close(self, request):
        tunnel = self.table.get(request.get("tunnel"))
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": tunnel is not None})
        if tunnel is None:
            return
        if tunnel.open:
            self.finish(tunnel)
        else:
            tunnel.failures.append("closed by the engine while connecting")
            tunnel.attempts = []
            self.drop(tunnel)
            self.refuse(tunnel)

    # -- connecting -------------------------------------------------------------------------------------------

    def attempt(self, tunnel):
        """Connects to the next address; refuses the tunnel once none is left."""
        while tunnel.attempts:
            family, host = tunnel.attempts.pop(0)
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setblocking(False)
                code = sock.connect_ex((host, tunnel.port))
            except OSError as err:
                tunnel.failures.append("%s: %s" % (host, describe(err.errno or 0)))
                continue
            if code in (0, errno.EINPROGRESS):
                tunnel.sock, tunnel.family = sock, family
                if code == 0:
                    self.connected(tunnel)
                else:
                    tunnel.connecting = True
                    tunnel.deadline = now() + CONNECT_SECONDS
                    self.update(tunnel)
                return
            sock.close()
            tunnel.failures.append("%s: %s" % (host, describe(code)))
        self.refuse(tunnel)

    def on_connect(self, tunnel):
        code = tunnel.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code == 0:
            tunnel.connecting = False
            self.connected(tunnel)
            return
        tunnel.failures.append("%s: %s" % (ADDRESSES[tunnel.family == socket.AF_INET6][1], describe(code)))
        self.drop(tunnel)
        self.attempt(tunnel)

    def connected(self, tunnel):
        tunnel.connecting = False
        tunnel.deadline = None
        try:
            tunnel.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # relayed writes are already batched
        except OSError:
            pass
        (proc, kernel), egress = self.ports.owner(tunnel.port, tunnel.family)
        if egress:
            # The runner's own plumbing towards the session's egress proxy, not a session's server.
            tunnel.failures.append("port %d is the runner's egress forwarder" % tunnel.port)
            tunnel.attempts = []
            self.drop(tunnel)
            self.refuse(tunnel)
            return
        tunnel.open = True
        self.runner.send(
            {"ev": "tunnel_opened", "id": tunnel.open_id, "tunnel": tunnel.id, "proc": proc, "kernel": kernel}
        )
        self.update(tunnel)

    def drop(self, tunnel):
        """Closes the socket of a connection attempt."""
        if tunnel.sock is not None:
            self.runner.unwatch(tunnel.sock.fileno())
            tunnel.sock.close()
            tunnel.sock = None
            tunnel.events = 0
        tunnel.connecting = False

    def refuse(self, tunnel):
        self.table.pop(tunnel.id, None)
        message = "nothing accepts connections on port %d: %s" % (tunnel.port, "; ".join(tunnel.failures))
        self.runner.send({"ev": "error", "id": tunnel.open_id, "code": "connect", "message": message})

    # -- relaying ---------------------------------------------------------------------------------------------

    def update(self, tunnel):
        """Watches the socket for what the tunnel can do now: connect, read (within the window), write its queue."""
        if tunnel.sock is None:
            return
        events = 0
        if tunnel.connecting or (tunnel.open and tunnel.queue):
            events |= selectors.EVENT_WRITE
        if tunnel.open and not tunnel.read_eof and tunnel.unacked < WINDOW:
            events |= selectors.EVENT_READ
        if events == tunnel.events:
            return
        fd = tunnel.sock.fileno()
        self.runner.unwatch(fd)
        if events:
            self.runner.watch(fd, events, lambda mask: self.on_ready(tunnel, mask))
        tunnel.events = events

    def on_ready(self, tunnel, mask):
        if tunnel.connecting:
            self.on_connect(tunnel)
            return
        if mask & selectors.EVENT_WRITE:
            self.flush(tunnel)
        if mask & selectors.EVENT_READ and self.table.get(tunnel.id) is tunnel:
            self.read(tunnel)

    def read(self, tunnel):
        try:
            data = tunnel.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self.finish(tunnel, describe(err.errno or 0))
            return
        if not data:
            tunnel.read_eof = True
            self.runner.send({"ev": "tend", "tunnel": tunnel.id})
            if tunnel.write_shut:
                self.finish(tunnel)
            else:
                self.update(tunnel)
            return
        tunnel.unacked += len(data)
        self.runner.send({"ev": "tdata", "tunnel": tunnel.id, "data": base64.b64encode(data).decode("ascii")})
        self.update(tunnel)

    def flush(self, tunnel):
        """Writes what the socket takes now; answers the writes waiting for room; shuts the write side at eof."""
        while tunnel.queue:
            try:
                with memoryview(tunnel.queue) as view:
                    written = tunnel.sock.send(view[:SEND_CHUNK])
            except (BlockingIOError, InterruptedError):
                break
            except OSError as err:
                self.finish(tunnel, describe(err.errno or 0))
                return
            del tunnel.queue[:written]
        if len(tunnel.queue) < WINDOW:
            for request_id in tunnel.waiting:
                self.runner.send({"ev": "ack", "id": request_id, "found": True})
            tunnel.waiting = []
        if not tunnel.queue and tunnel.eof and not tunnel.write_shut:
            tunnel.write_shut = True
            try:
                tunnel.sock.shutdown(socket.SHUT_WR)
            except OSError as err:
                self.finish(tunnel, describe(err.errno or 0))
                return
            if tunnel.read_eof:
                self.finish(tunnel)
                return
        self.update(tunnel)

    def finish(self, tunnel, error=None):
        """The socket is gone: writes still waiting are answered `found: false`, then `tclosed`."""
        if self.table.get(tunnel.id) is not tunnel:
            return
        del self.table[tunnel.id]
        tunnel.error = error
        self.drop(tunnel)
        for request_id in tunnel.waiting:
            self.runner.send({"ev": "ack", "id": request_id, "found": False})
        tunnel.waiting = []
        message = {"ev": "tclosed", "tunnel": tunnel.id}
        if error is not None:
            message["error"] = error
        self.runner.send(message)

    # -- the loop's hooks -------------------------------------------------------------------------------------

    def timeout(self):
        deadlines = [t.deadline for t in self.table.values() if t.connecting]
        return max(0.0, min(deadlines) - now()) if deadlines else None

    def tick(self):
        t = now()
        for tunnel in list(self.table.values()):
            if tunnel.connecting and t >= tunnel.deadline:
                host = ADDRESSES[tunnel.family == socket.AF_INET6][1]
                tunnel.failures.append("%s: no answer within %d s" % (host, CONNECT_SECONDS))
                self.drop(tunnel)
                self.attempt(tunnel)

    def shutdown(self):
        for tunnel in list(self.table.values()):
            self.drop(tunnel)
        self.table.clear()
