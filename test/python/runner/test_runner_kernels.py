"""runner_kernels, runner_cells and kernel_python.py / kernel_bash.sh: kernels that keep state between cells."""

import time

import pytest


def start_kernel(runner, kernel, language, **fields):
    ready = runner.reply(runner.request("kernel_start", kernel=kernel, language=language, env={}, **fields))
    assert ready["ev"] == "kernel_ready", ready
    return ready


def cell(runner, kernel, code, **fields):
    """A cell to its end: (cell_done, stdout bytes, stderr bytes)."""
    fields.setdefault("timeoutMs", 10000)
    fields.setdefault("env", {})
    request_id = runner.request("cell", kernel=kernel, code=code, **fields)
    done = runner.reply(request_id, "cell_done")
    return done, runner.output(request_id, 1), runner.output(request_id, 2)


def test_a_python_kernel_keeps_its_state_and_answers_the_last_expression(runner):
    ready = start_kernel(runner, "k1", "python")
    assert ready["kernel"] == "k1" and ready["pid"] > 2
    done, out, _ = cell(runner, "k1", "x = 20\nprint('set')")
    assert done["ok"] is True and done["result"] is None and out == b"set\n"
    assert done["count"] == 1
    done, out, _ = cell(runner, "k1", "x * 2 + 2")
    assert done["result"] == "42" and out == b""
    assert done["count"] == 2 and done["stateLost"] is False


def test_a_python_cell_that_raises_reports_the_error_and_its_traceback(runner):
    start_kernel(runner, "k1", "python")
    done, _, err = cell(runner, "k1", "def f():\n    raise ValueError('bad value')\nf()")
    assert done["ok"] is False
    assert done["error"] == {"name": "ValueError", "message": "bad value"}
    assert done["exitCode"] == 1
    assert b"ValueError: bad value" in err
    assert b"kernel_python.py" not in err  # only the user's own frames


def test_a_cell_sees_its_env(runner):
    start_kernel(runner, "k1", "python")
    done, out, _ = cell(runner, "k1", "import os\nprint(os.environ['CELL_VAR'])", env={"CELL_VAR": "v1"})
    assert out == b"v1\n" and done["ok"] is True


def test_a_bash_kernel_keeps_variables_and_cwd_and_reports_the_last_status(runner, workspace):
    (workspace / "sub").mkdir()
    start_kernel(runner, "b1", "bash")
    done, out, _ = cell(runner, "b1", "cd sub; GREETING=hello")
    assert done["ok"] is True and out == b""
    done, out, _ = cell(runner, "b1", 'echo "$GREETING from $PWD"; false')
    assert out == b"hello from /workspace/sub\n"
    assert done["ok"] is False and done["exitCode"] == 1


def test_interrupting_a_python_cell_keeps_the_kernel(runner):
    start_kernel(runner, "k1", "python")
    code = "import time\nn = 1\nprint('running', flush=True)\nwhile True: time.sleep(0.01)"
    cell_id = runner.request("cell", kernel="k1", code=code, env={})
    runner.event(lambda m: m.get("id") == cell_id and m.get("ev") == "out")  # it runs
    ack = runner.reply(runner.request("kernel_interrupt", kernel="k1"), "ack")
    assert ack["found"] is True and ack["running"] is True
    done = runner.reply(cell_id, "cell_done")
    assert done["interrupted"] is True and done["ended"] == "interrupt"
    assert done["stateLost"] is False
    assert done["error"]["name"] in ("KeyboardInterrupt", "Interrupted")
    done, _, _ = cell(runner, "k1", "n + 1")
    assert done["result"] == "2"


def test_a_cell_past_its_timeout_is_interrupted(runner):
    start_kernel(runner, "k1", "python")
    done, _, _ = cell(runner, "k1", "import time\ntime.sleep(30)", timeoutMs=300, graceMs=5000)
    assert done["timedOut"] is True and done["ended"] == "timeout"
    assert done["interrupted"] is True and done["stateLost"] is False


def test_a_kernel_that_exits_loses_its_state_and_is_reported(runner):
    start_kernel(runner, "k1", "python")
    done, _, _ = cell(runner, "k1", "import os\nos._exit(5)")
    assert done["stateLost"] is True
    assert done["kernelExit"] == {"exitCode": 5, "signal": None}
    gone = runner.event(lambda m: m.get("ev") == "kernel_exit" and m.get("kernel") == "k1")
    assert gone["exitCode"] == 5
    refused = runner.reply(runner.request("cell", kernel="k1", code="1", env={}), "error")
    assert refused["code"] == "no_kernel"


def test_stopping_a_kernel_kills_it(runner):
    start_kernel(runner, "k1", "python")
    ack = runner.reply(runner.request("kernel_stop", kernel="k1"), "ack")
    assert ack["found"] is True
    gone = runner.event(lambda m: m.get("ev") == "kernel_exit" and m.get("kernel") == "k1")
    assert gone["signal"] == "SIGKILL"
    assert runner.reply(runner.request("kernel_stop", kernel="k1"), "ack")["found"] is False


def test_a_kernel_survives_the_cleanup_after_a_fresh_run(runner):
    start_kernel(runner, "k1", "python")
    cell(runner, "k1", "kept = 'yes'")
    done, _, _ = runner.run("print('a fresh run')")
    assert done["leftovers"] == 0
    done, _, _ = cell(runner, "k1", "kept")
    assert done["result"] == "'yes'"


@pytest.mark.parametrize(
    ("fields", "code"),
    [({"kernel": "k1", "language": "fortran"}, "kernel_start"), ({"kernel": ""}, None)],
)
def test_kernel_start_refusals(runner, fields, code):
    refused = runner.reply(runner.request("kernel_start", env={}, **fields), "error")
    assert refused.get("code") == code


def test_a_second_kernel_with_the_same_id_is_refused(runner):
    start_kernel(runner, "k1", "python")
    refused = runner.reply(runner.request("kernel_start", kernel="k1", language="python", env={}), "error")
    assert refused["code"] == "exists"


def test_exit_in_a_bash_cell_ends_the_cell_with_its_code_and_keeps_the_shell(runner, workspace):
    (workspace / "sub").mkdir()
    start_kernel(runner, "b1", "bash")
    done, out, err = cell(
        runner, "b1", "cd sub; KEPT=yes\nf() { for i in 1 2; do exit 3; done; }\necho before; f\necho after"
    )
    assert (done["exitCode"], done["ok"], done["interrupted"], done["stateLost"]) == (3, False, False, False)
    assert out == b"before\n" and err == b""  # nothing after the exit ran; no stray newline of the abort
    done, out, _ = cell(runner, "b1", 'echo "$KEPT $PWD"; (exit 4); echo "subshell $?"; exit')
    assert out == b"yes /workspace/sub\nsubshell 4\n" and done["exitCode"] == 0 and done["ok"] is True
    done, _, err = cell(runner, "b1", "exit nope")
    assert done["exitCode"] == 2 and b"numeric argument required" in err
    done, out, err = cell(runner, "b1", "echo still >&2; echo $KEPT")
    assert (out, err, done["exitCode"]) == (b"yes\n", b"still\n", 0)


def test_a_set_e_failure_ends_the_bash_cell_and_keeps_the_shell_and_the_option(runner):
    start_kernel(runner, "b1", "bash")
    done, out, _ = cell(runner, "b1", "N=1; set -e\ng() { false; echo not-here; }\ng\necho nor-here")
    assert (done["exitCode"], done["interrupted"], done["stateLost"]) == (1, False, False) and out == b""
    done, out, _ = cell(runner, "b1", 'echo "$N $-"; false; echo not-here')
    assert out.startswith(b"1 ") and b"e" in out.split()[1] and done["exitCode"] == 1 and done["stateLost"] is False
    done, out, _ = cell(runner, "b1", "set +e; false; echo runs-on")
    assert out == b"runs-on\n" and done["ok"] is True


def test_a_bash_cell_that_ends_the_shell_is_reported_as_state_lost(runner):
    start_kernel(runner, "b1", "bash")
    done, _, _ = cell(runner, "b1", "builtin exit 7")
    assert done["stateLost"] is True and done["kernelExit"] == {"exitCode": 7, "signal": None}
    gone = runner.event(lambda m: m.get("ev") == "kernel_exit" and m.get("kernel") == "b1")
    assert gone["exitCode"] == 7


def test_python_exit_and_a_syntax_error_end_the_cell_not_the_kernel(runner):
    start_kernel(runner, "k1", "python")
    cell(runner, "k1", "x = 1")
    done, _, _ = cell(runner, "k1", "raise SystemExit(4)")
    assert (done["exitCode"], done["stateLost"]) == (4, False)
    done, _, err = cell(runner, "k1", "x = = 2")
    assert done["error"]["name"] == "SyntaxError" and done["stateLost"] is False and b"SyntaxError" in err
    done, _, _ = cell(runner, "k1", "exit()\nx = 5")
    assert done["ok"] is True
    assert cell(runner, "k1", "x")[0]["result"] == "1"


def test_a_python_cell_may_await_at_top_level_and_its_tasks_live_on(runner):
    start_kernel(runner, "k1", "python")
    code = "import asyncio\nasync def twice(n):\n    await asyncio.sleep(0.05)\n    return 2 * n\nawait twice(21)"
    assert cell(runner, "k1", code)[0]["result"] == "42"
    cell(runner, "k1", "task = asyncio.get_event_loop().create_task(asyncio.sleep(0, 'ran'))")
    done, _, _ = cell(runner, "k1", "await asyncio.sleep(0.01)\n(task.done(), await task)")
    assert done["result"] == "(True, 'ran')"


NODE_SERVER = (
    "const http = require('node:http');\n"
    "const server = http.createServer((q, s) => setTimeout(() => s.end('hi'), 200));\n"
    "await new Promise((r) => server.listen(0, '127.0.0.1', r));\n"
    "const url = `http://127.0.0.1:${server.address().port}/`;"
)


def test_a_node_cell_waits_for_the_promises_it_did_not_await(runner):
    start_kernel(runner, "n1", "node")
    assert cell(runner, "n1", NODE_SERVER)[0]["ok"] is True
    done, out, _ = cell(runner, "n1", "fetch(url).then((r) => console.log(r.status)); 'sent'")
    assert out == b"200\n" and done["result"] == "'sent'"
    done, _, _ = cell(runner, "n1", "fetch(url).then((r) => r.text())")
    assert done["result"] == "'hi'"  # a promise as the value: what it settles to
    done, _, _ = cell(runner, "n1", "const r = await fetch(url); r.status")
    assert done["result"] == "200"


def test_a_node_cell_does_not_wait_for_a_promise_nothing_can_settle(runner):
    start_kernel(runner, "n1", "node")
    done, _, _ = cell(runner, "n1", "new Promise(() => {}); 1", timeoutMs=5000)
    assert done["ok"] is True and done["timedOut"] is False and done["durationMs"] < 2000


def test_output_printed_between_cells_opens_the_next_cell(runner):
    start_kernel(runner, "n1", "node")
    done, out, _ = cell(runner, "n1", "setTimeout(() => console.log('late'), 100); 1")
    assert out == b"" and done["result"] == "1"
    time.sleep(0.5)  # the timer fires between the cells
    done, out, _ = cell(runner, "n1", "console.log('now')")
    assert out == b"late\nnow\n"
