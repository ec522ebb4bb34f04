"""A skill's call socket relayed over stdio: `python3 call_relay.py @name`.

The node skill SDK (switchyard_skill.js) uses it in a Kubernetes pod, whose call socket is an abstract Unix socket
(`@switchyard-call-…`, the runner's back channel): the image's node (18) cannot connect to one (libuv takes the
address's length from strlen, so the leading NUL leaves it empty), python can. Bytes go both ways unchanged; the end
of either side is passed on (stdin's end as the socket's half-close, the socket's end as stdout's), then it exits.
"""

import os
import selectors
import socket
import sys

CHUNK = 65536


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if not name.startswith("@"):
        sys.stderr.write("call_relay: needs an abstract socket name, @name\n")
        return 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + name[1:])
    except OSError as err:
        sys.stderr.write("call_relay: cannot connect to %s: %s\n" % (name, err))
        return 1
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ)
    sel.register(sock, selectors.EVENT_READ)
    open_sides = 2
    while open_sides:
        for key, _mask in sel.select():
            if key.fileobj == 0:
                data = os.read(0, CHUNK)
                if data:
                    sock.sendall(data)
                    continue
                sel.unregister(0)
                sock.shutdown(socket.SHUT_WR)
            else:
                data = sock.recv(CHUNK)
                if data:
                    write_all(1, data)
                    continue
                sel.unregister(sock)
                os.close(1)
            open_sides -= 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
