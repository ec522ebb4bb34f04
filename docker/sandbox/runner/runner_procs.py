"""Background processes: a session's long-running commands (a dev server, a watcher), beside the runner.

Each is `/bin/bash --noprofile --norc -c <command>` in its own session, in a directory of the checked workspace,
with the sandbox's niceness and oom_score_adj and exactly the request's environment. Its output is forwarded as it
arrives (`pout`, no cap: the engine keeps a bounded log); its stdin is a pipe the engine writes to. A process ends
with its command: when the leader exits, whatever else it left running is killed, then `pexit` reports it.
"""

import base64
import os
import selectors
import signal

from runner_spawn import (
    READ_CHUNK,
    WORKSPACE,
    RequestError,
    SpawnError,
    checked_workspace,
    close_all,
    exit_fields,
    now,
    spawn,
    string_env,
)
from runner_trees import kill_tree, signal_tree

BASH = "/bin/bash"
DRAIN_SECONDS = 1.0
SIGNALS = {
    "TERM": signal.SIGTERM,
    "INT": signal.SIGINT,
    "KILL": signal.SIGKILL,
    "HUP": signal.SIGHUP,
    "USR1": signal.SIGUSR1,
    "USR2": signal.SIGUSR2,
}


def open_cwd(relative):
    """An O_PATH descriptor of /workspace/<relative>, refused (code `cwd`) unless it is a directory inside it."""
    relative = str(relative or "")
    real = os.path.realpath(os.path.join(WORKSPACE, relative))
    if real != WORKSPACE and not real.startswith(WORKSPACE + "/"):
        raise RequestError("cwd", "cwd %r resolves outside %s" % (relative, WORKSPACE))
    try:
        return os.open(real, os.O_PATH | os.O_DIRECTORY)
    except OSError as err:
        raise RequestError("cwd", "cwd %r is not a directory of the workspace: %s" % (relative, err.strerror)) from None


class Proc:
    def __init__(self, proc_id, meta=None):
        self.id = proc_id
        self.meta = meta  # the engine's own record of it, given back by `resync`
        self.pid = None
        self.out = {}  # 1|2 -> read end
        self.stdin_fd = None
        self.queue = bytearray()
        self.eof = False  # close stdin once the queue is written
        self.exit = None
        self.drain_deadline = None


class Processes:
    def __init__(self, runner):
        self.runner = runner
        self.table = {}

    def roots(self):
        return {p.pid for p in self.table.values() if p.exit is None}

    # -- requests ---------------------------------------------------------------------------------------------

    def start(self, request):
        proc_id = request.get("proc")
        if not isinstance(proc_id, str) or not proc_id:
            raise RequestError(None, "proc_start needs a proc id")
        if proc_id in self.table:
            raise RequestError("exists", "process %s already exists" % proc_id)
        command = request.get("command")
        if not isinstance(command, str):
            raise RequestError(None, "proc_start needs a command")
        workspace_fd = checked_workspace(request)
        try:
            cwd_fd = open_cwd(request.get("cwd"))
        finally:
            os.close(workspace_fd)
        proc = Proc(proc_id, request.get("meta"))
        (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
        argv = [BASH, "--noprofile", "--norc", "-c", command]
        try:
            proc.pid = spawn(argv, string_env(request.get("env")), {0: in_r, 1: out_w, 2: err_w}, cwd_fd)
        except (OSError, SpawnError) as err:
            close_all((in_w, out_r, err_r))
            raise RequestError("proc_start", "cannot start %s: %s" % (BASH, err)) from None
        finally:
            close_all((in_r, out_w, err_w, cwd_fd))
        self.table[proc_id] = proc
        self.runner.adopt(proc.pid, lambda code: self.on_exit(proc, code))
        proc.stdin_fd = in_w
        os.set_blocking(in_w, False)
        for fd_num, fd in ((1, out_r), (2, err_r)):
            os.set_blocking(fd, False)
            proc.out[fd_num] = fd
            self.runner.watch(fd, selectors.EVENT_READ, lambda _mask, n=fd_num: self.on_output(proc, n))
        self.runner.send({"ev": "proc_started", "id": request.get("id"), "proc": proc_id, "pid": proc.pid})

    def write(self, request):
        proc = self.table.get(request.get("proc"))
        if proc is None or proc.exit is not None:
            self.runner.send({"ev": "ack", "id": request.get("id"), "found": False})
            return
        if proc.stdin_fd is None or proc.eof:
            raise RequestError("closed", "the stdin of process %s is closed" % proc.id)
        proc.queue += str(request.get("data") or "").encode("utf-8")
        proc.eof = bool(request.get("eof"))
        self.flush_stdin(proc)
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": True})

    def signal(self, request):
        name = str(request.get("signal") or "")
        sig = SIGNALS.get(name.upper().removeprefix("SIG"))
        if sig is None:
            raise RequestError("signal", "unknown signal %r (one of %s)" % (name, ", ".join(SIGNALS)))
        proc = self.table.get(request.get("proc"))
        found = proc is not None and proc.exit is None
        if found:
            signal_tree(proc.pid, sig, list(proc.out.values()))
        self.runner.send({"ev": "ack", "id": request.get("id"), "found": found})

    # -- pipes, exit ------------------------------------------------------------------------------------------

    def flush_stdin(self, proc):
        fd = proc.stdin_fd
        if fd is None:
            return
        while proc.queue:
            try:
                written = os.write(fd, proc.queue[:READ_CHUNK])
            except BlockingIOError:
                break
            except OSError:  # it closed its stdin, or is gone
                proc.queue.clear()
                proc.eof = True
                break
            del proc.queue[:written]
        self.runner.unwatch(fd)
        if proc.queue:
            self.runner.watch(fd, selectors.EVENT_WRITE, lambda _mask: self.flush_stdin(proc))
        elif proc.eof:
            self.close_stdin(proc)

    def close_stdin(self, proc):
        if proc.stdin_fd is not None:
            self.runner.unwatch(proc.stdin_fd)
            close_all((proc.stdin_fd,))
            proc.stdin_fd = None
        proc.queue.clear()

    def on_output(self, proc, fd_num):
        """Forwards what one read gets; False once nothing more is there for now."""
        fd = proc.out.get(fd_num)
        if fd is None:
            return False
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self.close_output(proc, fd_num)
            return False
        self.runner.send({"ev": "pout", "proc": proc.id, "fd": fd_num, "data": base64.b64encode(data).decode("ascii")})
        return True

    def close_output(self, proc, fd_num):
        fd = proc.out.pop(fd_num, None)
        if fd is not None:
            self.runner.unwatch(fd)
            close_all((fd,))

    def on_exit(self, proc, code):
        proc.exit = code
        kill_tree(proc.pid, list(proc.out.values()))  # a process ends with its command
        self.close_stdin(proc)
        proc.drain_deadline = now() + DRAIN_SECONDS

    def timeout(self):
        deadlines = [p.drain_deadline for p in self.table.values() if p.exit is not None]
        return max(0.0, min(deadlines) - now()) if deadlines else None

    def tick(self):
        t = now()
        for proc in list(self.table.values()):
            if proc.exit is None or (proc.out and t < proc.drain_deadline):
                continue
            for fd_num in list(proc.out):
                for _ in range(64):  # bounded: something outside the tree may still write
                    if not self.on_output(proc, fd_num):
                        break
                self.close_output(proc, fd_num)
            del self.table[proc.id]
            exit_code, sig = exit_fields(proc.exit)
            self.runner.send({"ev": "pexit", "proc": proc.id, "exitCode": exit_code, "signal": sig})
            self.runner.kill_strays()

    def shutdown(self):
        for proc in self.table.values():
            if proc.exit is None:
                kill_tree(proc.pid, list(proc.out.values()))
