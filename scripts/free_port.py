"""Prints a TCP port on 127.0.0.1 for a local daemon of the scripts (the test cluster, Neo4j, PostgreSQL).

Usage: python3 scripts/free_port.py [TAKEN ...]   (TAKEN: ports already given to other daemons of the same start)

The port is free now (nothing is bound to it, checked with SO_REUSEADDR as the daemons bind) and, when the kernel
leaves room for it, outside its ephemeral range (net.ipv4.ip_local_port_range): a port the kernel hands out for
`bind(0)` could be taken as the local end of any outgoing connection between this choice and the daemon's bind,
which then fails with EADDRINUSE.
"""

import random
import socket
import sys

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LINUX_DEFAULT_RANGE = (32768, 60999)
BELOW_SPAN = 16384  # how far below the ephemeral range to look
LOWEST = 1024  # never a privileged port
TRIES = 200


def ephemeral_range(path=EPHEMERAL_RANGE_FILE):
    try:
        with open(path) as f:
            low, high = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        return LINUX_DEFAULT_RANGE
    return low, high


def candidates(low, high):
    """The ports outside the ephemeral range [low, high]: up to BELOW_SPAN below it, and all above it."""
    below = range(max(LOWEST + 1, low - BELOW_SPAN), low)
    above = range(high + 1, 65536)
    return below, above


def is_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def kernel_port():
    """A port from bind(0): inside the ephemeral range, the fallback when nothing outside it is free."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port(taken=(), ephemeral=None, rng=random):
    low, high = ephemeral or ephemeral_range()
    below, above = candidates(low, high)
    total = len(below) + len(above)
    taken = set(taken)
    for _ in range(TRIES if total else 0):
        i = rng.randrange(total)
        port = below[i] if i < len(below) else above[i - len(below)]
        if port not in taken and is_free(port):
            return port
    while True:
        port = kernel_port()
        if port not in taken:
            return port


def main(argv):
    try:
        taken = [int(v) for v in argv]
    except ValueError:
        print("usage: free_port.py [TAKEN ...] (ports as integers)", file=sys.stderr)
        return 2
    print(free_port(taken))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
