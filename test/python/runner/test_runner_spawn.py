"""runner_spawn: starting user code (a real fork and exec), the workspace check, cgroup counters, exit fields."""

import os
import signal

import pytest
import runner_spawn
from runner_spawn import (
    RequestError,
    SpawnError,
    cgroup_counter,
    checked_workspace,
    ensure_home,
    exit_fields,
    expected_workspace,
    open_workspace,
    spawn,
    string_env,
)


def read_all(fd):
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    os.close(fd)
    return data


def run(argv, env, cwd, cpu_seconds=0):
    """Spawns `argv` with its stdout a pipe; returns (stdout, exit code)."""
    out_r, out_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    cwd_fd = os.open(cwd, os.O_PATH | os.O_DIRECTORY)
    try:
        pid = spawn(argv, env, {0: devnull, 1: out_w, 2: out_w}, cwd_fd, cpu_seconds)
    finally:
        os.close(out_w)
        os.close(devnull)
        os.close(cwd_fd)
    out = read_all(out_r)
    return out, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_spawn_runs_in_the_directory_with_exactly_the_env_given(tmp_path):
    out, code = run(["/bin/sh", "-c", 'pwd; echo "$GREETING"; env | sort'], {"GREETING": "hi"}, tmp_path)
    lines = out.decode().splitlines()
    assert code == 0
    assert lines[0] == str(tmp_path)
    assert lines[1] == "hi"
    # sh adds PWD (and may add SHLVL, _); nothing of the test's own environment gets through.
    assert {line.split("=")[0] for line in lines[2:]} <= {"GREETING", "PWD", "SHLVL", "_"}


def test_spawn_starts_a_new_session_at_the_lowest_priority(tmp_path):
    out, _ = run(["/bin/sh", "-c", "exec cat /proc/self/stat"], {}, tmp_path)
    fields = out[out.rindex(b")") + 2 :].split()
    pid, sid, nice = int(out.split()[0]), int(fields[3]), int(fields[16])
    assert sid == pid  # its own session: interrupted and killed as a group
    assert nice == runner_spawn.USER_CODE_NICE


def test_spawn_gives_the_child_only_the_descriptors_it_names(tmp_path):
    keep_r, keep_w = os.pipe()
    os.set_inheritable(keep_w, True)  # even an inheritable descriptor of the runner must not leak
    try:
        out, _ = run(["/bin/sh", "-c", "exec ls /proc/self/fd"], {}, tmp_path)
    finally:
        os.close(keep_r)
        os.close(keep_w)
    # 0, 1 and 2, and the one ls opened to list the directory.
    assert sorted(int(n) for n in out.split()) == [0, 1, 2, 3]


def test_spawn_sets_the_cpu_limit_when_asked(tmp_path):
    out, _ = run(["/bin/sh", "-c", "ulimit -t"], {}, tmp_path, cpu_seconds=7)
    assert out.strip() == b"7"


def test_spawn_resets_ignored_signals_for_the_child(tmp_path):
    previous = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        out, _ = run(["/bin/sh", "-c", "grep SigIgn /proc/self/status"], {}, tmp_path)
    finally:
        signal.signal(signal.SIGPIPE, previous)
    ignored = int(out.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))


def test_spawn_raises_spawn_error_when_the_exec_fails(tmp_path):
    cwd_fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        with pytest.raises(SpawnError, match="No such file"):
            spawn([str(tmp_path / "missing")], {}, {0: devnull}, cwd_fd)
    finally:
        os.close(devnull)
        os.close(cwd_fd)


def test_exit_fields_split_codes_and_signals():
    assert exit_fields(0) == (0, None)
    assert exit_fields(3) == (3, None)
    assert exit_fields(-9) == (None, "SIGKILL")
    assert exit_fields(-200) == (None, "SIG200")
    assert exit_fields(None) == (None, None)


def test_string_env_makes_keys_and_values_strings():
    assert string_env({"A": 1, "B": True}) == {"A": "1", "B": "True"}
    assert string_env(None) == {}


def test_cgroup_counter_reads_the_first_readable_events_file(tmp_path):
    v2 = tmp_path / "memory.events"
    v2.write_text("low 0\nhigh 0\noom 2\noom_kill 5\n", encoding="ascii")
    assert cgroup_counter((str(tmp_path / "v1-missing"), str(v2)), "oom_kill") == 5
    assert cgroup_counter((str(v2),), "absent") is None
    assert cgroup_counter((str(tmp_path / "missing"),), "oom_kill") is None


def test_expected_workspace_takes_a_pair_only():
    assert expected_workspace({"workspace": [1, 2]}) == ["1", "2"]
    assert expected_workspace({"workspace": [1]}) is None
    assert expected_workspace({}) is None


def test_open_workspace_accepts_only_the_named_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_spawn, "WORKSPACE", str(tmp_path))
    st = os.stat(tmp_path)
    fd, problem = open_workspace([str(st.st_dev), str(st.st_ino)])
    assert problem is None and os.fstat(fd).st_ino == st.st_ino
    os.close(fd)
    fd, problem = open_workspace([str(st.st_dev), "1"])
    assert fd is None and problem == [str(st.st_dev), str(st.st_ino)]
    assert open_workspace(None) == (None, "the request names no expected workspace")


def test_checked_workspace_refuses_another_directory_saying_what_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_spawn, "WORKSPACE", str(tmp_path))
    st = os.stat(tmp_path)
    with pytest.raises(RequestError) as refused:
        checked_workspace({"workspace": ["0", "0"]})
    assert refused.value.code == "workspace"
    assert refused.value.extra == {"workspace": [str(st.st_dev), str(st.st_ino)]}
    with pytest.raises(RequestError, match="names no expected workspace"):
        checked_workspace({})


def test_ensure_home_makes_the_session_home_once_and_keeps_what_is_there(tmp_path):
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        ensure_home(fd)
        assert (tmp_path / ".home").is_dir()
        (tmp_path / ".home" / ".profile").write_text("kept")
        ensure_home(fd)
        assert (tmp_path / ".home" / ".profile").read_text() == "kept"
        # Something else in its place (a file the session made) is left alone.
        (tmp_path / ".home" / ".profile").unlink()
        (tmp_path / ".home").rmdir()
        (tmp_path / ".home").write_text("not a dir")
        ensure_home(fd)
        assert (tmp_path / ".home").read_text() == "not a dir"
    finally:
        os.close(fd)
