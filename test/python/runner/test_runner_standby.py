"""runner_standby: the python started ahead for a box's next fresh run, in the sandboxed runner."""

PID_AND_ORIGIN = "import os\nprint(os.getpid(), b'_seen = _site()' in open('/proc/self/cmdline', 'rb').read())"


def test_the_next_standby_run_takes_the_python_started_after_the_last(runner):
    first, out1, _ = runner.run(PID_AND_ORIGIN, standby=True)
    assert "ahead" not in first and out1.decode().split()[1] == "False"
    second, out2, _ = runner.run(PID_AND_ORIGIN + "\nimport sys\nprint(sys.stdin.read())", standby=True, stdin="in")
    assert second["ahead"] is True and second["exitCode"] == 0
    pid, started_ahead, stdin = out2.decode().split()
    assert started_ahead == "True" and stdin == "in"
    assert pid != out1.decode().split()[0]  # a fresh process: none is reused


def test_a_run_that_asks_for_none_or_another_environment_does_not_take_it(runner):
    runner.run("pass", standby=True)
    plain, _, _ = runner.run("pass")
    assert "ahead" not in plain
    other, out, _ = runner.run("import os\nprint(os.environ['WHO'])", standby=True, env={"WHO": "other"})
    assert "ahead" not in other and out == b"other\n"
    again, out, _ = runner.run("import os\nprint(os.environ['WHO'])", standby=True, env={"WHO": "other"})
    assert again["ahead"] is True and out == b"other\n"


def test_it_survives_a_health_check_and_applies_the_runs_cpu_limit(runner):
    runner.run("pass", standby=True)
    assert runner.reply(runner.request("ping"), "pong")["ok"] is True
    done, _, _ = runner.run("while True: pass", standby=True, cpuSeconds=1, timeoutMs=10000)
    assert done["ahead"] is True and done["signal"] == "SIGXCPU"


def test_none_is_started_after_a_run_that_ended_badly(runner):
    done, _, _ = runner.run("import time\ntime.sleep(30)", standby=True, timeoutMs=300)
    assert done["ended"] == "timeout"
    after, _, _ = runner.run("pass", standby=True)
    assert "ahead" not in after
