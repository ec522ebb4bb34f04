"""Back channels (protocol 6): the box's code reaching the engine without any network or shared directory.

Where the engine cannot mount a host directory into the box (a Kubernetes pod on another node), the session's
egress proxy and a skill's call socket cannot appear in the box as files. The runner then listens on their behalf and
carries each accepted connection to the engine as a tunnel over its own stdio: the same `tunnel_*` messages and flow
control as runner_tunnels.py, opened from this side with `{"ev": "tunnel_in", "tunnel", "target", "run"}`. The
engine connects it to what `target` means for this box in its own state (the session's egress proxy; the call
socket of run `run`, only while that run goes) or closes it; the box never names an address.

The sockets are abstract Unix sockets (a name in the pod's network namespace, no file): the runner shares its uid
with the code, so a socket file anywhere in the box could be replaced by the code, but a bound abstract name cannot
be taken by anyone else until the runner closes it. The names carry random bytes, so code cannot take one first.
The code connects to them (`@name`: `\\0name` as a Unix socket address), as it connects to the Docker backend's files.
Each name is bound twice: as it is, and padded with NULs to the whole `sun_path`, the address node 20 and older (the
image's, libuv before 1.46) connect to for a path starting with NUL; both lead to the same channel.
"""

import os
import selectors
import socket

from runner_spawn import RequestError
from runner_tunnels import MAX_TUNNELS, Tunnel

KINDS = ("egress", "call")
SUN_PATH_BYTES = 108
MAX_RUN_CHARS = 128
BACKLOG = 64


def abstract_name(kind):
    """`@switchyard-<kind>-<32 hex>`: as the box's code names it (the SDK and the forwarder turn `@` into NUL)."""
    return "@switchyard-%s-%s" % (kind, os.urandom(16).hex())


def addresses(name):
    """The socket addresses of an `@name`: exact, and NUL-padded to the whole sun_path (older node's form)."""
    exact = b"\0" + name[1:].encode("ascii")
    return (exact, exact + b"\0" * (SUN_PATH_BYTES - len(exact)))


class Channel:
    def __init__(self, kind, run, name):
        self.kind = kind
        self.run = run
        self.name = name
        self.socks = []


class Channels:
    def __init__(self, runner, tunnels):
        self.runner = runner
        self.tunnels = tunnels
        self.table = {}  # (kind, run) -> Channel
        self.next_tunnel = 0

    # -- requests ---------------------------------------------------------------------------------------------

    def open(self, request):
        """`{"op": "channel_open", "id", "kind": "egress"|"call", "run"?}` -> `{"ev": "channel_opened", "id",
        "socket": "@…"}`. The egress channel is the box's one (opened again, it answers the same socket) and starts
        the egress forwarder towards it; a call channel is its run's, until `channel_close`."""
        kind = request.get("kind")
        if kind not in KINDS:
            raise RequestError(None, "channel_open needs a kind: egress or call")
        run = request.get("run") if kind == "call" else None
        if kind == "call" and (not isinstance(run, str) or not run or len(run) > MAX_RUN_CHARS):
            raise RequestError(None, "a call channel needs its run's id")
        channel = self.table.get((kind, run))
        if channel is None:
            channel = self.listen(kind, run)
        if kind == "egress":
            self.runner.egress.start_towards(channel.name)
        self.runner.send({"ev": "channel_opened", "id": request.get("id"), "socket": channel.name})

    def close(self, request):
        """`{"op": "channel_close", "id", "run"}`: the run's call socket goes (its connections stay, the engine's)."""
        channel = self.table.pop(("call", request.get("run")), None)
        if channel is not None:
            self.drop(channel)
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": channel is not None})

    def drop_calls(self):
        """A new engine took over (resync): the old connection's runs ended, and their call sockets go with them.
        The box's egress channel stays (the new engine opens it again and gets the same socket)."""
        for key in [k for k in self.table if k[0] == "call"]:
            self.drop(self.table.pop(key))

    # -- sockets ----------------------------------------------------------------------------------------------

    def listen(self, kind, run):
        channel = Channel(kind, run, abstract_name(kind))
        try:
            for addr in addresses(channel.name):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                channel.socks.append(sock)
                sock.bind(addr)
                sock.listen(BACKLOG)
                sock.setblocking(False)
        except OSError as err:
            self.drop(channel)
            raise RequestError("channel", "could not listen for the %s channel: %s" % (kind, err)) from None
        self.table[(kind, run)] = channel
        for sock in channel.socks:
            self.runner.watch(sock.fileno(), selectors.EVENT_READ, lambda _mask, sock=sock: self.accept(channel, sock))
        return channel

    def accept(self, channel, listener):
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return  # out of descriptors: the connection waits in the backlog for the next try
        if len(self.tunnels.table) + len(self.runner.relay.links) >= MAX_TUNNELS:
            conn.close()  # the box's tunnels are bounded, whichever side opened them
            return
        conn.setblocking(False)
        self.next_tunnel += 1
        tunnel = Tunnel("in_%d" % self.next_tunnel, None, None)
        tunnel.sock = conn
        tunnel.open = True
        self.tunnels.table[tunnel.id] = tunnel
        self.runner.send({"ev": "tunnel_in", "tunnel": tunnel.id, "target": channel.kind, "run": channel.run})
        self.tunnels.update(tunnel)

    def drop(self, channel):
        for sock in channel.socks:
            if sock.fileno() >= 0:
                self.runner.unwatch(sock.fileno())
            sock.close()
        channel.socks = []

    # -- the loop's hooks -------------------------------------------------------------------------------------

    def timeout(self):
        return None

    def tick(self):
        pass

    def shutdown(self):
        for channel in self.table.values():
            self.drop(channel)
        self.table.clear()
