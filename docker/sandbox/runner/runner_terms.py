"""Terminals (protocol 5): a shell, or one command, on a pseudo-terminal, driven by the engine.

`term_open` makes a PTY of the asked size, and starts an interactive bash that reads what a login bash reads, with
the session's PATH kept (terminal_profile.sh), or `/bin/bash --noprofile --norc -c <command>`, on its slave side as a
new session whose controlling terminal it is, in a directory of the checked workspace, with exactly the request's
environment and the sandbox's niceness and oom_score_adj (as background processes are started). What it writes goes
out as `tout` events; `term_write` types into it (^C is the byte 0x03: the line discipline turns it into SIGINT for
the foreground job), `term_resize` sets the window size (the kernel sends SIGWINCH). A terminal
ends with its shell: whatever else still runs in its tree or holds its terminal is killed, its output is read to the
end, then `texit`. `term_close` hangs it up (SIGHUP to the shell's process group and the foreground job's), hangs
the shell up again every 100 ms (bash can take the first just before readline blocks in read(), and would see it only
with the next input), and kills its tree a second later if it is still there.
"""

import base64
import binascii
import fcntl
import os
import selectors
import signal
import struct
import termios

from runner_procs import BASH, open_cwd
from runner_spawn import (
    READ_CHUNK,
    RequestError,
    SpawnError,
    checked_workspace,
    close_all,
    exit_fields,
    now,
    spawn,
    string_env,
)
from runner_trees import kill_tree, send

MAX_TERMS = 16
TERMINAL_PROFILE = os.path.join(os.path.dirname(os.path.realpath(__file__)), "terminal_profile.sh")
# A term_write is acknowledged once what is queued towards the terminal is below this (the engine awaits acks).
WINDOW = 1 << 20
MAX_WRITE_BYTES = 1 << 20
MAX_SIZE = 1000  # columns or rows
CLOSE_GRACE_SECONDS = 1.0
HUP_AGAIN_SECONDS = 0.1
# After the shell is gone and its tree killed, how long the terminal's output may take to end.
DRAIN_SECONDS = 1.0
MAX_ID_CHARS = 128


def window_size(request):
    """(cols, rows) of a request, each from 1 to MAX_SIZE."""
    size = []
    for name in ("cols", "rows"):
        value = request.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
            raise RequestError(None, "%s must be an integer from 1 to %d" % (name, MAX_SIZE))
        size.append(value)
    return size[0], size[1]


def set_size(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    def __init__(self, term_id):
        self.id = term_id
        self.pid = None
        self.master = None
        self.slave_name = None  # /dev/pts/N: what its holders' /proc/<pid>/fd links name
        self.reading = True  # until the slave side is closed everywhere (EIO)
        self.queue = bytearray()  # typed input not yet written
        self.waiting = []  # ids of term_write requests answered once the queue is below the window
        self.events = 0
        self.exit = None
        self.drain_deadline = None
        self.kill_at = None  # term_close: when its tree is killed if it is still there
        self.hup_at = None  # term_close: when the shell is hung up again if it is still there


class Terminals:
    def __init__(self, runner):
        self.runner = runner
        self.table = {}

    def roots(self):
        return {t.pid for t in self.table.values() if t.exit is None}

    # -- requests ---------------------------------------------------------------------------------------------

    def open(self, request):
        term_id = request.get("term")
        if not isinstance(term_id, str) or not term_id or len(term_id) > MAX_ID_CHARS:
            raise RequestError(None, "term_open needs a term id")
        cols, rows = window_size(request)
        command = request.get("command")
        if command is not None and not isinstance(command, str):
            raise RequestError(None, "term_open's command must be a string")
        if term_id in self.table:
            raise RequestError("exists", "terminal %s already exists" % term_id)
        if len(self.table) >= MAX_TERMS:
            raise RequestError("term_limit", "this box has %d terminals, the most it may" % MAX_TERMS)
        workspace_fd = checked_workspace(request)
        try:
            cwd_fd = open_cwd(request.get("cwd"))
        finally:
            os.close(workspace_fd)
        if command is None:
            argv = [BASH, "--rcfile", TERMINAL_PROFILE, "-i"]
        else:
            argv = [BASH, "--noprofile", "--norc", "-c", command]
        term = Term(term_id)
        try:
            master, slave = os.openpty()
        except OSError as err:
            os.close(cwd_fd)
            raise RequestError("term_start", "cannot open a pseudo-terminal: %s" % err.strerror) from None
        try:
            set_size(slave, cols, rows)
            term.slave_name = os.ttyname(slave)
            term.pid = spawn(argv, string_env(request.get("env")), {0: slave, 1: slave, 2: slave}, cwd_fd, tty=True)
        except (OSError, SpawnError) as err:
            os.close(master)
            raise RequestError("term_start", "cannot start %s: %s" % (BASH, err)) from None
        finally:
            close_all((slave, cwd_fd))  # the runner keeps no slave end: EIO on the master means it is closed
        term.master = master
        os.set_blocking(master, False)
        self.table[term_id] = term
        self.runner.adopt(term.pid, lambda code: self.on_exit(term, code))
        self.update(term)
        self.runner.send({"ev": "term_started", "id": request.get("id"), "term": term_id, "pid": term.pid})

    def write(self, request):
        term = self.live(request)
        if term is None:
            return
        try:
            data = base64.b64decode(request.get("data") or "", validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise RequestError(None, "term_write data is not base64") from None
        if len(data) > MAX_WRITE_BYTES:
            raise RequestError(None, "a term_write carries at most %d bytes" % MAX_WRITE_BYTES)
        term.queue += data
        self.flush(term)
        if len(term.queue) < WINDOW and not term.waiting:
            self.runner.send({"ev": "ack", "id": request.get("id"), "found": True})
        else:
            term.waiting.append(request.get("id"))

    def resize(self, request):
        cols, rows = window_size(request)
        term = self.live(request)
        if term is None:
            return
        try:
            set_size(term.master, cols, rows)  # the kernel sends SIGWINCH to the foreground job
        except OSError:
            pass
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": True})

    def close(self, request):
        term = self.live(request)
        if term is None:
            return
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": True})
        groups = {term.pid}
        try:
            groups.add(os.tcgetpgrp(term.master))  # the foreground job (vim, a server): job control gave it its own
        except OSError:
            pass
        for group in groups:
            try:
                os.killpg(group, signal.SIGHUP)
            except OSError:
                pass
        if term.kill_at is None:
            term.kill_at = now() + CLOSE_GRACE_SECONDS
            term.hup_at = now() + HUP_AGAIN_SECONDS

    def live(self, request):
        """The terminal a request names, or None after answering `found: false` (unknown, or its shell ended)."""
        term = self.table.get(request.get("term"))
        if term is None or term.exit is not None:
            self.runner.send({"ev": "ack", "id": request.get("id"), "found": False})
            return None
        return term

    # -- the master side --------------------------------------------------------------------------------------

    def update(self, term):
        if term.master is None:
            return
        events = (selectors.EVENT_READ if term.reading else 0) | (selectors.EVENT_WRITE if term.queue else 0)
        if events == term.events:
            return
        self.runner.unwatch(term.master)
        if events:
            self.runner.watch(term.master, events, lambda mask: self.on_ready(term, mask))
        term.events = events

    def on_ready(self, term, mask):
        if mask & selectors.EVENT_WRITE:
            self.flush(term)
        if mask & selectors.EVENT_READ:
            self.read(term)

    def read(self, term):
        """Forwards what one read gets; False once nothing more is there for now."""
        if not term.reading:
            return False
        try:
            data = os.read(term.master, READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:  # EIO: no process holds the slave side any more
            data = b""
        if not data:
            term.reading = False
            self.update(term)
            return False
        self.runner.send({"ev": "tout", "term": term.id, "data": base64.b64encode(data).decode("ascii")})
        return True

    def flush(self, term):
        """Types what the terminal takes now; answers the writes waiting for room (`found: false` once it ended)."""
        while term.queue and term.exit is None:
            try:
                written = os.write(term.master, term.queue[:READ_CHUNK])
            except BlockingIOError:
                break
            except OSError:  # the terminal is hung up: what was typed has nowhere to go
                term.queue.clear()
                break
            del term.queue[:written]
        if term.exit is not None:
            term.queue.clear()
        if len(term.queue) < WINDOW:
            for request_id in term.waiting:
                self.runner.send({"ev": "ack", "id": request_id, "found": term.exit is None})
            term.waiting = []
        self.update(term)

    # -- its end ----------------------------------------------------------------------------------------------

    def on_exit(self, term, code):
        term.exit = code
        kill_tree(term.pid, [term.slave_name])  # a terminal ends with its shell
        term.drain_deadline = now() + DRAIN_SECONDS
        self.flush(term)

    def timeout(self):
        deadlines = []
        for term in self.table.values():
            if term.exit is not None:
                deadlines.append(term.drain_deadline)
            elif term.kill_at is not None:
                deadlines.append(min(term.kill_at, term.hup_at))
        return max(0.0, min(deadlines) - now()) if deadlines else None

    def tick(self):
        t = now()
        for term in list(self.table.values()):
            if term.exit is None:
                if term.kill_at is not None and t >= term.kill_at:
                    term.kill_at = None
                    kill_tree(term.pid, [term.slave_name])  # its exit follows, reaped by the loop
                elif term.kill_at is not None and t >= term.hup_at:
                    term.hup_at = t + HUP_AGAIN_SECONDS
                    send([term.pid], signal.SIGHUP)
                continue
            if term.reading and t < term.drain_deadline:
                continue
            for _ in range(64):  # bounded: something outside the tree may still write
                if not self.read(term):
                    break
            self.finish(term)

    def finish(self, term):
        del self.table[term.id]
        self.runner.unwatch(term.master)
        close_all((term.master,))
        term.master = None
        exit_code, sig = exit_fields(term.exit)
        self.runner.send({"ev": "texit", "term": term.id, "exitCode": exit_code, "signal": sig})
        self.runner.kill_strays()

    def shutdown(self):
        for term in self.table.values():
            if term.exit is None:
                send([term.pid], signal.SIGHUP)
                kill_tree(term.pid, [term.slave_name])
