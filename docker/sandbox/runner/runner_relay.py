"""The relay (protocol 5, where the box has one): raw bytes between the engine and a server listening inside this box.

A tunnel (runner_tunnels.py) carries a connection as base64 in JSON lines on the runner's stdio, each write
acknowledged: it works everywhere the runner's stdio reaches, Kubernetes included, and costs round trips. Where the
engine shares a host directory with the box (a pooled container's `<mountPoint>.relay`, mounted at RELAY_DIR), the
runner also listens on RELAY_DIR/relay.sock and says so in its `hello` (`"relay": true`). Each connection there is
one tunnel, without the JSON:

    engine -> runner   the port, as ASCII digits, and "\\n"
    runner -> engine   "ok <proc|-> <kernel|->\\n" once connected to 127.0.0.1:<port> (then [::1]:<port>), then the
                       server's bytes untouched; or "err <code> <message>\\n" and the connection closes
                       (codes as tunnel_open's: `connect`, `tunnel_limit`, and `request` for a malformed first line)

After `ok`, bytes pass both ways as they come and each side's shutdown of its write half is passed on. Flow control is
the sockets' own: the runner holds at most CHUNK bytes per direction and reads a side only when what it read from it
before has been written on. The same refusals as tunnel_open: the runner's egress forwarder is not a session's server.
Nothing here blocks: the sockets are non-blocking in the runner's one selector loop, no thread per connection.

The socket is reachable by the box's own code as well; that reaches nothing its code cannot reach already (the box's
own loopback). The engine opens the path without following a symlink and checks that it is a socket (the box's code
could put something else there); see libs/sandbox/src/core/runner/runner-relay.ts.
"""

import errno
import os
import select
import selectors
import socket

from runner_spawn import now
from runner_tunnels import ADDRESSES, CONNECT_SECONDS, MAX_TUNNELS, describe

RELAY_DIR = "/run/switchyard-relay"
RELAY_NAME = "relay.sock"
CHUNK = 256 * 1024
MAX_HEADER = 16
# How often a link the engine has shut its write side of is checked for the engine's hang-up (see `hung_up`).
HANGUP_CHECK_SECONDS = 1.0


class Link:
    """One relayed connection: `engine` (the relay socket's accepted side) and `server` (TCP in the box)."""

    def __init__(self, engine):
        self.engine = engine
        self.server = None
        self.header = bytearray()
        self.port = None
        self.attempts = list(ADDRESSES)
        self.failures = []
        self.family = None
        self.connecting = False
        self.deadline = None
        self.open = False
        self.to_server = bytearray()
        self.to_engine = bytearray()
        self.engine_eof = False  # the engine shut its write side
        self.server_eof = False
        self.server_shut = False  # we shut the server's write side
        self.engine_shut = False
        self.closing = False  # write what is queued towards the engine, then close (a refusal)
        self.events = {}  # fd -> the events watched


class Relay:
    def __init__(self, runner, ports):
        self.runner = runner
        self.ports = ports
        self.listener = None
        self.links = set()
        self.next_hangup_check = 0.0

    def start(self):
        """Listens on RELAY_DIR/relay.sock when the box has a writable RELAY_DIR; answers whether it does."""
        if not os.path.isdir(RELAY_DIR) or not os.access(RELAY_DIR, os.W_OK):
            return False
        path = os.path.join(RELAY_DIR, RELAY_NAME)
        try:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            os.chmod(path, 0o600)
            listener.listen(64)
            listener.setblocking(False)
        except OSError:
            return False
        self.listener = listener
        self.runner.watch(listener.fileno(), selectors.EVENT_READ, lambda _mask: self.accept())
        return True

    # -- accepting and connecting -----------------------------------------------------------------------------

    def accept(self):
        while True:
            try:
                engine, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of file descriptors, for one: the engine's connect fails and it says so
            engine.setblocking(False)
            link = Link(engine)
            self.links.add(link)
            self.read_header(link)  # the engine writes the port with its connect: usually here already

    def read_header(self, link):
        try:
            data = link.engine.recv(MAX_HEADER - len(link.header))
        except (BlockingIOError, InterruptedError):
            self.update(link)
            return
        except OSError:
            self.close(link)
            return
        if not data:
            self.close(link)
            return
        link.header += data
        line, newline, rest = bytes(link.header).partition(b"\n")
        if not newline:
            if len(link.header) >= MAX_HEADER:
                self.refuse(link, "request", "the first line must be a port and a newline")
            else:
                self.update(link)
            return
        if not line.isdigit() or not 1 <= int(line) <= 65535:
            self.refuse(link, "request", "the first line must be a port from 1 to 65535")
            return
        link.port = int(line)
        link.to_server += rest
        link.header = bytearray()
        # Refused once its first line is read: closing with it unread would reset the connection, and the engine
        # could lose the answer.
        if len(self.links) + len(self.runner.tunnels.table) > MAX_TUNNELS:
            self.refuse(link, "tunnel_limit", "this box has %d tunnels open, the most it may" % MAX_TUNNELS)
            return
        self.attempt(link)

    def attempt(self, link):
        while link.attempts:
            family, host = link.attempts.pop(0)
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setblocking(False)
                code = sock.connect_ex((host, link.port))
            except OSError as err:
                link.failures.append("%s: %s" % (host, describe(err.errno or 0)))
                continue
            if code in (0, errno.EINPROGRESS):
                link.server, link.family = sock, family
                if code == 0:
                    self.connected(link)
                else:
                    link.connecting = True
                    link.deadline = now() + CONNECT_SECONDS
                    self.update(link)
                return
            sock.close()
            link.failures.append("%s: %s" % (host, describe(code)))
        self.refuse(
            link, "connect", "nothing accepts connections on port %d: %s" % (link.port, "; ".join(link.failures))
        )

    def on_connect(self, link):
        code = link.server.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code == 0:
            self.connected(link)
            return
        link.failures.append("%s: %s" % (ADDRESSES[link.family == socket.AF_INET6][1], describe(code)))
        self.drop_server(link)
        self.attempt(link)

    def connected(self, link):
        link.connecting = False
        link.deadline = None
        try:
            link.server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        (proc, kernel), egress = self.ports.owner(link.port, link.family)
        if egress:
            self.drop_server(link)
            self.refuse(
                link,
                "connect",
                "nothing accepts connections on port %d: it is the runner's egress forwarder" % link.port,
            )
            return
        link.open = True
        link.to_engine += ("ok %s %s\n" % (proc or "-", kernel or "-")).encode("ascii")
        self.pump(link)

    def refuse(self, link, code, message):
        link.to_engine += ("err %s %s\n" % (code, message.replace("\n", " "))).encode("utf-8")
        link.closing = True
        self.pump(link)

    # -- relaying ---------------------------------------------------------------------------------------------

    def pump(self, link):
        """Writes what each side takes now, passes a shut write half on, then watches what is left to do."""
        if link.to_engine and not self.send(link, link.engine, link.to_engine):
            return
        if link.closing:
            if not link.to_engine:
                self.close(link)
            else:
                self.update(link)
            return
        if link.server is not None and not link.connecting and link.to_server:
            if not self.send(link, link.server, link.to_server):
                return
        if link.open:
            if link.engine_eof and not link.to_server and not link.server_shut:
                link.server_shut = True
                if not self.shut(link, link.server):
                    return
            if link.server_eof and not link.to_engine and not link.engine_shut:
                link.engine_shut = True
                if not self.shut(link, link.engine):
                    return
            if link.server_shut and link.engine_shut:
                self.close(link)
                return
        self.update(link)

    def send(self, link, sock, queue):
        try:
            with memoryview(queue) as view:
                written = sock.send(view[:CHUNK])
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            self.close(link)
            return False
        del queue[:written]
        return True

    def shut(self, link, sock):
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.close(link)
            return False
        return True

    def receive(self, link, sock, queue):
        """Reads once from `sock` into `queue`; answers False at end of stream (or when the link is gone)."""
        try:
            data = sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            self.close(link)
            return False
        if data:
            queue += data
            return True
        return False

    def on_engine(self, link, mask):
        if link.port is None:
            self.read_header(link)
            return
        if mask & selectors.EVENT_READ and link.open and not link.engine_eof:
            if not self.receive(link, link.engine, link.to_server):
                if link not in self.links:
                    return
                if hung_up(link.engine):
                    self.close(link)  # gone, not only done writing: nothing the server says can reach it
                    return
                link.engine_eof = True
        self.pump(link)

    def on_server(self, link, mask):
        if link.connecting:
            self.on_connect(link)
            return
        if mask & selectors.EVENT_READ and not link.server_eof:
            if not self.receive(link, link.server, link.to_engine):
                if link not in self.links:
                    return
                link.server_eof = True
        self.pump(link)

    def update(self, link):
        if link not in self.links:
            return
        engine = 0
        # Not while connecting: the engine may already have sent its request, which waits in the socket till then.
        if link.port is None or (link.open and not link.engine_eof and len(link.to_server) < CHUNK):
            engine |= selectors.EVENT_READ
        if link.to_engine:
            engine |= selectors.EVENT_WRITE
        self.watch(link, link.engine, engine, self.on_engine)
        if link.server is not None:
            server = 0
            if link.connecting or link.to_server:
                server |= selectors.EVENT_WRITE
            if link.open and not link.server_eof and len(link.to_engine) < CHUNK:
                server |= selectors.EVENT_READ
            self.watch(link, link.server, server, self.on_server)

    def watch(self, link, sock, events, handler):
        fd = sock.fileno()
        if link.events.get(fd, 0) == events:
            return
        self.runner.unwatch(fd)
        if events:
            self.runner.watch(fd, events, lambda mask: handler(link, mask))
        link.events[fd] = events

    def drop_server(self, link):
        if link.server is not None:
            fd = link.server.fileno()
            self.runner.unwatch(fd)
            link.events.pop(fd, None)
            link.server.close()
            link.server = None
        link.connecting = False

    def close(self, link):
        if link not in self.links:
            return
        self.links.discard(link)
        self.drop_server(link)
        self.runner.unwatch(link.engine.fileno())
        link.engine.close()

    # -- the loop's hooks -------------------------------------------------------------------------------------

    def timeout(self):
        deadlines = [link.deadline for link in self.links if link.connecting]
        if any(link.engine_eof for link in self.links):
            deadlines.append(self.next_hangup_check)
        return max(0.0, min(deadlines) - now()) if deadlines else None

    def tick(self):
        t = now()
        if t >= self.next_hangup_check:
            # A half-closed engine side is not watched (it would read as ready for ever): its hang-up is looked for.
            self.next_hangup_check = t + HANGUP_CHECK_SECONDS
            for link in list(self.links):
                if link.engine_eof and hung_up(link.engine):
                    self.close(link)
        for link in list(self.links):
            if link.connecting and t >= link.deadline:
                host = ADDRESSES[link.family == socket.AF_INET6][1]
                link.failures.append("%s: no answer within %d s" % (host, CONNECT_SECONDS))
                self.drop_server(link)
                self.attempt(link)

    def shutdown(self):
        for link in list(self.links):
            self.close(link)
        if self.listener is not None:
            self.runner.unwatch(self.listener.fileno())
            self.listener.close()
            self.listener = None


def hung_up(sock):
    """Whether the peer of a Unix stream socket closed it (POLLHUP), not only shut its write side (POLLRDHUP)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return any(events & select.POLLHUP for _fd, events in poller.poll(0))
