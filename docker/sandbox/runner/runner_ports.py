"""The box's listening TCP ports (protocol 5's `ports`), and which kernel or process each belongs to. Stdlib only.

The sockets in LISTEN come from the kernel's socket diagnostics (NETLINK_SOCK_DIAG, asked for listeners only, so the
answer does not grow with the connections a busy server has), or from /proc/net/tcp and tcp6 where netlink is not
there. A socket's owner: the process holding its inode (/proc/<pid>/fd), then that process's parent chain up to a
leader the runner knows (a background process, a kernel, a terminal) or one of their sessions, as process trees are
counted everywhere in the runner (runner_trees.py). Sockets of the runner's own egress forwarder are no session's port.
"""

import os
import socket
import struct
import sys

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
TCP_LISTEN = 10
NLMSG_HEADER = struct.Struct("=IHHII")
# inet_diag_req_v2 (family, protocol, ext, pad, states) and an all-zero inet_diag_sockid (48 bytes).
DIAG_REQUEST = struct.Struct("=BBBBI48x")
DIAG_MESSAGE_BYTES = 72  # inet_diag_msg: 4 bytes, the 48-byte sockid, expires, rqueue, wqueue, uid, inode
PROC_NET = (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6))
LISTEN_STATE = "0A"
# How deep a parent chain is followed before giving up (a pid namespace has no loops; this bounds a race).
MAX_CHAIN = 4096
CACHE_ENTRIES = 1024


class Listener:
    """One socket in LISTEN: its port, the address it is bound to (as text) and its inode."""

    __slots__ = ("port", "address", "family", "inode")

    def __init__(self, port, address, family, inode):
        self.port = port
        self.address = address
        self.family = family
        self.inode = inode


def diag_listeners(family, timeout=1.0):
    """The listeners of one address family through NETLINK_SOCK_DIAG; raises OSError when that is not available."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(timeout)
        body = DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN)
        header = NLMSG_HEADER.pack(NLMSG_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
        nl.sendto(header + body, (0, 0))
        found = []
        while True:
            data = nl.recv(1 << 16)
            if not data:
                raise OSError("netlink closed")
            offset = 0
            while offset + NLMSG_HEADER.size <= len(data):
                length, kind, _flags, _seq, _pid = NLMSG_HEADER.unpack_from(data, offset)
                if length < NLMSG_HEADER.size:
                    raise OSError("malformed netlink message")
                payload = data[offset + NLMSG_HEADER.size : offset + length]
                offset += (length + 3) & ~3
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    errno = -struct.unpack_from("=i", payload)[0]
                    if errno == 0:
                        continue
                    raise OSError(errno, os.strerror(errno))
                if kind != SOCK_DIAG_BY_FAMILY or len(payload) < DIAG_MESSAGE_BYTES:
                    continue
                if payload[1] != TCP_LISTEN:
                    continue
                port = struct.unpack_from("!H", payload, 4)[0]
                raw = payload[8:24] if payload[0] == socket.AF_INET6 else payload[8:12]
                inode = struct.unpack_from("=I", payload, 68)[0]
                found.append(Listener(port, socket.inet_ntop(payload[0], raw), payload[0], inode))


def proc_address(text, family):
    """An address of /proc/net/tcp{,6}: 32-bit words in hex, each in the host's byte order."""
    raw = bytes.fromhex(text)
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(family, raw)


def parse_proc_net(text, family):
    """The listeners in the text of /proc/net/tcp (AF_INET) or /proc/net/tcp6 (AF_INET6)."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN_STATE:
            continue
        address, _, port = fields[1].partition(":")
        try:
            found.append(Listener(int(port, 16), proc_address(address, family), family, int(fields[9])))
        except ValueError:
            continue
    return found


def proc_net_listeners():
    found = []
    for path, family in PROC_NET:
        try:
            with open(path, encoding="ascii") as f:
                found += parse_proc_net(f.read(), family)
        except OSError:
            continue  # no IPv6 in this kernel
    return found


def listeners():
    """Every TCP socket in LISTEN in this network namespace."""
    try:
        return diag_listeners(socket.AF_INET) + diag_listeners(socket.AF_INET6)
    except OSError:
        return proc_net_listeners()


def socket_holders(inodes, pids):
    """inode -> (pid, fd) of the first of `pids` found holding each socket of `inodes`."""
    wanted = {"socket:[%d]" % inode: inode for inode in inodes}
    found = {}
    for pid in pids:
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                inode = wanted.get(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
            except OSError:
                continue
            if inode is not None and inode not in found:
                found[inode] = (pid, fd)
        if len(found) == len(wanted):
            break
    return found


def stat_entry(pid):
    """(ppid, session id) of `pid`, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        return int(fields[1]), int(fields[3])
    except (OSError, ValueError, IndexError):
        return None


def owner_of(pid, roots, stat=stat_entry):
    """What `roots` (leader pid -> owner) says of the first leader on `pid`'s parent chain, or of its session."""
    for _ in range(MAX_CHAIN):
        if pid <= 1:
            return None
        if pid in roots:
            return roots[pid]
        entry = stat(pid)
        if entry is None:
            return None
        ppid, sid = entry
        if sid in roots:
            return roots[sid]
        pid = ppid
    return None


def numeric_pids():
    return sorted(int(name) for name in os.listdir("/proc") if name.isdigit())


class Ports:
    """`ports`, and the owner of the server a tunnel reached. `owners()` gives the runner's leaders: pid -> (kind,
    id), kind one of "proc", "kernel", "term", "egress"."""

    def __init__(self, runner, owners):
        self.runner = runner
        self.owners = owners
        self.holders = {}  # inode -> (pid, fd): checked with one readlink before it is trusted
        self.listening = {}  # (port, family) -> inode of the listening socket whose owner was found last

    def request(self, request):
        """`{"op": "ports", "id"}` -> `{"ev": "ports", "id", "ports": [{port, address, proc, kernel}]}`."""
        found = self.describe(listeners())
        ports = [
            {"port": port, "address": address, "proc": ids[0], "kernel": ids[1]}
            for (port, address), ids in sorted(found.items())
        ]
        self.runner.send({"ev": "ports", "id": request.get("id"), "ports": ports})

    def owner(self, port, family):
        """(proc, kernel) of the server listening on `port` (its socket of `family` first), and whether it is the
        runner's egress forwarder. Asked on every connection the engine opens: the socket found last time for the
        port is trusted while the process found holding it still does (one readlink), which spares the two netlink
        dumps of every listener; a listening socket never changes its port."""
        known = self.listening.get((port, family))
        if known is not None:
            holder = self.holders.get(known)
            if holder is not None and self.still_holds(holder, known):
                kind = owner_of(holder[0], self.owners())
                return ids_of(kind), kind is not None and kind[0] == "egress"
            del self.listening[(port, family)]
        candidates = sorted((s for s in listeners() if s.port == port), key=lambda s: s.family != family)
        owners = self.resolve(candidates)
        for sock in candidates:
            kind = owners.get(sock.inode)
            if kind is not None:
                if len(self.listening) >= CACHE_ENTRIES:
                    self.listening.clear()
                self.listening[(port, family)] = sock.inode
                return ids_of(kind), kind[0] == "egress"
        return (None, None), False

    def describe(self, found):
        """(port, address) -> (proc, kernel) of `found`, without the egress forwarder's sockets."""
        owners = self.resolve(found)
        result = {}
        for sock in found:
            kind = owners.get(sock.inode)
            if kind is not None and kind[0] == "egress":
                continue
            key = (sock.port, sock.address)
            ids = ids_of(kind)
            if key not in result or result[key] == (None, None):
                result[key] = ids  # several sockets on one port and address (SO_REUSEPORT): one known owner wins
        return result

    def resolve(self, found):
        """inode -> owner (kind, id) of the sockets of `found` whose holder is in a tree the runner knows."""
        inodes = {s.inode for s in found if s.inode}
        holders = {}
        for inode in inodes:
            cached = self.holders.get(inode)
            if cached is not None and self.still_holds(cached, inode):
                holders[inode] = cached
        missing = inodes - set(holders)
        if missing:
            fresh = socket_holders(missing, numeric_pids())
            if len(self.holders) + len(fresh) > CACHE_ENTRIES:
                self.holders.clear()
            self.holders.update(fresh)
            holders.update(fresh)
        roots = self.owners()
        owners = {}
        for inode, (pid, _fd) in holders.items():
            kind = owner_of(pid, roots)
            if kind is not None:
                owners[inode] = kind
        return owners

    @staticmethod
    def still_holds(holder, inode):
        pid, fd = holder
        try:
            return os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "socket:[%d]" % inode
        except OSError:
            return False


def ids_of(kind):
    """(proc, kernel) of an owner."""
    if kind is not None and kind[0] == "proc":
        return kind[1], None
    if kind is not None and kind[0] == "kernel":
        return None, kind[1]
    return None, None  # a terminal's server, or one outside every tree the runner knows
