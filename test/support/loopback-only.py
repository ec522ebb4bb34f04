"""Runs a console script of this Python (`loopback-only.py schemathesis run ...`) able to reach loopback only.

The contract test (test/e2e/contract.e2e-spec.ts) fuzzes the engine on 127.0.0.1 with Schemathesis; nothing it
sends may go anywhere else, whatever the document or a response says (a server URL, a remote $ref, a
redirect). Every IPv4/IPv6 socket of the process is held to loopback addresses, and names other than
`localhost` are refused before any DNS query is made.
"""

import ipaddress
import socket
import sys
from importlib.metadata import entry_points

_INET = (socket.AF_INET, socket.AF_INET6)


def _loopback(host):
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host is None or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refused(what):
    return PermissionError(f"loopback-only: {what} is not a loopback address; only loopback may be reached")


_getaddrinfo = socket.getaddrinfo


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _loopback(host):
        raise _refused(host)
    return [info for info in _getaddrinfo(host, *args, **kwargs) if info[0] not in _INET or _loopback(info[4][0])]


def _guard(method):
    def guarded(self, address, *args):
        if self.family in _INET and not _loopback(address[0]):
            raise _refused(address[0])
        return method(self, address, *args)

    return guarded


def _guard_sendto(method):
    def guarded(self, data, *args):
        address = args[-1]
        if self.family in _INET and not _loopback(address[0]):
            raise _refused(address[0])
        return method(self, data, *args)

    return guarded


socket.getaddrinfo = _guarded_getaddrinfo
socket.socket.connect = _guard(socket.socket.connect)
socket.socket.connect_ex = _guard(socket.socket.connect_ex)
socket.socket.sendto = _guard_sendto(socket.socket.sendto)

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: loopback-only.py <console script> [arguments...]")
    matches = entry_points(group="console_scripts", name=sys.argv[1])
    if not matches:
        sys.exit(f"loopback-only: no console script {sys.argv[1]!r} in {sys.prefix}")
    script = next(iter(matches))
    sys.argv = sys.argv[1:]
    sys.exit(script.load()())
