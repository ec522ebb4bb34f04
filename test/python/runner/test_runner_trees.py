"""runner_trees: process trees found from /proc, and killed whole (on children of the test only)."""

import os
import signal
import time

from runner_spawn import spawn
from runner_trees import in_trees, kill_tree, killable, pipe_holders, process_table, signal_tree, tree_members

# pid -> (state, ppid, session): 10 leads a session with a child and a grandchild; 20 left it (setsid) but
# descends from it; 30 is elsewhere; 40 is a zombie.
TABLE = {
    1: (b"S", 0, 1),
    10: (b"S", 1, 10),
    11: (b"S", 10, 10),
    12: (b"R", 11, 10),
    20: (b"S", 12, 20),
    30: (b"S", 1, 30),
    40: (b"Z", 10, 10),
}


def test_in_trees_takes_the_session_and_every_descendant():
    assert in_trees(TABLE, {10}) == {10, 11, 12, 20, 40}
    assert in_trees(TABLE, {30}) == {30}
    assert in_trees(TABLE, set()) == set()


def test_killable_leaves_out_init_the_runner_and_zombies():
    assert killable(TABLE, 30) == {10, 11, 12, 20}


def test_process_table_sees_this_process_and_its_parent():
    table = process_table()
    state, ppid, sid = table[os.getpid()]
    assert ppid == os.getppid()
    assert sid == os.getsid(0)
    assert state in (b"R", b"S")


def wait_gone(pids, within=5.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        table = process_table()
        if all(pid not in table or table[pid][0] in (b"Z", b"X") for pid in pids):
            return True
        time.sleep(0.01)
    return False


def start_tree(tmp_path, script):
    """A shell in a session of its own (as the runner starts everything), stdout a pipe; returns (pid, read end)."""
    out_r, out_w = os.pipe()
    cwd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        pid = spawn(["/bin/sh", "-c", script], {"PATH": "/usr/bin:/bin"}, {1: out_w}, cwd)
    finally:
        os.close(out_w)
        os.close(cwd)
    return pid, out_r


def read_pids(fd, count):
    data = b""
    while data.count(b"\n") < count:
        data += os.read(fd, 4096)
    return [int(p) for p in data.split()]


def test_kill_tree_kills_the_leader_its_children_and_a_setsid_escapee_holding_its_pipe(tmp_path):
    # Two sleeps below the shell, and one that made its own session (no longer in the tree but for the pipe).
    pid, out = start_tree(
        tmp_path, "sleep 60 & echo $!; sleep 60 & echo $!; setsid sh -c 'echo $$; exec sleep 60' & wait"
    )
    try:
        children = read_pids(out, 3)
        members = tree_members(pid, [out])
        assert {pid, *children} <= members
        assert kill_tree(pid, [out]) >= 4
        os.waitpid(pid, 0)
        assert wait_gone(children)
        assert tree_members(pid, [out]) == set()
    finally:
        os.close(out)


def test_pipe_holders_finds_who_holds_the_runners_pipe(tmp_path):
    pid, out = start_tree(tmp_path, "echo $$; exec sleep 60")
    try:
        read_pids(out, 1)
        # The test's parent holds no end of it (the test itself does: the runner leaves itself out of candidates).
        assert pipe_holders([out], {pid, os.getppid()}) == {pid}
        assert pipe_holders([], {pid}) == set()
    finally:
        kill_tree(pid, [out])
        os.waitpid(pid, 0)
        os.close(out)


def test_signal_tree_sends_other_signals_to_every_member(tmp_path):
    pid, out = start_tree(tmp_path, "trap 'echo got TERM; exit 7' TERM; echo $$; while :; do sleep 0.01; done")
    try:
        read_pids(out, 1)
        signal_tree(pid, signal.SIGTERM, [out])
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
        assert b"got TERM" in os.read(out, 4096)
    finally:
        kill_tree(pid, [out])
        os.close(out)
