"""The runner's protocol and main loop: JSON lines on stdin/stdout, one selector for everything (README.md).

Requests are handled as they come: a fresh run, cells of different kernels, background processes, terminals and
tunnels are all under way at once, multiplexed here (no thread per connection: a container's pids limit counts
threads). Children are reaped in one place (SIGCHLD wakes the loop), and each exit goes to whoever started that pid;
the runner is a child subreaper, so orphans come back to it too and are reaped.
"""

import ctypes
import json
import os
import selectors
import signal
import sys
import time

from runner_channels import Channels
from runner_egress import Egress
from runner_kernels import Kernels
from runner_ports import Ports
from runner_procs import Processes
from runner_relay import Relay
from runner_resync import Resync
from runner_runs import Runs
from runner_snapshot import Snapshots
from runner_spawn import WORKSPACE, RequestError, checked_workspace, now, oom_kills
from runner_standby import Standby
from runner_terms import Terminals
from runner_trees import kill_everything_else, kill_unprotected
from runner_tunnels import Tunnels

PROTOCOL = 6
READ_CHUNK = 64 * 1024
MAX_REQUEST_BYTES = 32 * 1024 * 1024
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
TRUE = "/bin/true"
DEVNULL_STDIO = [
    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDWR, 0),
    (os.POSIX_SPAWN_DUP2, 0, 1),
    (os.POSIX_SPAWN_DUP2, 0, 2),
]


def prctl(option, value):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Runner:
    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.inbuf = bytearray()
        self.closing = False
        self.children = {}  # pid -> callback(exit status as os.waitstatus_to_exitcode gives it)
        self.runs = Runs(self)
        self.standby = Standby(self)
        self.kernels = Kernels(self)
        self.procs = Processes(self)
        self.egress = Egress(self)
        self.terms = Terminals(self)
        self.ports = Ports(self, self.owners)
        self.tunnels = Tunnels(self, self.ports)
        self.relay = Relay(self, self.ports)
        self.channels = Channels(self, self.tunnels)
        self.resync = Resync(self, PROTOCOL)
        self.snapshots = Snapshots(self, lambda request: checked_workspace(request, make_home=False))
        self.parts = (
            self.runs,
            self.standby,
            self.kernels,
            self.procs,
            self.egress,
            self.terms,
            self.tunnels,
            self.relay,
            self.channels,
            self.snapshots,
        )
        self.parts += (self.resync,)  # last: its tick answers once the others' ticks ended the old connection's work
        self.ops = {
            "ping": self.ping,
            "run": self.runs.start,
            "kill": self.runs.kill,
            "kernel_start": self.kernels.start,
            "cell": self.kernels.cell,
            "kernel_interrupt": self.kernels.interrupt,
            "kernel_stop": self.kernels.stop,
            "proc_start": self.procs.start,
            "proc_write": self.procs.write,
            "proc_signal": self.procs.signal,
            "egress": self.egress.request,
            "tunnel_open": self.tunnels.open,
            "tunnel_write": self.tunnels.write,
            "tunnel_ack": self.tunnels.ack,
            "tunnel_close": self.tunnels.close,
            "channel_open": self.channels.open,
            "channel_close": self.channels.close,
            "term_open": self.terms.open,
            "term_write": self.terms.write,
            "term_resize": self.terms.resize,
            "term_close": self.terms.close,
            "ports": self.ports.request,
            "resync": self.resync.request,
            "snapshot": self.snapshots.request,
        }

    # -- for the parts ----------------------------------------------------------------------------------------

    def send(self, message):
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            try:
                written = os.write(1, view)
            except BlockingIOError:
                # stdout may share its file description with the non-blocking stdin (an attached stream).
                time.sleep(0.001)
                continue
            view = view[written:]

    def watch(self, fd, events, callback):
        self.sel.register(fd, events, callback)

    def unwatch(self, fd):
        try:
            self.sel.unregister(fd)
        except (KeyError, ValueError):
            pass

    def adopt(self, pid, callback):
        """`callback(status)` once child `pid` has exited and been reaped."""
        self.children[pid] = callback

    def protected(self):
        """Leaders of the live kernels, processes and terminals, and the python waiting for the next run: their trees
        survive a fresh run's cleanup."""
        return (
            self.kernels.roots() | self.procs.roots() | self.terms.roots() | self.egress.roots() | self.standby.roots()
        )

    def owners(self):
        """Leader pid -> (kind, id) of what lives here, for naming whose tree a listening socket is in."""
        owners = {pid: ("egress", None) for pid in self.egress.roots()}
        owners.update({t.pid: ("term", t.id) for t in self.terms.table.values() if t.exit is None})
        owners.update({k.pid: ("kernel", k.id) for k in self.kernels.table.values() if k.pid is not None and k.alive})
        owners.update({p.pid: ("proc", p.id) for p in self.procs.table.values() if p.exit is None})
        return owners

    def kill_strays(self):
        """After a tree ended: what escaped it (setsid, then orphaned) dies too, unless a fresh run is going (its
        own cleanup will do that)."""
        if not self.runs.active:
            kill_unprotected(self.protected())

    # -- protocol ---------------------------------------------------------------------------------------------

    def on_control(self, _mask):
        try:
            data = os.read(0, READ_CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.closing = True  # the engine went away: nothing may outlive it here
            return
        self.inbuf += data
        while True:
            nl = self.inbuf.find(b"\n")
            if nl < 0:
                if len(self.inbuf) > MAX_REQUEST_BYTES:
                    self.inbuf.clear()
                    self.send({"ev": "error", "id": None, "message": "request line too long"})
                return
            line = bytes(self.inbuf[:nl])
            del self.inbuf[: nl + 1]
            if line.strip():
                self.handle(line)

    def handle(self, line):
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op = self.ops.get(request.get("op"))
            if op is None:
                raise RequestError(None, "unknown op %r" % (request.get("op"),))
            op(request)
        except RequestError as err:
            message = {"ev": "error", "id": request_id, "message": str(err)}
            if err.code:
                message["code"] = err.code
            message.update(err.extra)
            self.send(message)
        except Exception as err:  # a bad request must never take the runner down
            self.send({"ev": "error", "id": request_id, "message": "%s: %s" % (type(err).__name__, err)})

    def ping(self, request):
        request_id = request.get("id")
        if self.runs.active:
            self.send({"ev": "pong", "id": request_id, "ok": True, "busy": True, "ms": 0})
            return
        t = now()
        try:
            # posix_spawn (vfork + exec): proof that processes still start, for little of the claim's time. The
            # engine's own timeout covers an exec that never returns.
            pid = os.posix_spawn(TRUE, [TRUE], {}, file_actions=DEVNULL_STDIO)
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            kill_unprotected(self.protected())  # leftovers nothing owns
            st = os.stat(WORKSPACE)
            message = {"ev": "pong", "id": request_id, "ok": code == 0, "busy": False}
            message["workspace"] = [st.st_dev, st.st_ino]
            if code != 0:
                message["error"] = "%s exited with %d" % (TRUE, code)
        except Exception as err:
            message = {"ev": "pong", "id": request_id, "ok": False, "busy": False, "error": str(err)}
        message["ms"] = round((now() - t) * 1000, 3)
        self.send(message)

    # -- main loop --------------------------------------------------------------------------------------------

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            callback = self.children.pop(pid, None)
            if callback is not None:
                callback(os.waitstatus_to_exitcode(status))

    def timeout(self):
        waits = [w for w in (part.timeout() for part in self.parts) if w is not None]
        return min(waits) if waits else None

    def serve(self):
        prctl(PR_SET_DUMPABLE, 0)  # /proc/<runner> becomes root-owned; same-uid ptrace is refused
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
        self.watch(wake_r, selectors.EVENT_READ, lambda _mask: self.drain(wake_r))
        os.set_blocking(0, False)
        self.watch(0, selectors.EVENT_READ, self.on_control)
        relay = self.relay.start()
        self.send(
            {
                "ev": "hello",
                "protocol": PROTOCOL,
                "pid": os.getpid(),
                "python": sys.version.split()[0],
                "oomCounter": oom_kills() is not None,
                "stateful": True,
                "relay": relay,
            }
        )
        while not self.closing:
            for key, mask in self.sel.select(self.timeout()):
                # An earlier handler of this batch may have closed it (and the fd number may be reused).
                if self.sel.get_map().get(key.fd) is key:
                    key.data(mask)
            self.reap()
            for part in self.parts:
                part.tick()
        for part in self.parts:
            part.shutdown()
        kill_everything_else()

    @staticmethod
    def drain(fd):
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        Runner().serve()
    except BrokenPipeError:
        pass
    return 0
