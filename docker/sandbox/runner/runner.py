#!/usr/bin/env python3
"""Switchyard pooled-container runner (protocol 2). Stdlib only.

The main process of every pooled (warm, session-affine) sandbox container. It talks to the engine over its own
stdin/stdout (the container's attached streams), one JSON object per line, and runs one request at a time:

  engine -> runner
    {"op": "ping", "id": N}
    {"op": "run", "id": N, "language": "python|node|bash", "code": str, "stdin": str, "env": {str: str},
     "timeoutMs": int, "cpuSeconds": int, "capBytes": int, "capLines": int, "workspace": [dev, ino]}
    {"op": "kill", "id": N}                       stop run N (output cap reached on the engine side, abort)

  runner -> engine
    {"ev": "hello", "protocol": 1, "pid": int, "python": str, "oomCounter": bool}   once, at start
    {"ev": "pong", "id": N, "ok": bool, "busy": bool, "ms": float, "workspace": [dev, ino], "error"?: str}
    {"ev": "out", "id": N, "fd": 1|2, "data": base64}                                 while a run is going
    {"ev": "exit", "id": N, "exitCode": int|null, "signal": str|null, "timedOut": bool,
     "ended": null|"timeout"|"output"|"kill", "capped": {"stdout": bool, "stderr": bool},
     "oomKilled": bool, "pidsLimitHit": bool, "leftovers": int, "durationMs": float, "spawnError": str|null}
    {"ev": "error", "id": N|null, "message": str, "code"?: "workspace"|"busy", "workspace"?: [dev, ino]}

A ping really spawns and waits for /bin/true, so a container that can no longer start processes fails it; it also
reports the device and inode of /workspace.

Every run carries the device and inode (decimal strings) of the session workspace as the engine sees it on the
host. Before anything of the run happens, the runner opens /workspace, compares its device and inode and refuses
the run (error code "workspace") when they differ or are missing: code only ever starts in the workspace the engine
mounted for the session, verified without a round trip of its own. The interpreter starts in that very directory
(fchdir on the descriptor that was checked).

Each run: the code is written to /run/switchyard/main.<ext> (the same path as in the subprocess tier), the
interpreter starts in a new session with cwd /workspace, its own rlimits and oom_score_adj 1000 (the kernel
picks it, not the runner, when the container runs out of memory). Output is forwarded as it arrives and cut at
capBytes/capLines per stream (the engine applies the exact caps and redaction; these are a backstop). When the
interpreter exits, times out or is killed, every other process the sandbox user has in this container is
SIGKILLed (kill(-1)), so double forks, setsid and nohup leave nothing behind; files persist, processes do not.

The runner shares its uid with the code it runs, so it is not a security boundary inside a session: the
container is. It makes itself non-dumpable so the code cannot ptrace it or open its pipes through /proc; code
that kills it only loses its own container, which the engine then replaces.
"""

import base64
import ctypes
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time

PROTOCOL = 2
WORKSPACE = "/workspace"
CODE_DIR = "/run/switchyard"
CODE_FILES = {"python": "main.py", "node": "main.js", "bash": "main.sh"}
PYTHON_BOOTSTRAP = (
    "__file__ = '/run/switchyard/main.py'; import sys; sys.argv[0] = __file__; del sys; "
    "exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))"
)
ARGV = {
    "python": ["/usr/bin/python3", "-c", PYTHON_BOOTSTRAP],
    "node": ["/usr/bin/node", CODE_DIR + "/main.js"],
    "bash": ["/bin/bash", "--noprofile", "--norc", CODE_DIR + "/main.sh"],
}
READ_CHUNK = 64 * 1024
MAX_REQUEST_BYTES = 32 * 1024 * 1024
# After the interpreter is gone and everything else killed, pipes close at once; this bounds a stuck read.
DRAIN_SECONDS = 1.0
# Niceness of user code: the lowest priority, so the runner stays responsive under a CPU or fork bomb.
USER_CODE_NICE = 19
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
PIDS_FILES = ("/sys/fs/cgroup/pids/pids.events", "/sys/fs/cgroup/pids.events")
SIGNAL_NAMES = {int(s): s.name for s in signal.Signals}
TRUE = "/bin/true"
DEVNULL_STDIO = [
    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDWR, 0),
    (os.POSIX_SPAWN_DUP2, 0, 1),
    (os.POSIX_SPAWN_DUP2, 0, 2),
]


def now():
    return time.monotonic()


def cgroup_counter(paths, key):
    """A counter from a cgroup events file (v1 or v2), or None when it cannot be read."""
    for path in paths:
        try:
            with open(path, "r", encoding="ascii") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        except (OSError, ValueError):
            continue
    return None


def other_live_pids(me):
    """Every process in this pid namespace except init, the runner and zombies."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in (1, me):
            continue
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                stat = f.read()
            state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
        except (OSError, ValueError):
            continue
        if state not in (b"Z", b"X"):
            pids.append(pid)
    return pids


def kill_everything_else():
    """SIGKILLs every process the sandbox user has here but the runner; returns how many were alive."""
    me = os.getpid()
    found = len(other_live_pids(me))
    for attempt in range(100):
        try:
            os.kill(-1, signal.SIGKILL)  # all we may signal, except init and ourselves
        except ProcessLookupError:
            pass
        if not other_live_pids(me):
            break
        time.sleep(0.001 * min(attempt + 1, 10))
    return found


def make_undumpable():
    # PR_SET_DUMPABLE = 4: /proc/<runner> becomes root-owned and ptrace by the same uid is refused.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Job:
    def __init__(self, request):
        self.id = request.get("id")
        self.language = request.get("language")
        self.timeout = max(1, int(request.get("timeoutMs", 30000))) / 1000.0
        self.cpu_seconds = int(request.get("cpuSeconds", 0))
        self.cap_bytes = max(1, int(request.get("capBytes", 1 << 20)))
        self.cap_lines = max(1, int(request.get("capLines", 2000)))
        self.env = {str(k): str(v) for k, v in (request.get("env") or {}).items()}
        self.code = (request.get("code") or "").encode("utf-8")
        self.stdin = memoryview((request.get("stdin") or "").encode("utf-8"))
        self.started = now()
        self.deadline = self.started + self.timeout
        self.drain_deadline = None
        self.proc = None
        self.pidfd = None
        self.returncode = None
        self.ended = None
        self.counts = {1: [0, 0], 2: [0, 0]}  # bytes, newlines
        self.capped = {1: False, 2: False}
        self.open_fds = {}
        self.leftovers = 0
        self.oom_before = cgroup_counter(OOM_FILES, "oom_kill")
        self.pids_before = cgroup_counter(PIDS_FILES, "max")
        self.code_path = None
        workspace = request.get("workspace")
        self.expected_workspace = (
            [str(v) for v in workspace] if isinstance(workspace, list) and len(workspace) == 2 else None
        )


def open_workspace(expected):
    """A descriptor of /workspace when it is the directory `expected` ([dev, ino] strings) names, else an error."""
    if expected is None:
        return None, "the run names no expected workspace"
    try:
        # O_PATH: needs no read permission (the code may chmod its workspace); fstat and fchdir work on it.
        fd = os.open(WORKSPACE, os.O_PATH | os.O_DIRECTORY)
    except OSError as err:
        return None, "cannot open %s: %s" % (WORKSPACE, err)
    st = os.fstat(fd)
    seen = [str(st.st_dev), str(st.st_ino)]
    if seen != expected:
        os.close(fd)
        return None, seen
    return fd, None


class Runner:
    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.inbuf = bytearray()
        self.job = None
        self.closing = False

    # -- protocol ---------------------------------------------------------------------------------------------

    def send(self, message):
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            try:
                written = os.write(1, view)
            except BlockingIOError:
                time.sleep(0.001)
                continue
            view = view[written:]

    def on_control(self, _mask):
        try:
            data = os.read(0, READ_CHUNK)
        except BlockingIOError:
            return
        if not data:
            # The engine went away: nothing may outlive it here.
            self.closing = True
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
            op = request.get("op")
            if op == "ping":
                self.ping(request_id)
            elif op == "run":
                if self.job is not None:
                    self.send({"ev": "error", "id": request_id, "code": "busy", "message": "busy: one run at a time"})
                else:
                    self.start(request)
            elif op == "kill":
                if self.job is not None and self.job.id == request_id:
                    self.stop("kill")
            else:
                self.send({"ev": "error", "id": request_id, "message": "unknown op %r" % (op,)})
        except Exception as err:  # a bad request must never take the runner down
            self.send({"ev": "error", "id": request_id, "message": "%s: %s" % (type(err).__name__, err)})

    def ping(self, request_id):
        if self.job is not None:
            self.send({"ev": "pong", "id": request_id, "ok": True, "busy": True, "ms": 0})
            return
        t = now()
        try:
            # posix_spawn (vfork + exec) rather than subprocess: the same proof that processes still start, for
            # less of the claim's time. The engine's own timeout covers an exec that never returns.
            pid = os.posix_spawn(TRUE, [TRUE], {}, file_actions=DEVNULL_STDIO)
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            if other_live_pids(os.getpid()):
                kill_everything_else()
            st = os.stat(WORKSPACE)
            message = {"ev": "pong", "id": request_id, "ok": code == 0, "busy": False, "workspace": [st.st_dev, st.st_ino]}
            if code != 0:
                message["error"] = "%s exited with %d" % (TRUE, code)
        except Exception as err:
            message = {"ev": "pong", "id": request_id, "ok": False, "busy": False, "error": str(err)}
        message["ms"] = round((now() - t) * 1000, 3)
        self.send(message)

    # -- runs -------------------------------------------------------------------------------------------------

    def start(self, request):
        job = Job(request)
        argv = ARGV.get(job.language)
        if argv is None:
            self.send({"ev": "error", "id": job.id, "message": "unknown language %r" % (job.language,)})
            return
        workspace_fd, problem = open_workspace(job.expected_workspace)
        if workspace_fd is None:
            refusal = {"ev": "error", "id": job.id, "code": "workspace"}
            if isinstance(problem, list):
                refusal["workspace"] = problem
                problem = "/workspace is %s, not the session workspace %s" % (problem, job.expected_workspace)
            refusal["message"] = problem
            self.send(refusal)
            return
        try:
            self.launch(job, argv, workspace_fd)
        finally:
            os.close(workspace_fd)

    def launch(self, job, argv, workspace_fd):
        self.job = job
        try:
            job.code_path = os.path.join(CODE_DIR, CODE_FILES[job.language])
            fd = os.open(job.code_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(job.code)
        except OSError as err:
            return self.finish(spawn_error="cannot write the code file: %s" % err)

        cpu = job.cpu_seconds

        def child_setup():
            os.fchdir(workspace_fd)  # the directory whose device and inode were just checked
            # The runner shares the container's CPU quota with this code; at the lowest priority the code (and all it
            # forks) cannot starve the runner's pings and timeout kill.
            os.nice(USER_CODE_NICE)
            if cpu > 0:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            try:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")
            except OSError:
                pass

        try:
            job.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=job.env, start_new_session=True, preexec_fn=child_setup, close_fds=True,
            )
        except (OSError, subprocess.SubprocessError) as err:
            return self.finish(spawn_error="cannot start %s: %s" % (argv[0], err))

        proc = job.proc
        for fd_num, pipe in ((1, proc.stdout), (2, proc.stderr)):
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            job.open_fds[fd_num] = pipe
            self.sel.register(fd, selectors.EVENT_READ, (self.on_output, fd_num))
        if len(job.stdin) > 0:
            os.set_blocking(proc.stdin.fileno(), False)
            self.sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, (self.on_stdin, None))
        else:
            self.close_stdin()
        try:
            job.pidfd = os.pidfd_open(proc.pid)
            self.sel.register(job.pidfd, selectors.EVENT_READ, (self.on_exit, None))
        except OSError:
            job.pidfd = None  # polled in the loop instead

    def on_stdin(self, _mask):
        job = self.job
        try:
            written = os.write(job.proc.stdin.fileno(), job.stdin[:READ_CHUNK])
            job.stdin = job.stdin[written:]
        except BlockingIOError:
            return
        except OSError:  # the child closed its stdin or is gone
            job.stdin = job.stdin[:0]
        if len(job.stdin) == 0:
            self.close_stdin()

    def close_stdin(self):
        stdin = self.job.proc.stdin if self.job and self.job.proc else None
        if stdin is None or stdin.closed:
            return
        try:
            self.sel.unregister(stdin.fileno())
        except (KeyError, ValueError):
            pass
        try:
            stdin.close()
        except OSError:
            pass

    def on_output(self, fd_num, _mask):
        job = self.job
        pipe = job.open_fds.get(fd_num)
        if pipe is None:
            return
        try:
            data = os.read(pipe.fileno(), READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close_output(fd_num)
            return
        counts = job.counts[fd_num]
        # Forward at most capBytes and capLines + 1 lines: one line past the cap tells the engine it was cut.
        keep = min(len(data), job.cap_bytes - counts[0]) if counts[1] <= job.cap_lines else 0
        lines = counts[1]
        index = data.find(b"\n")
        while index != -1 and index < keep:
            lines += 1
            if lines >= job.cap_lines + 1:
                keep = index + 1
                break
            index = data.find(b"\n", index + 1)
        over = keep < len(data)
        if keep > 0:
            counts[0] += keep
            counts[1] = lines
            self.send({"ev": "out", "id": job.id, "fd": fd_num, "data": base64.b64encode(data[:keep]).decode("ascii")})
        if over:
            # Past the cap: stop reading (nothing more is buffered) and end the run.
            job.capped[fd_num] = True
            self.close_output(fd_num)
            self.stop("output")

    def close_output(self, fd_num):
        pipe = self.job.open_fds.pop(fd_num, None)
        if pipe is None:
            return
        try:
            self.sel.unregister(pipe.fileno())
        except (KeyError, ValueError):
            pass
        pipe.close()

    def on_exit(self, _mask):
        self.reap(block=True)

    def reap(self, block):
        job = self.job
        if job.returncode is not None:
            return
        code = job.proc.wait() if block else job.proc.poll()
        if code is None:
            return
        job.returncode = code
        if job.pidfd is not None:
            self.sel.unregister(job.pidfd)
            os.close(job.pidfd)
            job.pidfd = None
        # Whatever the code left running dies with it; its pipes then close.
        job.leftovers += kill_everything_else()
        self.close_stdin()
        job.drain_deadline = now() + DRAIN_SECONDS

    def stop(self, why):
        job = self.job
        if job.ended is None:
            job.ended = why
        kill_everything_else()
        self.close_stdin()

    def tick(self):
        """Deadlines, and the end of the run once the interpreter is gone and its output read."""
        job = self.job
        if job is None or job.proc is None:
            return
        if job.pidfd is None:
            self.reap(block=False)
        t = now()
        if job.returncode is None and t >= job.deadline:
            self.stop("timeout")
        if job.returncode is not None:
            if job.open_fds and t < job.drain_deadline:
                return
            for fd_num in list(job.open_fds):
                self.close_output(fd_num)
            self.finish()

    def finish(self, spawn_error=None):
        job = self.job
        self.job = None
        if job.code_path:
            try:
                os.unlink(job.code_path)
            except OSError:
                pass
        oom_after = cgroup_counter(OOM_FILES, "oom_kill")
        pids_after = cgroup_counter(PIDS_FILES, "max")
        code = job.returncode
        message = {
            "ev": "exit",
            "id": job.id,
            "exitCode": code if code is not None and code >= 0 else None,
            "signal": SIGNAL_NAMES.get(-code, "SIG%d" % -code) if code is not None and code < 0 else None,
            "timedOut": job.ended == "timeout",
            "ended": job.ended,
            "capped": {"stdout": job.capped[1], "stderr": job.capped[2]},
            "oomKilled": job.oom_before is not None and oom_after is not None and oom_after > job.oom_before,
            "pidsLimitHit": job.pids_before is not None and pids_after is not None and pids_after > job.pids_before,
            "leftovers": job.leftovers,
            "durationMs": round((now() - job.started) * 1000, 3),
            "spawnError": spawn_error,
        }
        self.send(message)

    # -- main loop --------------------------------------------------------------------------------------------

    def timeout(self):
        job = self.job
        if job is None or job.proc is None:
            return None
        if job.returncode is not None:
            return max(0.0, job.drain_deadline - now())
        wait = max(0.0, job.deadline - now())
        return min(wait, 0.05) if job.pidfd is None else wait

    def serve(self):
        make_undumpable()
        os.set_blocking(0, False)
        self.sel.register(0, selectors.EVENT_READ, (self.on_control, None))
        self.send({
            "ev": "hello",
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "oomCounter": cgroup_counter(OOM_FILES, "oom_kill") is not None,
        })
        while not self.closing:
            for key, mask in self.sel.select(self.timeout()):
                handler, arg = key.data
                if self.job is None and handler in (self.on_output, self.on_exit, self.on_stdin):
                    continue
                if arg is None:
                    handler(mask)
                else:
                    handler(arg, mask)
            self.tick()
        if self.job is not None:
            self.stop("kill")
        kill_everything_else()


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        Runner().serve()
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
