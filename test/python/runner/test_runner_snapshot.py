"""runner_snapshot: workspace snapshots walked by the runner itself (`snapshot`), and the same walk as a command."""

import json
import os
import subprocess
import sys
import time
import types

import runner_runs
import runner_snapshot
from conftest import RUNNER_DIR

SCRIPT = os.path.join(RUNNER_DIR, "runner_snapshot.py")


def snap(runner, **fields):
    answer = runner.reply(runner.request("snapshot", **fields), "snapshot")
    assert answer["ok"] is True, answer
    return answer["snapshot"]


def keys(snapshot):
    return [path for path, _ in snapshot["entries"]]


def changed(before, after):
    """What the engine's changedPaths makes of two complete snapshots: every path added, removed or changed."""
    b, a = dict(before["entries"]), dict(after["entries"])
    return sorted(p for p in set(b) | set(a) if b.get(p) != a.get(p))


def test_a_snapshot_lists_files_and_links_depth_first_and_sees_what_a_run_changed(runner, workspace):
    (workspace / "a.txt").write_text("one")
    (workspace / "sub" / "deeper").mkdir(parents=True)
    (workspace / "sub" / "deeper" / "d.py").write_text("print(1)")
    (workspace / "sub" / "gone.txt").write_text("x")
    os.symlink("/etc", workspace / "etc-link")
    before = snap(runner)
    assert keys(before) == ["a.txt", "etc-link", "sub/deeper/d.py", "sub/gone.txt"]
    assert before["partial"] is False
    st = os.lstat(workspace / "etc-link")
    assert dict(before["entries"])["etc-link"] == "%d:%d:%d" % (st.st_size, st.st_mtime_ns, st.st_ino)

    done, _, _ = runner.run(
        "import os, time\ntime.sleep(0.01)\nopen('a.txt', 'a').write('more')\nos.remove('sub/gone.txt')\n"
        "os.makedirs('out/x')\nopen('out/x/new.txt', 'w').write('new')\nopen('sub/deeper/d.py', 'w').write('print(2)')"
    )
    assert done["exitCode"] == 0
    after = snap(runner)
    assert changed(before, after) == ["a.txt", "out/x/new.txt", "sub/deeper/d.py", "sub/gone.txt"]
    assert changed(after, snap(runner)) == []


def test_the_bounds_mark_a_snapshot_partial(runner, workspace):
    for i in range(5):
        (workspace / ("f%d" % i)).write_text(str(i))
    small = snap(runner, maxEntries=3)
    assert keys(small) == ["f0", "f1", "f2"] and small["partial"] is True
    scan = snap(runner, maxScanEntries=2)
    assert keys(scan) == ["f0", "f1"] and scan["partial"] is True
    whole = snap(runner, maxEntries=5)
    assert len(whole["entries"]) == 5 and whole["partial"] is False


def test_bad_bounds_get_the_tools_bad_request_answer(runner):
    for fields in ({"maxEntries": 0}, {"maxScanEntries": "9"}, {"maxEntries": True}):
        answer = runner.reply(runner.request("snapshot", **fields), "snapshot")
        assert answer["ok"] is False
        assert answer["error"]["code"] == "BAD_REQUEST" and answer["error"]["name"] == "WorkspaceToolError"


def test_another_workspace_is_refused_as_a_run_would_be_and_no_home_is_made(runner, workspace):
    refused = runner.reply(runner.request("snapshot", workspace=["1", "2"]), "error")
    assert refused["code"] == "workspace"
    assert [str(v) for v in refused["workspace"]] == runner.workspace
    snap(runner)
    assert not (workspace / ".home").exists()  # a snapshot only reads


def test_a_large_walk_goes_on_in_slices_while_the_runner_answers(runner, workspace):
    for d in range(40):
        sub = workspace / ("d%02d" % d)
        sub.mkdir()
        for f in range(500):
            (sub / ("f%03d" % f)).write_text("")
    snapshot_id = runner.request("snapshot", maxEntries=100000)
    ping_id = runner.request("ping")
    # 20 000 entries take far more than one 10 ms slice: the ping sent after the snapshot is answered first.
    first = runner.event(lambda m: m.get("id") in (snapshot_id, ping_id), timeout=60)
    assert (first["id"], first["ev"]) == (ping_id, "pong")
    answer = runner.reply(snapshot_id, "snapshot", timeout=60)
    assert answer["ok"] is True and len(answer["snapshot"]["entries"]) == 20000
    assert keys(answer["snapshot"])[:2] == ["d00/f000", "d00/f001"]
    assert answer["snapshot"]["partial"] is False


def test_walk_stops_at_its_deadline_and_goes_on_where_it_was(tmp_path):
    for d in range(3):
        (tmp_path / ("d%d" % d)).mkdir()
        for f in range(200):
            (tmp_path / ("d%d" % d) / ("f%03d" % f)).write_text("")
    whole = runner_snapshot.Walk(str(tmp_path), 10000, 100000)
    assert whole.step() is True
    sliced = runner_snapshot.Walk(str(tmp_path), 10000, 100000)
    slices = 1
    while not sliced.step(time.monotonic() - 1):  # a deadline already past: one batch per step
        slices += 1
    assert slices > 1
    assert sliced.answer() == whole.answer() and len(whole.entries) == 600


def test_an_answer_over_the_limit_is_refused_not_sent(monkeypatch):
    sent = []

    class Runner:
        send = staticmethod(sent.append)

    snapshots = runner_snapshot.Snapshots(Runner(), None)
    monkeypatch.setattr(runner_snapshot, "MAX_ANSWER_BYTES", 100)
    snapshots.finish(7, {"ok": True, "snapshot": {"entries": [["x" * 200, "1:2:3"]], "partial": False}})
    snapshots.finish(8, {"ok": True, "snapshot": {"entries": [["x", "1:2:3"]], "partial": False}})
    assert sent[0]["ev"] == "error" and sent[0]["id"] == 7 and sent[0]["code"] == "snapshot_size"
    small = {"entries": [["x", "1:2:3"]], "partial": False}
    assert sent[1] == {"ev": "snapshot", "id": 8, "ok": True, "snapshot": small}


def run_command(stdin):
    r = subprocess.run([sys.executable, SCRIPT], input=stdin, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.count("\n") == 1
    return json.loads(r.stdout)


def test_the_command_walks_the_same_way(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    (tmp_path / "a").write_text("a")
    answer = run_command(json.dumps({"root": str(tmp_path)}))
    assert answer["ok"] is True and keys(answer["snapshot"]) == ["a", "b/x"]
    for bad in ("[1]", "nope", '{"maxEntries":0}'):
        assert run_command(bad)["error"]["code"] == "BAD_REQUEST"
    missing = run_command(json.dumps({"root": str(tmp_path / "missing")}))
    assert missing["error"]["code"] == "NOT_FOUND"


def test_a_run_asked_for_it_walks_the_workspace_after_it_and_sends_the_snapshot_in_its_exit(runner, workspace):
    (workspace / "old.txt").write_text("x")
    before = snap(runner)
    done, out, _ = runner.run(
        "import os\nos.makedirs('d/e')\nopen('d/e/new.txt', 'w').write('n')\nos.remove('old.txt')\nprint('ok')",
        snapshot={"maxEntries": 10000, "maxScanEntries": 100000},
    )
    assert out == b"ok\n" and done["exitCode"] == 0
    assert done["snapshot"]["ok"] is True
    assert done["snapshot"] == {"ok": True, "snapshot": snap(runner)}  # the same walk as `snapshot`
    assert changed(before, done["snapshot"]["snapshot"]) == ["d/e/new.txt", "old.txt"]
    plain, _, _ = runner.run("print(1)")
    assert "snapshot" not in plain  # only when asked


def test_a_runs_snapshot_keeps_the_bounds_and_bad_bounds_refuse_the_run(runner, workspace):
    for i in range(4):
        (workspace / ("f%d" % i)).write_text("")
    done, _, _ = runner.run("pass", snapshot={"maxEntries": 2, "maxScanEntries": 100})
    assert done["snapshot"]["snapshot"] == {"entries": done["snapshot"]["snapshot"]["entries"], "partial": True}
    assert keys(done["snapshot"]["snapshot"]) == ["f0", "f1"]
    refused = runner.reply(runner.request("run", language="python", code="pass", snapshot={"maxEntries": 0}), "error")
    assert refused["message"] == "snapshot: maxEntries must be a positive integer"
    assert runner.reply(runner.request("ping"), "pong")["busy"] is False  # nothing started


def test_a_runs_large_walk_goes_in_slices_and_the_run_stays_busy_until_its_exit(runner, workspace):
    for d in range(40):
        sub = workspace / ("d%02d" % d)
        sub.mkdir()
        for f in range(500):
            (sub / ("f%03d" % f)).write_text("")
    done, _, _ = runner.run("exit 3", language="bash", snapshot={"maxEntries": 100000}, timeout=60)
    assert done["exitCode"] == 3
    assert len(done["snapshot"]["snapshot"]["entries"]) == 20000


def test_the_exit_waits_for_the_walk_which_goes_on_between_the_loops_turns(tmp_path, monkeypatch):
    for f in range(300):
        (tmp_path / ("f%03d" % f)).write_text("")
    sent = []

    class Runner:
        send = staticmethod(sent.append)

    runs = runner_runs.Runs(Runner())
    monkeypatch.setattr(runner_runs, "SLICE_SECONDS", -1.0)  # every slice already late: one batch of entries each
    walk = runner_snapshot.Walk(str(tmp_path), 10000, 100000)
    runs.walking = ({"ev": "exit", "id": 9, "oomKilled": False}, walk, types.SimpleNamespace(standby=False))
    turns = 0
    while not sent:
        assert runs.active is True and runs.timeout() == 0.0  # busy, and the loop does not sleep meanwhile
        runs.tick()
        turns += 1
    assert turns > 1 and runs.active is False
    assert sent[0]["id"] == 9 and len(sent[0]["snapshot"]["snapshot"]["entries"]) == 300
