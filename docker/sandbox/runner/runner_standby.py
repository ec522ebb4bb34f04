"""A python interpreter started ahead for the box's next fresh run (a run request with `"standby": true`). Stdlib only.

After such a python run ends (its leftovers killed), the runner starts the next interpreter at once, exactly as it
would start one for a run (`spawn`: a new session, the checked workspace as cwd, niceness, oom_score_adj, the same
environment), with its stdin, stdout and stderr pipes ready; it waits on a go pipe (fd 3) with python already up.
The next run with the same environment and workspace takes it: the code is written to the code file as always, the
go message carries the run's CPU limit, and the interpreter runs the code as `python -c <bootstrap>` would. Each
interpreter still runs one run and dies with it: none is reused. What it saves is python's start, about 15 ms of a
20 ms `print(1)` here.

The interpreter set up `sys.path` from the session's user site when it started; when that changed meanwhile (a
`pip install --user`: a new `.pth` file, the directory created), it execs a fresh python on the code file instead, so
the code sees what an interpreter started now would (see `SITE_STATE`). It is protected from the cleanups while it
waits (`roots`), and replaced when a standby run asks with another environment or workspace.
"""

import os

from runner_spawn import SpawnError, close_all, spawn

CODE_FILE = "/run/switchyard/main.py"
PYTHON = "/usr/bin/python3"
BOOTSTRAP = (
    "__file__ = %r; import sys; sys.argv[0] = __file__; del sys; "
    "exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))" % CODE_FILE
)
# What `site` read of the session's user site at start-up: the directory, its .pth files, usercustomize.
SITE_STATE = "\n".join(
    [
        "def _site():",
        "    d = site.getusersitepackages() if site.ENABLE_USER_SITE else None",
        "    try:",
        "        names = sorted(n for n in os.listdir(d) if n.endswith('.pth') or n == 'usercustomize.py')",
        "        return d, [(n, os.stat(os.path.join(d, n)).st_mtime_ns) for n in names]",
        "    except (OSError, TypeError):",
        "        return d, None",
    ]
)
# The interpreter's program: wait for the go message ("<cpu seconds>\n"; end of file: not wanted), then run the code.
SOURCE = "\n".join(
    [
        "import os, sys, site, resource",
        SITE_STATE,
        "_seen = _site()",
        "_go = b''",
        "while not _go.endswith(b'\\n'):",
        "    _c = os.read(3, 1)",
        "    if not _c: os._exit(0)",
        "    _go += _c",
        "os.close(3)",
        "_cpu = int(_go)",
        "if _cpu > 0: resource.setrlimit(resource.RLIMIT_CPU, (_cpu, _cpu + 1))",
        "if _site() != _seen: os.execv(sys.executable, [sys.executable, '-c', %r])" % BOOTSTRAP,
        "__file__ = %r" % CODE_FILE,
        "sys.argv[:] = [__file__]",
        "del os, sys, site, resource, _site, _seen, _go, _c, _cpu",
        "exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))",
    ]
)


class Ready:
    """One interpreter waiting: its pid, the runner's ends of its pipes, and what it was started with."""

    def __init__(self, pid, env, workspace, stdin, stdout, stderr, go):
        self.pid = pid
        self.env = env
        self.workspace = workspace  # (st_dev, st_ino) of its cwd
        self.stdin = stdin
        self.out = {1: stdout, 2: stderr}
        self.go = go
        self.exited = False


class Standby:
    def __init__(self, runner):
        self.runner = runner
        self.ready = None

    def roots(self):
        """The waiting interpreter, protected from the cleanups (a run's, the health check's)."""
        return {self.ready.pid} if self.ready is not None and not self.ready.exited else set()

    def take(self, env, workspace_fd, cpu_seconds):
        """The waiting interpreter, told to go, when it was started with `env` in this workspace; else None (one with
        other settings stays for a run that matches it)."""
        ready = self.ready
        if ready is None or ready.exited or ready.env != env or ready.workspace != identity(workspace_fd):
            return None
        self.ready = None
        try:
            os.write(ready.go, b"%d\n" % max(0, int(cpu_seconds)))
        except OSError:  # it is gone: its exit is reaped as any child's
            self.close(ready)
            return None
        finally:
            close_all((ready.go,))
        return ready

    def prepare(self, env, workspace_fd):
        """Starts the interpreter for the next run with `env` in this workspace, replacing one with other settings."""
        if self.ready is not None and not self.ready.exited:
            if self.ready.env == env and self.ready.workspace == identity(workspace_fd):
                return
            self.discard()
        (in_r, in_w), (out_r, out_w), (err_r, err_w), (go_r, go_w) = os.pipe(), os.pipe(), os.pipe(), os.pipe()
        try:
            pid = spawn([PYTHON, "-c", SOURCE], env, {0: in_r, 1: out_w, 2: err_w, 3: go_r}, workspace_fd)
        except (OSError, SpawnError):
            close_all((in_w, out_r, err_r, go_w))
            return
        finally:
            close_all((in_r, out_w, err_w, go_r))
        ready = Ready(pid, env, identity(workspace_fd), in_w, out_r, err_r, go_w)
        self.ready = ready
        self.runner.adopt(pid, lambda _code: self.on_exit(ready))

    def on_exit(self, ready):
        ready.exited = True
        if self.ready is ready:
            self.ready = None
            self.close(ready)

    def discard(self):
        ready, self.ready = self.ready, None
        if ready is None:
            return
        close_all((ready.go,))  # end of file: it leaves by itself
        self.close(ready)
        try:
            os.kill(ready.pid, 9)
        except OSError:
            pass

    @staticmethod
    def close(ready):
        close_all((ready.stdin, ready.out[1], ready.out[2]))

    def tick(self):
        pass

    def timeout(self):
        return None

    def shutdown(self):
        self.discard()


def identity(fd):
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)
