"""runner_kernels, runner_cells and kernel_python.py / kernel_bash.sh: kernels that keep state between cells."""

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
