"""runner_resync: a new engine takes over a live runner; kernels and processes live on, the old connection's run,
cells, terminals and tunnels end."""

import base64

from test_runner_kernels import cell, start_kernel


def resync(runner, nonce="n-1"):
    return runner.reply(runner.request("resync", nonce=nonce), "resynced")


def test_resync_lists_the_live_kernels_and_processes_with_the_engines_records(runner):
    start_kernel(runner, "k1", "python", meta={"startedAt": "2026-01-01T00:00:00.000Z"})
    cell(runner, "k1", "x = 41")
    started = runner.reply(
        runner.request("proc_start", proc="p1", command="sleep 60", cwd=".", env={}, meta={"name": "web"}),
        "proc_started",
    )
    answer = resync(runner, "abc")
    assert answer["nonce"] == "abc" and answer["protocol"] == runner.hello["protocol"]
    assert answer["pid"] == runner.hello["pid"]
    assert [str(n) for n in answer["workspace"]] == runner.workspace
    [kernel] = answer["kernels"]
    assert kernel["kernel"] == "k1" and kernel["language"] == "python" and kernel["count"] == 1
    assert kernel["busy"] is False and kernel["meta"] == {"startedAt": "2026-01-01T00:00:00.000Z"}
    assert answer["procs"] == [{"proc": "p1", "pid": started["pid"], "meta": {"name": "web"}}]
    # Both live on: the kernel's state, the process.
    done, _, _ = cell(runner, "k1", "x + 1")
    assert done["result"] == "42" and done["count"] == 2
    _, out, _ = runner.run("import os\nprint(os.path.exists('/proc/%d'))" % started["pid"])
    assert out == b"True\n"


def test_resync_ends_the_old_connections_run_and_interrupts_its_cell(runner):
    start_kernel(runner, "k1", "python")
    cell(runner, "k1", "n = 1")
    code = "import time\nprint('on', flush=True)\nwhile True: time.sleep(0.01)"
    cell_id = runner.request("cell", kernel="k1", code=code, env={}, timeoutMs=60000, graceMs=2000)
    runner.event(lambda m: m.get("id") == cell_id and m.get("ev") == "out")
    # A fresh run beside it: the runner refuses a second one, so this one is the old engine's long action.
    run_id = runner.request("run", language="bash", code="echo go; sleep 60", timeoutMs=60000)
    runner.event(lambda m: m.get("id") == run_id and m.get("ev") == "out")
    answer = resync(runner)
    # By its answer, the old run and cell have ended: their last words came before it.
    before = [(m.get("id"), m.get("ev")) for m in runner.backlog]
    assert (cell_id, "cell_done") in before and (run_id, "exit") in before
    assert [k["busy"] for k in answer["kernels"]] == [False]
    # The kernel kept its state, and fresh runs go again.
    done, _, _ = cell(runner, "k1", "n + 1")
    assert done["result"] == "2"
    done, out, _ = runner.run("print('again')")
    assert out == b"again\n" and done["exitCode"] == 0


def test_resync_hangs_up_terminals(runner):
    env = {"PATH": "/usr/bin:/bin", "TERM": "xterm", "HOME": "/workspace"}
    runner.reply(runner.request("term_open", term="t1", cols=80, rows=24, env=env, cwd=""), "term_started")
    resync(runner)
    ended = runner.event(lambda m: m.get("ev") == "texit" and m.get("term") == "t1")
    assert ended["term"] == "t1"


def test_resync_needs_a_nonce(runner):
    refused = runner.reply(runner.request("resync"), "error")
    assert "nonce" in refused["message"]


def test_process_output_after_a_resync_still_flows(runner):
    runner.reply(
        runner.request("proc_start", proc="p1", command="read line; echo got $line", cwd=".", env={}), "proc_started"
    )
    resync(runner)
    runner.reply(runner.request("proc_write", proc="p1", data="it\n", eof=True), "ack")
    out = runner.event(lambda m: m.get("ev") == "pout" and m.get("proc") == "p1")
    assert base64.b64decode(out["data"]) == b"got it\n"


def test_resync_removes_the_old_runs_call_sockets_and_keeps_the_egress_channel(runner):
    call = runner.reply(runner.request("channel_open", kind="call", run="act_old"), "channel_opened")["socket"]
    egress = runner.reply(runner.request("channel_open", kind="egress"), "channel_opened")["socket"]
    resync(runner)
    code = (
        "import socket\n"
        "def reach(name):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    try:\n"
        "        s.connect(b'\\0' + name[1:].encode())\n"
        "        return 'open'\n"
        "    except OSError:\n"
        "        return 'gone'\n"
        "print(reach(%r), reach(%r))" % (call, egress)
    )
    _, out, _ = runner.run(code)
    assert out == b"gone open\n"
    # The new engine opens the box's egress channel again and gets the same socket.
    again = runner.reply(runner.request("channel_open", kind="egress"), "channel_opened")["socket"]
    assert again == egress
