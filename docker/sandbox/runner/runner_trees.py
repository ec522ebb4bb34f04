"""The processes of this pid namespace, and killing them: all, all but the protected trees, or one tree. Stdlib only.

A tree is what a kernel or a background process started: every process in its session (the runner starts each in a
new one) or whose parent chain reaches its leader. Live kernels' and processes' trees are protected: a fresh run's
cleanup and the health check kill everything else, so whatever a run leaves behind (background jobs, double forks,
setsid, nohup) still dies, while kernels and their servers live on. The runner is a child subreaper, so orphans of
a tree come back to it (their chain then ends at the runner, outside every tree) and are reaped by it.
"""

import os
import signal
import time

ROUNDS = 100


def process_table():
    """pid -> (state, ppid, session id) of every process here, zombies included (state b"Z")."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2 :].split()
            table[int(name)] = (fields[0], int(fields[1]), int(fields[3]))
        except (OSError, ValueError, IndexError):
            continue
    return table


def killable(table, me):
    """The live processes of `table`, except init and the runner."""
    return {pid for pid, entry in table.items() if entry[0] not in (b"Z", b"X") and pid not in (1, me)}


def in_trees(table, roots):
    """The pids of `table` in one of the sessions `roots` (their leaders' pids), or with an ancestor in `roots`."""
    memo = {}

    def inside(pid):
        chain = []
        result = False
        while pid > 1:
            if pid in memo:
                result = memo[pid]
                break
            entry = table.get(pid)
            if entry is None:
                break
            chain.append(pid)
            if pid in roots or entry[2] in roots:
                result = True
                break
            pid = entry[1]
        for p in chain:
            memo[p] = result
        return result

    return {pid for pid in table if inside(pid)}


def other_live_pids(me):
    """Every process in this pid namespace except init, the runner and zombies."""
    return killable(process_table(), me)


def pause(attempt):
    time.sleep(0.001 * min(attempt + 1, 10))


def kill_everything_else():
    """SIGKILLs every process the sandbox user has here but the runner; returns how many were alive."""
    me = os.getpid()
    found = len(other_live_pids(me))
    for attempt in range(ROUNDS):
        try:
            os.kill(-1, signal.SIGKILL)  # all we may signal, except init and ourselves
        except ProcessLookupError:
            pass
        if not other_live_pids(me):
            break
        pause(attempt)
    return found


def send(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_unprotected(roots):
    """SIGKILLs everything but init, the runner and the trees of `roots`; returns how many were alive.

    Whatever is not protected cannot become protected (a new process joins its parent's session or makes its own),
    so killing until none is left ends even a fork bomb.
    """
    if not roots:
        return kill_everything_else()
    me = os.getpid()
    found = None
    for attempt in range(ROUNDS):
        table = process_table()
        targets = killable(table, me) - in_trees(table, roots)
        if found is None:
            found = len(targets)
        if not targets:
            break
        send(targets, signal.SIGKILL)
        pause(attempt)
    return found


def pipe_holders(pipes, candidates):
    """The `candidates` that hold one of the pipes open: descriptors of the runner's ends, or paths (a terminal's
    slave side, `/dev/pts/N`, which is what its holders' /proc/<pid>/fd links name)."""
    names = set()
    for fd in pipes:
        if isinstance(fd, str):
            names.add(fd)
            continue
        try:
            names.add("pipe:[%d]" % os.fstat(fd).st_ino)
        except OSError:
            continue
    holders = set()
    if not names:
        return holders
    for pid in candidates:
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
            if any(os.readlink("/proc/%d/fd/%s" % (pid, fd)) in names for fd in fds):
                holders.add(pid)
        except OSError:
            continue
    return holders


def tree_members(root, pipes=()):
    table = process_table()
    alive = killable(table, os.getpid())
    members = alive & in_trees(table, {root})
    if pipes:
        members |= pipe_holders(pipes, alive - members)
    return members


def kill_tree(root, pipes=()):
    """SIGKILLs the tree of `root` (its session, and everything below it) until none is left; returns how many.

    Whatever still holds one of its output `pipes` belongs to it too: once the leader is gone, a descendant that
    made its own session is no longer below it, but still writes its output. The tree is frozen first (SIGSTOP,
    until no new member shows up): a stopped process cannot fork, and its children keep it as their parent, so
    nothing that forks while it is being killed escapes.
    """
    members = set()
    for _ in range(ROUNDS):
        fresh = tree_members(root, pipes) - members
        if not fresh:
            break
        send(fresh, signal.SIGSTOP)
        members |= fresh
    count = len(members)
    for attempt in range(ROUNDS):
        send(members, signal.SIGKILL)
        members = tree_members(root, pipes)
        if not members:
            break
        pause(attempt)
    return count


def signal_tree(root, sig, pipes=()):
    """Sends `sig` to every process of the tree of `root` (see `kill_tree`)."""
    if sig == signal.SIGKILL:
        kill_tree(root, pipes)
    else:
        send(tree_members(root, pipes), sig)
