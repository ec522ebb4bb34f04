#!/usr/bin/env python3
"""Switchyard egress forwarder: 127.0.0.1:3128 inside a sandbox -> the session's egress proxy socket. Stdlib only.

    python3 -I egress_forwarder.py <proxy socket> [ready file]

<proxy socket> is a path, or `@name` for an abstract socket (the runner's back channel in a Kubernetes pod,
runner_channels.py).

A sandbox container has no network but its loopback. When its session may reach the network, the engine makes a
Unix socket of the session's egress proxy appear at <proxy socket>, and the sandbox's environment says
HTTP_PROXY=http://127.0.0.1:3128: every connection made to this port is relayed to that socket, where the proxy
checks the host against the session's network policy. When there is no socket (the session has no network), a
client gets an HTTP 403 saying so and how to ask for network, rather than a bare connection error.

One thread, one selector, non-blocking sockets (no thread per connection: a sandbox's pids limit counts threads).
The pooled runner starts it (and restarts it) beside itself; a one-off container's loader starts it before the
code and waits for <ready file>, written once it listens.

Its open files are bounded by the sandbox's nofile limit like the code's, and each relay holds two. So it relays at
most MAX_RELAYS connections at once (what the limit leaves room for); past that a client is answered HTTP 503
saying so (at most MAX_REFUSING at a time, the rest are closed at once), and should it still run out of descriptors
it stops accepting until a relay ends. It never dies of too many connections: the sandbox keeps its egress.
"""

import errno
import os
import resource
import selectors
import socket
import sys
import time

PORT = 3128
CHUNK = 64 * 1024
HEAD_LIMIT = 16 * 1024
# A relay buffers at most this much towards a slow side before it stops reading the other.
BUFFER_LIMIT = 1024 * 1024
NO_NETWORK = (
    "switchyard: this session has no network access. Ask for it when you create the session: "
    'POST /v1/sessions {"network":{"allow":["pypi.org","*.pythonhosted.org"]}} '
    "(hosts within the engine's SWITCHYARD_EGRESS_ALLOWED)"
)
# Descriptors kept free of relays: stdio, the listener, the selector, the refusals being answered.
MAX_REFUSING = 16
RESERVED_FDS = 16 + MAX_REFUSING
# While accepting fails for lack of descriptors, how long before trying again even if no relay ended.
PAUSE_SECONDS = 1.0


def refusal(status, reason, text):
    """A complete HTTP answer: `status reason`, `text` as the body, then the connection closes."""
    body = (text + "\n").encode("utf-8")
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % (status, reason.encode("ascii"), len(body))
    ) + body


def max_relays():
    """Relays the nofile limit leaves room for (two descriptors each), at most 1024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 4096
    return max(1, min(1024, (soft - RESERVED_FDS) // 2))


NO_NETWORK_ANSWER = refusal(403, "switchyard: this session has no network", NO_NETWORK)


class Side:
    """One socket of a relay, with what waits to be written to it."""

    def __init__(self, sock):
        self.sock = sock
        self.out = bytearray()
        self.eof = False  # it will send nothing more
        self.closed_write = False


class Relay:
    """A client of 127.0.0.1:3128 and its connection to the proxy socket, or, without one, the `answer` it gets."""

    def __init__(self, forwarder, client, upstream, answer=None):
        self.f = forwarder
        self.client = Side(client)
        self.upstream = Side(upstream) if upstream is not None else None
        self.answer = answer
        self.head = b""  # no proxy: the request head, read before refusing
        self.closed = False
        self.f.opened(self)

    def sides(self):
        return [s for s in (self.client, self.upstream) if s is not None]

    def other(self, side):
        return self.upstream if side is self.client else self.client

    def events(self, side):
        peer = self.other(side)
        want = 0
        if not side.eof and (peer is None or len(peer.out) < BUFFER_LIMIT):
            want |= selectors.EVENT_READ
        if side.out:
            want |= selectors.EVENT_WRITE
        return want

    def update(self):
        if self.closed:
            return
        for side in self.sides():
            self.f.watch(side.sock, self.events(side), (self, side))
        if all(s.eof and not s.out for s in self.sides()) or (
            self.upstream is None and self.client.closed_write and not self.client.out
        ):
            self.close()

    def on_ready(self, side, mask):
        if mask & selectors.EVENT_WRITE and side.out:
            try:
                sent = side.sock.send(side.out)
                del side.out[:sent]
            except BlockingIOError:
                pass
            except OSError:
                return self.close()
            peer = self.other(side)
            if not side.out and (side.eof if peer is None else peer.eof):
                self.shutdown_write(side)
        if mask & selectors.EVENT_READ:
            try:
                data = side.sock.recv(CHUNK)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                side.eof = True
                peer = self.other(side)
                if peer is not None and not peer.out:
                    self.shutdown_write(peer)
            elif data:
                self.take(side, data)
        self.update()

    def take(self, side, data):
        peer = self.other(side)
        if peer is not None:
            peer.out += data
            return
        # No proxy socket: read the request head, then answer the refusal and close.
        self.head += data
        if b"\r\n\r\n" in self.head or len(self.head) >= HEAD_LIMIT:
            side.out += self.answer
            side.eof = True

    def shutdown_write(self, side):
        if side.closed_write:
            return
        side.closed_write = True
        try:
            side.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        if self.closed:
            return
        self.closed = True
        for side in self.sides():
            self.f.forget(side.sock)
            side.sock.close()
        self.f.closed(self)


class Forwarder:
    def __init__(self, proxy_path):
        self.proxy_path = "\0" + proxy_path[1:] if proxy_path.startswith("@") else proxy_path
        self.max_relays = max_relays()
        self.relays = 0  # relaying to the proxy
        self.refusing = 0  # being answered a refusal
        self.paused_until = None  # out of descriptors: not accepting until a relay ends, or then
        self.busy = refusal(
            503,
            "switchyard: too many connections through this sandbox's egress forwarder",
            "switchyard: this sandbox has %d connections open through its egress forwarder, the most it relays at "
            "once; close some (or reuse them) and retry" % self.max_relays,
        )
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", PORT))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, None)

    def watch(self, sock, events, data):
        try:
            if events:
                try:
                    self.sel.modify(sock, events, data)
                except KeyError:
                    self.sel.register(sock, events, data)
            else:
                self.forget(sock)
        except (ValueError, OSError):
            pass

    def forget(self, sock):
        try:
            self.sel.unregister(sock)
        except (KeyError, ValueError):
            pass

    def opened(self, relay):
        if relay.upstream is None:
            self.refusing += 1
        else:
            self.relays += 1

    def closed(self, relay):
        if relay.upstream is None:
            self.refusing -= 1
        else:
            self.relays -= 1
        self.resume()

    def pause(self):
        """Out of descriptors: stop watching the listener (it would stay readable) until a relay ends."""
        if self.paused_until is None:
            self.forget(self.listener)
        self.paused_until = time.monotonic() + PAUSE_SECONDS

    def resume(self):
        if self.paused_until is not None:
            self.paused_until = None
            self.watch(self.listener, selectors.EVENT_READ, None)

    def refuse(self, client, answer):
        """
        Answers `answer` once the client has sent its request head. With too many refusals under way already, answers
        at once, without waiting for the head, and closes: the client still reads why.
        """
        if self.refusing < MAX_REFUSING:
            Relay(self, client, None, answer).update()
            return
        try:
            client.send(answer)
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        client.close()

    def accept(self):
        try:
            client, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            # EMFILE, ENFILE, ENOBUFS: no descriptor for the client. Waiting beats dying: a relay will end.
            self.pause()
            return
        client.setblocking(False)
        if self.relays >= self.max_relays:
            self.refuse(client, self.busy)
            return
        try:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            self.refuse(client, self.busy)
            self.pause()
            return
        try:
            upstream.connect(self.proxy_path)
            upstream.setblocking(False)
        except OSError as err:
            upstream.close()
            if err.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
                self.refuse(client, NO_NETWORK_ANSWER)
            else:
                client.close()
            return
        Relay(self, client, upstream).update()

    def serve(self):
        while True:
            timeout = None
            if self.paused_until is not None:
                timeout = self.paused_until - time.monotonic()
                if timeout <= 0:
                    self.resume()
                    timeout = None
            for key, mask in self.sel.select(timeout):
                if key.data is None:
                    self.accept()
                else:
                    relay, side = key.data
                    relay.on_ready(side, mask)


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: egress_forwarder.py <proxy socket> [ready file]\n")
        return 2
    forwarder = Forwarder(argv[1])
    if len(argv) > 2:
        with open(argv[2], "w", encoding="ascii") as ready:
            ready.write("%d\n" % os.getpid())
    forwarder.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
