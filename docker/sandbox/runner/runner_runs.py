"""Fresh runs (protocol 2's `run` and `kill`): one interpreter per action, one run at a time, and nested runs in it.

Each run: the code is written to /run/switchyard/main.<ext> (the same path as in the subprocess tier), the
interpreter starts in a new session in the checked workspace, with exactly the request's environment, RLIMIT_CPU
and the sandbox's niceness and oom_score_adj. Output is forwarded as it arrives and cut at capBytes/capLines per
stream (the engine applies the exact caps and redaction; these are a backstop). When the interpreter exits, times
out or is killed, every other process here is SIGKILLed except the trees of live kernels and background processes,
so double forks, setsid and nohup leave nothing behind; files persist, processes do not.

A nested run (`"nested": true`) is a run made on behalf of the fresh run under way (a skill's body calling a file tool
or another skill: the engine sends it while the outer run holds the box). It runs beside the outer one, from a code
file of its own, and its end kills only its own tree: the outer run's processes live on. It cannot outlive the outer
run, whose end kills everything unprotected, nested runs included.
"""

import base64
import os
import selectors
import time

from runner_snapshot import SLICE_SECONDS, BadRequest, Walk, bounds, too_large
from runner_spawn import (
    PIDS_FILES,
    PINNED_EXIT,
    READ_CHUNK,
    RESTART_WHEN_PINNED,
    RequestError,
    SpawnError,
    cgroup_counter,
    checked_workspace,
    close_all,
    exit_fields,
    expected_workspace,
    memory_pinned,
    now,
    oom_kills,
    open_workspace,
    spawn,
    string_env,
)
from runner_standby import PYTHON
from runner_streams import Cap
from runner_trees import kill_tree, kill_unprotected

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
# After the interpreter is gone and everything else killed, pipes close at once; this bounds a stuck read.
DRAIN_SECONDS = 1.0
# Nested runs under way at once (a skill's calls: the engine's channel allows 4 per body, bodies nest).
MAX_NESTED = 16


class Job:
    def __init__(self, request):
        self.id = request.get("id")
        self.language = request.get("language")
        self.timeout = max(1, int(request.get("timeoutMs", 30000))) / 1000.0
        self.cpu_seconds = int(request.get("cpuSeconds", 0))
        self.caps = {fd: Cap(request.get("capBytes", 1 << 20), request.get("capLines", 2000)) for fd in (1, 2)}
        self.env = string_env(request.get("env"))
        self.code = (request.get("code") or "").encode("utf-8")
        self.stdin = memoryview((request.get("stdin") or "").encode("utf-8"))
        self.started = now()
        self.deadline = self.started + self.timeout
        self.drain_deadline = None
        self.pid = None
        self.stdin_fd = None
        self.returncode = None
        self.ended = None
        self.out = {}  # 1|2 -> read end of the interpreter's stdout/stderr
        self.leftovers = 0
        self.oom_before = oom_kills()
        self.pids_before = cgroup_counter(PIDS_FILES, "max")
        self.code_path = None
        # Keep a python started for the next run with this environment (runner_standby.py); `ahead`: this run had one.
        self.standby = request.get("standby") is True
        self.ahead = False
        self.workspace = expected_workspace(request)
        # The workspace walked once the run ended, its snapshot in the exit (a code action's "after", with no request
        # of its own): the bounds, as `snapshot` takes them.
        self.snapshot = None
        if request.get("snapshot") is not None:
            try:
                self.snapshot = bounds(request["snapshot"])
            except BadRequest as err:
                raise RequestError(None, "snapshot: %s" % err) from None


class Runs:
    """The fresh run, if one is going (or its walk after it, before its exit is sent), and the runs nested in it."""

    # A session pod's runner leaves after an OOM that pinned its memory; a nested run leaves that to the outer one.
    may_restart = True

    def __init__(self, runner):
        self.runner = runner
        self.job = None
        self.walking = None  # (exit message, Walk, Job) of a run whose exit waits for its snapshot
        self.inner = {}  # request id -> NestedRun under way

    @property
    def active(self):
        return self.job is not None or self.walking is not None or bool(self.inner)

    def start(self, request):
        if request.get("nested") is True:
            return self.start_nested(request)
        if self.active:
            raise RequestError("busy", "busy: one run at a time")
        self.begin(request)
        return None

    def start_nested(self, request):
        outer = self.job
        if outer is None or outer.returncode is not None:
            raise RequestError("busy", "a nested run needs a fresh run under way to nest in")
        if not isinstance(request.get("id"), int):
            raise RequestError(None, "a nested run needs a numeric id")
        if len(self.inner) >= MAX_NESTED or request.get("id") in self.inner:
            raise RequestError("busy", "busy: at most %d nested runs at once" % MAX_NESTED)
        inner = NestedRun(self.runner)
        inner.begin(request)
        if inner.job is not None:
            self.inner[inner.job.id] = inner

    def begin(self, request):
        job = Job(request)
        argv = ARGV.get(job.language)
        if argv is None:
            raise RequestError(None, "unknown language %r" % (job.language,))
        # Where the sandbox's interpreter is not the default path (a subprocess-tier box on the host's system).
        interpreter = request.get("interpreter")
        if isinstance(interpreter, str) and interpreter.startswith("/"):
            argv = [interpreter] + argv[1:]
        workspace_fd = checked_workspace(request)
        try:
            self.launch(job, argv, workspace_fd)
        finally:
            os.close(workspace_fd)

    def kill(self, request):
        if self.job is not None and self.job.id == request.get("id"):
            self.stop("kill")
        inner = self.inner.get(request.get("id"))
        if inner is not None and inner.job is not None:
            inner.stop("kill")

    def code_file(self, job):
        """Where the code goes, and the interpreter's argv for it."""
        return os.path.join(CODE_DIR, CODE_FILES[job.language]), None

    def cleanup(self, job):
        """Whatever the code left running dies with it (kernels and processes excepted); how many were alive."""
        return kill_unprotected(self.runner.protected())

    def launch(self, job, argv, workspace_fd):
        self.job = job
        try:
            job.code_path, own_argv = self.code_file(job)
            if own_argv is not None:
                argv = [argv[0]] + own_argv[1:]  # the interpreter the request named, if any
            fd = os.open(job.code_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(job.code)
        except OSError as err:
            return self.finish(spawn_error="cannot write the code file: %s" % err)
        ready = self.standby_for(job, argv, workspace_fd)
        if ready is not None:
            job.pid, job.ahead = ready.pid, True
            in_w, out_r, err_r = ready.stdin, ready.out[1], ready.out[2]
        else:
            (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
            try:
                job.pid = spawn(argv, job.env, {0: in_r, 1: out_w, 2: err_w}, workspace_fd, job.cpu_seconds)
            except (OSError, SpawnError) as err:
                close_all((in_w, out_r, err_r))
                return self.finish(spawn_error="cannot start %s: %s" % (argv[0], err))
            finally:
                close_all((in_r, out_w, err_w))
        self.runner.adopt(job.pid, self.on_exit)
        for fd_num, fd in ((1, out_r), (2, err_r)):
            os.set_blocking(fd, False)
            job.out[fd_num] = fd
            self.runner.watch(fd, selectors.EVENT_READ, lambda _mask, n=fd_num: self.on_output(n))
        job.stdin_fd = in_w
        if len(job.stdin) > 0:
            os.set_blocking(in_w, False)
            self.runner.watch(in_w, selectors.EVENT_WRITE, lambda _mask: self.on_stdin())
        else:
            self.close_stdin()
        return None

    def standby_for(self, job, argv, workspace_fd):
        """The python started ahead for this run (`runner_standby.py`), when the run asked for one and it fits."""
        if not job.standby or job.language != "python" or argv[0] != PYTHON:
            return None
        return self.runner.standby.take(job.env, workspace_fd, job.cpu_seconds)

    def prepare_next(self, job, message):
        """After a standby run: the next python, started now for the session's next run with the same environment.
        Not after a run that ended badly (timed out, killed, capped, out of memory or processes, a runner leaving):
        the box stays quiet then."""
        if not job.standby or job.language != "python" or self.runner.closing:
            return
        if message["ended"] or message["oomKilled"] or message["pidsLimitHit"] or message.get("restarting"):
            return
        fd, _problem = open_workspace(job.workspace)
        if fd is None:
            return
        try:
            self.runner.standby.prepare(job.env, fd)
        finally:
            os.close(fd)

    def on_stdin(self):
        job = self.job
        try:
            written = os.write(job.stdin_fd, job.stdin[:READ_CHUNK])
            job.stdin = job.stdin[written:]
        except BlockingIOError:
            return
        except OSError:  # the child closed its stdin or is gone
            job.stdin = job.stdin[:0]
        if len(job.stdin) == 0:
            self.close_stdin()

    def close_stdin(self):
        job = self.job
        if job is None or job.stdin_fd is None:
            return
        self.runner.unwatch(job.stdin_fd)
        close_all((job.stdin_fd,))
        job.stdin_fd = None

    def on_output(self, fd_num):
        job = self.job
        fd = job.out.get(fd_num)
        if fd is None:
            return
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close_output(fd_num)
            return
        keep, over = job.caps[fd_num].take(data)
        if keep:
            self.runner.send({"ev": "out", "id": job.id, "fd": fd_num, "data": base64.b64encode(keep).decode("ascii")})
        if over:
            # Past the cap: stop reading (nothing more is buffered) and end the run.
            self.close_output(fd_num)
            self.stop("output")

    def close_output(self, fd_num):
        fd = self.job.out.pop(fd_num, None)
        if fd is not None:
            self.runner.unwatch(fd)
            close_all((fd,))

    def on_exit(self, code):
        job = self.job
        if job is None or job.returncode is not None:
            return
        job.returncode = code
        # Whatever the code left running dies with it; its pipes then close.
        job.leftovers += self.cleanup(job)
        self.close_stdin()
        job.drain_deadline = now() + DRAIN_SECONDS

    def stop(self, why):
        job = self.job
        if job is None:
            for inner in self.inner.values():
                if inner.job is not None:
                    inner.stop(why)
            return
        if job.ended is None:
            job.ended = why
        self.cleanup(job)
        self.close_stdin()

    def timeout(self):
        waits = [w for w in (inner.timeout() for inner in self.inner.values()) if w is not None]
        own = self.own_timeout()
        if own is not None:
            waits.append(own)
        return min(waits) if waits else None

    def own_timeout(self):
        if self.walking is not None:
            return 0.0
        job = self.job
        if job is None or job.pid is None:
            return None
        if job.returncode is not None:
            return max(0.0, job.drain_deadline - now())
        return max(0.0, job.deadline - now())

    def tick(self):
        """Deadlines, the end of the run once the interpreter is gone and its output read, the walk after it."""
        for key, inner in list(self.inner.items()):
            inner.tick()
            if inner.job is None:
                del self.inner[key]
        self.own_tick()

    def own_tick(self):
        if self.walking is not None:
            message, walk, job = self.walking
            if walk.step(time.monotonic() + SLICE_SECONDS):
                self.walking = None
                self.send_exit(message, walk)
                self.prepare_next(job, message)
                if message["oomKilled"] and RESTART_WHEN_PINNED and memory_pinned():
                    os._exit(PINNED_EXIT)  # as `finish` does once the exit is sent
            return
        job = self.job
        if job is None or job.pid is None:
            return
        t = now()
        if job.returncode is None and t >= job.deadline:
            self.stop("timeout")
        if job.returncode is not None:
            if job.out and t < job.drain_deadline:
                return
            for fd_num in list(job.out):
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
        oom_after = oom_kills()
        oom = job.oom_before is not None and oom_after is not None and oom_after > job.oom_before
        pids_after = cgroup_counter(PIDS_FILES, "max")
        exit_code, sig = exit_fields(job.returncode)
        restarting = oom and self.may_restart and RESTART_WHEN_PINNED and memory_pinned()
        message = {
            "ev": "exit",
            "id": job.id,
            "exitCode": exit_code,
            "signal": sig,
            "timedOut": job.ended == "timeout",
            "ended": job.ended,
            "capped": {"stdout": job.caps[1].capped, "stderr": job.caps[2].capped},
            "oomKilled": oom,
            "pidsLimitHit": job.pids_before is not None and pids_after is not None and pids_after > job.pids_before,
            "leftovers": job.leftovers,
            "durationMs": round((now() - job.started) * 1000, 3),
            "spawnError": spawn_error,
            **({"restarting": True} if restarting else {}),
            **({"ahead": True} if job.ahead else {}),
        }
        # A runner about to leave (its memory pinned) walks nothing: the engine asks again once it is back.
        walk = None if restarting else self.walk_after(job)
        if walk is not None and not walk.step(time.monotonic() + SLICE_SECONDS):
            self.walking = (message, walk, job)  # the exit goes once the walk is done (`tick`)
            return
        self.send_exit(message, walk)
        self.prepare_next(job, message)
        if restarting:
            # The exit is sent: leave, so the kubelet restarts the runner in a new cgroup (see memory_pinned).
            os._exit(PINNED_EXIT)
        if oom and self.may_restart and RESTART_WHEN_PINNED and memory_pinned():
            # The exit is sent: leave, so the kubelet restarts the runner in a new cgroup (see memory_pinned).
            os._exit(PINNED_EXIT)

    def walk_after(self, job):
        """The walk of the run's snapshot, started, or None: none asked, or /workspace is no longer the session's (the
        engine then asks with `snapshot` and hears why)."""
        if job.snapshot is None:
            return None
        fd, _problem = open_workspace(job.workspace)
        if fd is None:
            return None
        try:
            start = os.readlink("/proc/self/fd/%d" % fd)
        finally:
            os.close(fd)
        return Walk(start, *job.snapshot)

    def send_exit(self, message, walk):
        # An answer too large to send is left out: the engine asks with `snapshot`, which refuses it (`snapshot_size`).
        if walk is not None and not too_large(walk.entries):
            message["snapshot"] = walk.answer()
        self.runner.send(message)

    def shutdown(self):
        self.walking = None
        for inner in self.inner.values():
            inner.shutdown()
        if self.job is not None and self.job.pid is not None:
            self.stop("kill")


class NestedRun(Runs):
    """A run nested in the fresh run under way: its own code file, and its end kills only its own tree (its session,
    what descends from it, what holds its output), so the outer run's processes live on."""

    may_restart = False

    def code_file(self, job):
        path = os.path.join(CODE_DIR, "nested-%d%s" % (job.id, os.path.splitext(CODE_FILES[job.language])[1]))
        if job.language == "python":
            bootstrap = PYTHON_BOOTSTRAP.replace(CODE_DIR + "/main.py", path)
            return path, ["/usr/bin/python3", "-c", bootstrap]
        return path, ARGV[job.language][:-1] + [path]

    def cleanup(self, job):
        if job.pid is None:
            return 0
        return kill_tree(job.pid, list(job.out.values()))

    def walk_after(self, job):
        return None
