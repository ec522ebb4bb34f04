"""The runner as the subprocess tier runs it: runner.py in a bubblewrap sandbox, spoken to in JSON lines.

Its own pid namespace is what makes it safe to run here: after every fresh run (and on ping) the runner SIGKILLs
every process it can see but the trees it protects, and at exit all of them (`kill(-1)`).
"""

import base64
import json
import os
import selectors
import shutil
import subprocess
import time

RUNNER_IN_SANDBOX = "/opt/switchyard/runner"


def bwrap_argv(runner_dir, workspace, egress_dir, relay_dir=None):
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError("bubblewrap (bwrap) is needed: scripts/system-deps.sh test installs it")
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--die-with-parent", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + name):
            argv += ["--symlink", os.readlink("/" + name), "/" + name]
        elif os.path.isdir("/" + name):
            argv += ["--ro-bind", "/" + name, "/" + name]
    argv += ["--ro-bind", "/etc", "/etc", "--ro-bind", runner_dir, RUNNER_IN_SANDBOX]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--dir", "/run/switchyard"]
    argv += ["--bind", str(workspace), "/workspace"]
    if egress_dir is not None:  # what a pooled container whose sessions may reach the network has
        argv += ["--bind", str(egress_dir), "/run/switchyard-egress"]
    if relay_dir is not None:  # what a pooled container has: the runner listens on relay.sock there
        argv += ["--bind", str(relay_dir), "/run/switchyard-relay"]
    argv += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
    return argv + ["--", "/usr/bin/python3", "-I", RUNNER_IN_SANDBOX + "/runner.py"]


class RunnerSandbox:
    def __init__(self, runner_dir, workspace, egress_dir=None, relay_dir=None):
        st = os.stat(workspace)
        self.workspace = [str(st.st_dev), str(st.st_ino)]
        self.proc = subprocess.Popen(
            bwrap_argv(runner_dir, workspace, egress_dir, relay_dir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buffer = b""
        self.backlog = []
        self.next_id = 0
        self.hello = self.event(lambda m: m.get("ev") == "hello")

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def request(self, op, **fields):
        """Sends `op` with a fresh id (and the session's workspace unless given); returns the id."""
        self.next_id += 1
        fields.setdefault("workspace", self.workspace)
        self.send({"op": op, "id": self.next_id, **fields})
        return self.next_id

    def read_line(self, deadline):
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                raise TimeoutError("no answer from the runner; stderr: %r" % self.stderr_so_far())
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise EOFError("the runner exited; stderr: %r" % self.stderr_so_far())
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def event(self, match, timeout=15.0):
        """The first message `match` accepts (earlier ones are kept for later calls)."""
        for i, message in enumerate(self.backlog):
            if match(message):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            message = self.read_line(deadline)
            if match(message):
                return message
            self.backlog.append(message)

    def reply(self, request_id, ev=None, timeout=15.0):
        return self.event(lambda m: m.get("id") == request_id and (ev is None or m.get("ev") == ev), timeout)

    def output(self, request_id, fd):
        """The bytes of the `out` events of `request_id` on `fd` received so far (they are taken off the backlog)."""
        mine = [m for m in self.backlog if m.get("ev") == "out" and m.get("id") == request_id and m["fd"] == fd]
        self.backlog = [m for m in self.backlog if m not in mine]
        return b"".join(base64.b64decode(m["data"]) for m in mine)

    def run(self, code, language="python", timeout=15.0, **fields):
        """A fresh run to its end: (exit event, stdout bytes, stderr bytes)."""
        request_id = self.request("run", language=language, code=code, **fields)
        done = self.reply(request_id, "exit", timeout)
        return done, self.output(request_id, 1), self.output(request_id, 2)

    def stderr_so_far(self):
        if self.proc.poll() is None:
            return b"(still running)"
        return self.proc.stderr.read()

    def close(self):
        """Closes its stdin, the end of the runner (it kills everything else in its sandbox first)."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.sel.close()
        self.proc.stdout.close()
        self.proc.stderr.close()
