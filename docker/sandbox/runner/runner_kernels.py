"""Kernels: per-session interpreters (python, node, bash) that keep their state between cells.

A kernel runs beside the runner in its own session, in the checked workspace, with the sandbox's niceness and
oom_score_adj. Besides its stdout and stderr it has a request pipe and a reply pipe (fds 3 and 4; bash reads its
requests as an interactive shell's command input on fd 0 instead, see kernel_bash.sh). A cell's output is what the
kernel writes between the cell's start and end tokens (runner_streams.py); its outcome is the kernel's reply; its
deadlines, and when an interrupt may be signalled, are the cell's own (runner_cells.py).

Interrupts are SIGINT to the kernel's process group, as Jupyter does: the cell stops and the state stays. When a
node or bash cell runs on after its SIGINT, the signal is sent again (bash only while it waits on a child: between
cells, or while it reports, it would drop the report's line). A timeout
or an output cap interrupts too and, when the cell has not finished `graceMs` later, kills the kernel's whole tree
(the state is lost). A kernel that dies, however, ends its cell with `stateLost` and is reported by `kernel_exit`.
"""

import base64
import json
import os
import selectors
import signal

from runner_cells import Cell
from runner_languages import HANDSHAKE, INTERPRETERS, cell_request, first_request, go_request, kernel_argv, kernel_fds
from runner_spawn import (
    READ_CHUNK,
    RequestError,
    SpawnError,
    checked_workspace,
    close_all,
    exit_fields,
    now,
    oom_kills,
    oom_since,
    spawn,
    string_env,
)
from runner_streams import CellStream
from runner_trees import kill_tree, tree_members

START_SECONDS = 10.0
# After the kernel died and its tree was killed, how long its pipes may take to close.
DRAIN_SECONDS = 1.0
TAIL_BYTES = 2048
# A kernel's longest line: a rich result of the largest allowed size (SWITCHYARD_RESULT_MAX_BYTES, at most 8 MiB),
# base64 and all.
MAX_REPLY_BYTES = 12 << 20


class Kernel:
    def __init__(self, request):
        self.id = request["kernel"]
        self.language = request.get("language")
        self.start_id = request.get("id")
        self.meta = request.get("meta")  # the engine's own record of it, given back by `resync`
        self.pid = None
        self.ready = False
        self.deadline = now() + START_SECONDS
        self.fds = {}  # "req" (write end), "rep", 1, 2 (read ends)
        self.queue = bytearray()  # requests not yet written
        self.replies = bytearray()
        self.streams = {1: CellStream(), 2: CellStream()}
        self.tail = bytearray()  # its output before it got ready, for the error
        self.count = 0
        self.cell = None
        self.exit = None  # its exit status, once reaped
        self.drain_deadline = None
        self.oom_base = oom_kills()

    @property
    def alive(self):
        return self.exit is None

    def outputs(self):
        """The runner's ends of its stdout and stderr: whatever holds them open belongs to it."""
        return [self.fds[k] for k in (1, 2) if k in self.fds]


class Kernels:
    def __init__(self, runner):
        self.runner = runner
        self.table = {}

    def roots(self):
        return {k.pid for k in self.table.values() if k.pid is not None and k.alive}

    # -- requests ---------------------------------------------------------------------------------------------

    def start(self, request):
        kernel_id = request.get("kernel")
        if not isinstance(kernel_id, str) or not kernel_id:
            raise RequestError(None, "kernel_start needs a kernel id")
        if kernel_id in self.table:
            raise RequestError("exists", "kernel %s already exists" % kernel_id)
        kernel = Kernel(request)
        interpreter = request.get("interpreter") or INTERPRETERS.get(kernel.language)
        if kernel.language not in INTERPRETERS:
            raise RequestError("kernel_start", "unknown kernel language %r" % (kernel.language,))
        argv = kernel_argv(kernel.language, str(interpreter))
        workspace_fd = checked_workspace(request)
        (req_r, req_w), (rep_r, rep_w), (out_r, out_w), (err_r, err_w) = [os.pipe() for _ in range(4)]
        devnull = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        fds = kernel_fds(kernel.language, devnull, req_r, out_w, err_w, rep_w)
        kernel.queue += first_request(kernel.language)
        try:
            kernel.pid = spawn(argv, string_env(request.get("env")), fds, workspace_fd)
        except (OSError, SpawnError) as err:
            close_all((req_w, rep_r, out_r, err_r))
            raise RequestError("kernel_start", "cannot start %s: %s" % (argv[0], err)) from None
        finally:
            close_all((req_r, rep_w, out_w, err_w, devnull, workspace_fd))
        self.table[kernel_id] = kernel
        self.runner.adopt(kernel.pid, lambda code: self.on_exit(kernel, code))
        kernel.fds = {"req": req_w, "rep": rep_r, 1: out_r, 2: err_r}
        for fd in kernel.fds.values():
            os.set_blocking(fd, False)
        self.runner.watch(rep_r, selectors.EVENT_READ, lambda _mask: self.on_reply(kernel))
        for n in (1, 2):
            self.runner.watch(kernel.fds[n], selectors.EVENT_READ, lambda _mask, n=n: self.on_output(kernel, n))
        self.flush_requests(kernel)

    def cell(self, request):
        kernel = self.live(request)
        if not kernel.ready:
            raise RequestError("busy", "kernel %s is still starting" % kernel.id)
        if kernel.cell is not None:
            raise RequestError("busy", "kernel %s is running a cell" % kernel.id)
        cell = Cell(request, kernel.count + 1, kernel.language in HANDSHAKE, acks_sigint=kernel.language == "python")
        code, env = str(request.get("code") or ""), string_env(request.get("env"))
        line = cell_request(
            kernel.language, cell.id, code, env, cell.start_token, cell.end_token, request.get("results")
        )
        kernel.count += 1
        kernel.cell = cell
        kernel.oom_base = cell.oom_before
        for stream in kernel.streams.values():
            stream.begin(cell.start_token.encode("ascii"), cell.end_token.encode("ascii"))
        kernel.queue += line
        self.flush_requests(kernel)

    def interrupt(self, request):
        kernel = self.table.get(request.get("kernel"))
        found = kernel is not None and kernel.alive
        running = found and kernel.cell is not None and kernel.cell.running
        if running:
            self.signal_cell(kernel, "interrupt", escalate=False)
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": found, "running": running})

    def stop(self, request):
        kernel = self.table.get(request.get("kernel"))
        found = kernel is not None and kernel.alive
        if found:
            if kernel.cell is not None and kernel.cell.ended is None:
                kernel.cell.ended = "kill"
            kill_tree(kernel.pid, kernel.outputs())
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": found})

    def live(self, request):
        kernel = self.table.get(request.get("kernel"))
        if kernel is None or not kernel.alive:
            raise RequestError("no_kernel", "no live kernel %s" % (request.get("kernel"),))
        return kernel

    # -- the kernel's pipes -----------------------------------------------------------------------------------

    def flush_requests(self, kernel):
        fd = kernel.fds.get("req")
        if fd is None:
            kernel.queue.clear()
            return
        while kernel.queue:
            try:
                written = os.write(fd, kernel.queue[:READ_CHUNK])
            except BlockingIOError:
                break
            except OSError:  # the kernel is gone; its exit ends the cell
                kernel.queue.clear()
                break
            del kernel.queue[:written]
        self.runner.unwatch(fd)
        if kernel.queue:
            self.runner.watch(fd, selectors.EVENT_WRITE, lambda _mask: self.flush_requests(kernel))

    def read(self, kernel, key):
        fd = kernel.fds.get(key)
        if fd is None:
            return b""
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data:
            self.close(kernel, key)
        return data

    def close(self, kernel, key):
        fd = kernel.fds.pop(key, None)
        if fd is not None:
            self.runner.unwatch(fd)
            close_all((fd,))

    def on_output(self, kernel, fd_num):
        data = self.read(kernel, fd_num)
        if data:
            self.take(kernel, fd_num, data)

    def take(self, kernel, fd_num, data):
        if not kernel.ready:
            kernel.tail += data
            del kernel.tail[:-TAIL_BYTES]
            return
        self.forward(kernel, fd_num, kernel.streams[fd_num].feed(data))
        cell = kernel.cell
        if cell is not None and cell.begun_at is None and kernel.streams[fd_num].started:
            go = cell.begin()
            if cell.handshake:
                kernel.queue += go_request(kernel.language, go)
                self.flush_requests(kernel)
            elif go:
                self.sigint(kernel)

    def forward(self, kernel, fd_num, data):
        cell = kernel.cell
        if cell is None or not data:
            return
        keep, over = cell.caps[fd_num].take(data)
        if keep:
            self.runner.send({"ev": "out", "id": cell.id, "fd": fd_num, "data": base64.b64encode(keep).decode("ascii")})
        if over and cell.running and kernel.alive:
            self.signal_cell(kernel, "output", escalate=True)

    def on_reply(self, kernel):
        data = self.read(kernel, "rep")
        if data:
            self.take_replies(kernel, data)

    def take_replies(self, kernel, data):
        kernel.replies += data
        while True:
            nl = kernel.replies.find(b"\n")
            if nl < 0:
                if len(kernel.replies) > MAX_REPLY_BYTES:
                    kernel.replies.clear()
                return
            line = bytes(kernel.replies[:nl])
            del kernel.replies[: nl + 1]
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("ev") == "ready":
                if not kernel.ready:
                    kernel.ready = True
                    kernel.tail.clear()
                    self.runner.send(
                        {"ev": "kernel_ready", "id": kernel.start_id, "kernel": kernel.id, "pid": kernel.pid}
                    )
            elif message.get("ev") == "display":
                # A rich result of the running cell, passed on as it comes (in order with the cell's other events).
                if kernel.cell is not None and kernel.cell.running and isinstance(message.get("result"), dict):
                    self.runner.send({"ev": "display", "id": kernel.cell.id, "result": message["result"]})
            elif message.get("ev") == "sigint":
                if kernel.cell is not None:
                    kernel.cell.sigint_landed()
            elif kernel.cell is not None and kernel.cell.running:
                kernel.cell.reply = message
                kernel.cell.reply_at = now()

    # -- interrupts, deaths, deadlines ------------------------------------------------------------------------

    def signal_cell(self, kernel, why, escalate):
        if kernel.cell.interrupt(why, escalate):
            self.sigint(kernel)

    @staticmethod
    def sigint(kernel):
        try:
            os.killpg(kernel.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            return
        if kernel.cell is not None:
            kernel.cell.signalled()

    def resend(self, kernel):
        """The cell ran on after its SIGINT: node gets it again; bash only while a command of the cell runs."""
        if kernel.language == "bash" and not tree_members(kernel.pid, ()) - {kernel.pid}:
            kernel.cell.signalled()  # still in its own builtins (or reporting): look again later
            return
        self.sigint(kernel)

    def on_exit(self, kernel, code):
        kernel.exit = code
        kill_tree(kernel.pid, kernel.outputs())  # all it left
        self.close(kernel, "req")
        kernel.drain_deadline = now() + DRAIN_SECONDS

    def timeout(self):
        deadlines = []
        for kernel in self.table.values():
            cell = kernel.cell
            if kernel.exit is not None:
                deadlines.append(kernel.drain_deadline)
            elif not kernel.ready:
                deadlines.append(kernel.deadline)
            elif cell is not None:
                deadlines += cell.deadlines()
        return max(0.0, min(deadlines) - now()) if deadlines else None

    def tick(self):
        t = now()
        for kernel in list(self.table.values()):
            cell = kernel.cell
            if kernel.exit is not None:
                if not (set(kernel.fds) & {1, 2, "rep"}) or t >= kernel.drain_deadline:
                    self.finalize(kernel)
            elif not kernel.ready:
                if t >= kernel.deadline:
                    kernel.tail += b"\n(no ready message within %d s)" % START_SECONDS
                    kernel.deadline = float("inf")
                    kill_tree(kernel.pid, kernel.outputs())
            elif cell is not None:
                due = cell.due(t, all(s.done for s in kernel.streams.values()))
                if "finish" in due:
                    self.finish_cell(kernel, lost=False)
                if "sigint" in due:
                    self.sigint(kernel)
                if "resend" in due:
                    self.resend(kernel)
                if "timeout" in due:
                    self.signal_cell(kernel, "timeout", escalate=True)
                if "kill" in due:  # the interrupt did not stop it: the state goes
                    kill_tree(kernel.pid, kernel.outputs())

    def finalize(self, kernel):
        """The kernel died and its output is read: ends its cell, reports it, forgets it."""
        for key in (1, 2, "rep"):
            for _ in range(64):  # bounded: something outside the tree may still write
                data = self.read(kernel, key)
                if not data:
                    break
                if key == "rep":
                    self.take_replies(kernel, data)
                else:
                    self.take(kernel, key, data)
        for key in list(kernel.fds):
            self.close(kernel, key)
        del self.table[kernel.id]
        exit_code, sig = exit_fields(kernel.exit)
        oom = oom_since(kernel.oom_base)
        if not kernel.ready:
            tail = kernel.tail.decode("utf-8", "replace").strip()
            status = "exit code %s" % exit_code if sig is None else sig
            self.runner.send(
                {
                    "ev": "error",
                    "id": kernel.start_id,
                    "code": "kernel_start",
                    "message": "the %s kernel ended (%s) before it was ready: %s" % (kernel.language, status, tail),
                }
            )
        else:
            if kernel.cell is not None:
                for fd_num in (1, 2):
                    self.forward(kernel, fd_num, kernel.streams[fd_num].flush())
                self.finish_cell(kernel, lost=True)
            self.runner.send(
                {
                    "ev": "kernel_exit",
                    "kernel": kernel.id,
                    "exitCode": exit_code,
                    "signal": sig,
                    "oomKilled": oom,
                }
            )
        self.runner.kill_strays()

    def finish_cell(self, kernel, lost):
        cell = kernel.cell
        kernel.cell = None
        for stream in kernel.streams.values():
            stream.reset()
        kernel.oom_base = oom_kills()
        self.runner.send(cell.done(kernel.id, lost, exit_fields(kernel.exit)))

    def shutdown(self):
        for kernel in list(self.table.values()):
            if kernel.alive:
                kill_tree(kernel.pid, kernel.outputs())
