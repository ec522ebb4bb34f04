"""runner_procs: background processes beside the runner, their output, stdin, signals and end."""

import base64


def finished(runner, proc):
    """`proc`'s `pexit`, and what it wrote before it on stdout and stderr."""
    done = runner.event(lambda m: m.get("ev") == "pexit" and m.get("proc") == proc)
    mine = [m for m in runner.backlog if m.get("ev") == "pout" and m.get("proc") == proc]
    runner.backlog = [m for m in runner.backlog if m not in mine]
    out, err = (b"".join(base64.b64decode(m["data"]) for m in mine if m["fd"] == fd) for fd in (1, 2))
    return done, out, err


def test_a_process_runs_in_its_cwd_and_reports_its_output_and_exit(runner, workspace):
    (workspace / "app").mkdir()
    request_id = runner.request(
        "proc_start", proc="p1", command='pwd; echo "$MODE" >&2; exit 3', cwd="app", env={"MODE": "dev"}
    )
    started = runner.reply(request_id, "proc_started")
    assert started["proc"] == "p1" and started["pid"] > 2
    done, out, err = finished(runner, "p1")
    assert out == b"/workspace/app\n" and err == b"dev\n"
    assert done["exitCode"] == 3 and done["signal"] is None


def test_a_process_reads_what_is_written_to_its_stdin(runner):
    runner.reply(runner.request("proc_start", proc="p1", command="tr a-z A-Z"), "proc_started")
    assert runner.reply(runner.request("proc_write", proc="p1", data="hello\n", eof=False), "ack")["found"] is True
    assert runner.reply(runner.request("proc_write", proc="p1", data="world\n", eof=True), "ack")["found"] is True
    done, out, _ = finished(runner, "p1")
    assert out == b"HELLO\nWORLD\n" and done["exitCode"] == 0
    assert runner.reply(runner.request("proc_write", proc="p1", data="late"), "ack")["found"] is False


def test_a_signal_ends_the_process_and_what_it_started(runner):
    runner.reply(runner.request("proc_start", proc="p1", command="sleep 60 & sleep 60"), "proc_started")
    ack = runner.reply(runner.request("proc_signal", proc="p1", signal="SIGTERM"), "ack")
    assert ack["found"] is True
    done, _, _ = finished(runner, "p1")
    assert done["signal"] == "SIGTERM"
    _, out, _ = runner.run("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert out == b"3\n"  # bwrap's reaper, the runner and this run: no sleep left


def test_a_process_survives_a_fresh_run(runner):
    started = runner.reply(runner.request("proc_start", proc="p1", command="sleep 60"), "proc_started")
    done, _, _ = runner.run("print('fresh')")
    assert done["leftovers"] == 0
    _, out, _ = runner.run("import os\nprint(os.path.exists('/proc/%d'))" % started["pid"])
    assert out == b"True\n"


def test_proc_refusals(runner):
    assert runner.reply(runner.request("proc_start", proc="p1", command="true", cwd="../.."), "error")["code"] == "cwd"
    assert runner.reply(runner.request("proc_start", proc="p1", command="true", cwd="nope"), "error")["code"] == "cwd"
    refused = runner.reply(runner.request("proc_signal", proc="p1", signal="STOP"), "error")
    assert refused["code"] == "signal"
    runner.reply(runner.request("proc_start", proc="p2", command="sleep 60"), "proc_started")
    assert runner.reply(runner.request("proc_start", proc="p2", command="true"), "error")["code"] == "exists"
    runner.reply(runner.request("proc_write", proc="p2", data="", eof=True), "ack")
    assert runner.reply(runner.request("proc_write", proc="p2", data="x"), "error")["code"] == "closed"
