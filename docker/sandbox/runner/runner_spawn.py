"""Starting user code: the workspace check, fork and exec with the sandbox's settings, cgroup counters. Stdlib only.

Everything the runner starts (a fresh run's interpreter, a kernel, a background process) goes through `spawn`: a new
session (so it can be interrupted and killed as a group), the checked workspace as cwd, niceness 19 and
oom_score_adj 1000 (the code, not the runner, is what a CPU bomb slows down and what the OOM killer takes), signal
dispositions reset, and only the descriptors it is given.
"""

import fcntl
import os
import resource
import signal
import termios
import time

WORKSPACE = "/workspace"
# The session's home inside the workspace (SESSION_HOME in libs/common/src/session-home.ts).
HOME_NAME = ".home"
READ_CHUNK = 64 * 1024
# Niceness of user code: the lowest priority, so the runner stays responsive under a CPU or fork bomb.
USER_CODE_NICE = 19
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
PIDS_FILES = ("/sys/fs/cgroup/pids/pids.events", "/sys/fs/cgroup/pids.events")
SIGNAL_NAMES = {int(s): s.name for s in signal.Signals}
# Where the child keeps its exec-error pipe while it rearranges fds 0..n: far above any of them.
HIGH_FD = 200


class RequestError(Exception):
    """A refused request: `{"ev": "error", "id", "message", "code", ...extra}`."""

    def __init__(self, code, message, **extra):
        super().__init__(message)
        self.code = code
        self.extra = extra


class SpawnError(Exception):
    """The program could not be started (its exec or a setup step failed)."""


def now():
    return time.monotonic()


def cgroup_counter(paths, key):
    """A counter from a cgroup events file (v1 or v2), or None when it cannot be read (no /sys under bubblewrap)."""
    for path in paths:
        try:
            with open(path, encoding="ascii") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        except (OSError, ValueError):
            continue
    return None


# cgroup v1 then v2: the container's memory use and limit.
MEMORY_FILES = (
    ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.max"),
)
# After an OOM kill, memory this close to the limit with the killed code gone is held by no process.
PINNED_MARGIN_BYTES = 32 * 1024 * 1024
# Set by the Kubernetes backend's session pods (pod-spec.ts), whose pod reserves memory for a restarted runner.
RESTART_WHEN_PINNED = os.environ.get("SWITCHYARD_RUNNER_RESTART_WHEN_PINNED") == "1"
# The runner's exit status when it leaves for that reason (the runner container's last exit code).
PINNED_EXIT = 75


def memory_pinned():
    """True when the container's memory stays within PINNED_MARGIN_BYTES of its limit: what a memory-backed /tmp
    full of files (their inodes and pages are charged here and freed only by deleting them) leaves after the OOM
    killer took the code. Nothing started in this container can run then; a restarted runner gets a new cgroup."""
    for usage_path, limit_path in MEMORY_FILES:
        try:
            with open(usage_path, encoding="ascii") as f:
                usage = int(f.read().strip())
            with open(limit_path, encoding="ascii") as f:
                raw = f.read().strip()
        except (OSError, ValueError):
            continue
        if raw == "max":
            return False
        return int(raw) - usage < PINNED_MARGIN_BYTES
    return False


def oom_kills():
    return cgroup_counter(OOM_FILES, "oom_kill")


def oom_since(before):
    """True/False when the container's OOM-kill counter is readable (it rose since `before`), else None."""
    after = oom_kills()
    if before is None or after is None:
        return None
    return after > before


def exit_fields(code):
    """(exitCode, signal name) of a `waitstatus_to_exitcode` value (negative: killed by that signal)."""
    if code is None:
        return None, None
    if code >= 0:
        return code, None
    return None, SIGNAL_NAMES.get(-code, "SIG%d" % -code)


def string_env(raw):
    return {str(k): str(v) for k, v in (raw or {}).items()}


def expected_workspace(request):
    workspace = request.get("workspace")
    return [str(v) for v in workspace] if isinstance(workspace, list) and len(workspace) == 2 else None


def open_workspace(expected):
    """A descriptor of /workspace when it is the directory `expected` ([dev, ino] strings) names, else an error."""
    if expected is None:
        return None, "the request names no expected workspace"
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


def ensure_home(workspace_fd):
    """Makes the session's home (HOME, `/workspace/.home`) when the workspace has none: a workspace restored from a
    checkpoint taken before homes existed, or one whose code removed it. Whatever is there already is left as it is."""
    try:
        os.mkdir(HOME_NAME, 0o755, dir_fd=workspace_fd)
    except OSError:
        pass


def checked_workspace(request, make_home=True):
    """`open_workspace` for a request, raising the `workspace` refusal (with what /workspace is) when it differs.
    `make_home`: what starts code there needs the session's home; a snapshot only reads."""
    expected = expected_workspace(request)
    fd, problem = open_workspace(expected)
    if fd is not None:
        if make_home:
            ensure_home(fd)
        return fd
    if isinstance(problem, list):
        raise RequestError(
            "workspace", "/workspace is %s, not the session workspace %s" % (problem, expected), workspace=problem
        )
    raise RequestError("workspace", problem)


def spawn(argv, env, fds, cwd_fd, cpu_seconds=0, tty=False):
    """Forks and execs `argv` in a new session; `fds` maps the child's descriptors to the runner's. Returns the pid.

    With `tty`, the child's fd 0 is a terminal's slave side and becomes the new session's controlling terminal (a
    shell's job control, ^C and the window size's SIGWINCH work through it). Raises SpawnError when the exec (or a
    setup step before it) fails; the child is then already reaped.
    """
    err_r, err_w = os.pipe()  # both close-on-exec: EOF on err_r means the exec happened
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(err_r)
            err = fcntl.fcntl(err_w, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
            os.setsid()
            moved = {target: fcntl.fcntl(source, fcntl.F_DUPFD_CLOEXEC, HIGH_FD) for target, source in fds.items()}
            for target, source in moved.items():
                os.dup2(source, target)  # inheritable
            if tty:
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            os.fchdir(cwd_fd)  # the directory whose device and inode were just checked
            os.nice(USER_CODE_NICE)
            if cpu_seconds > 0:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
            try:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")
            except OSError:
                pass
            # The runner ignores SIGPIPE and Python ignores SIGXFSZ; ignored dispositions survive exec.
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.closerange(max(fds) + 1, err)
            os.closerange(err + 1, 1 << 16)
            os.execve(argv[0], argv, env)
        except BaseException as exc:  # noqa: BLE001 - anything here must reach the parent, then _exit
            try:
                os.write(err, ("%s" % exc).encode("utf-8", "replace")[:1000])
            finally:
                os._exit(127)
    os.close(err_w)
    try:
        message = b""
        while True:
            chunk = os.read(err_r, 1024)
            if not chunk:
                break
            message += chunk
    finally:
        os.close(err_r)
    if message:
        os.waitpid(pid, 0)
        raise SpawnError(message.decode("utf-8", "replace"))
    return pid


def pipes(count):
    """`count` pipes as (read, write) pairs, all close-on-exec in the runner."""
    return [os.pipe() for _ in range(count)]


def close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
