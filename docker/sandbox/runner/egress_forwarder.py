#!/usr/bin/env python3
"""Switchyard egress forwarder: 127.0.0.1:3128 inside a sandbox -> the session's egress proxy socket. Stdlib only.

    python3 -I egress_forwarder.py <proxy socket> [ready file]

A sandbox container has no network but its loopback. When its session may reach the network, the engine makes a
Unix socket of the session's egress proxy appear at <proxy socket>, and the sandbox's environment says
HTTP_PROXY=http://127.0.0.1:3128: every connection made to this port is relayed to that socket, where the proxy
checks the host against the session's network policy. When there is no socket (the session has no network), a
client gets an HTTP 403 saying so and how to ask for network, rather than a bare connection error.

One thread, one selector, non-blocking sockets (no thread per connection: a sandbox's pids limit counts threads).
The pooled runner starts it (and restarts it) beside itself; a one-off container's loader starts it before the
code and waits for <ready file>, written once it listens.
"""

import errno
import os
import selectors
import socket
import sys

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
REFUSAL = (
    b"HTTP/1.1 403 switchyard: this session has no network\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
)


class Side:
    """One socket of a relay, with what waits to be written to it."""

    def __init__(self, sock):
        self.sock = sock
        self.out = bytearray()
        self.eof = False  # it will send nothing more
        self.closed_write = False


class Relay:
    """A client of 127.0.0.1:3128 and its connection to the proxy socket (or the canned refusal)."""

    def __init__(self, forwarder, client, upstream):
        self.f = forwarder
        self.client = Side(client)
        self.upstream = Side(upstream) if upstream is not None else None
        self.head = b""  # no proxy: the request head, read before refusing
        self.closed = False

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
            body = (NO_NETWORK + "\n").encode("utf-8")
            side.out += REFUSAL + b"Content-Length: %d\r\n\r\n" % len(body) + body
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


class Forwarder:
    def __init__(self, proxy_path):
        self.proxy_path = proxy_path
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

    def accept(self):
        try:
            client, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        client.setblocking(False)
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.proxy_path)
            upstream.setblocking(False)
        except OSError as err:
            upstream.close()
            upstream = None
            if err.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
                client.close()
                return
        Relay(self, client, upstream).update()

    def serve(self):
        while True:
            for key, mask in self.sel.select():
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
