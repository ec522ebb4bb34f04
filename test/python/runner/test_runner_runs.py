"""runner_runs: fresh runs in the sandboxed runner, from the request to the exit event."""


def test_a_python_run_forwards_its_output_and_exit_code(runner):
    done, out, err = runner.run("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nsys.exit(3)")
    assert out == b"hello\n" and err == b"oops\n"
    assert done["exitCode"] == 3 and done["signal"] is None
    assert done["timedOut"] is False and done["ended"] is None
    assert done["spawnError"] is None
    assert done["capped"] == {"stdout": False, "stderr": False}


def test_a_run_reads_its_stdin_and_env_and_starts_in_the_workspace(runner, workspace):
    (workspace / "data.txt").write_text("from the workspace")
    code = "import os, sys\nprint(sys.stdin.read().upper(), os.environ['WHO'], open('data.txt').read(), os.getcwd())"
    done, out, _ = runner.run(code, stdin="piped in", env={"WHO": "me"})
    assert done["exitCode"] == 0
    assert out == b"PIPED IN me from the workspace /workspace\n"


def test_a_bash_run(runner):
    done, out, _ = runner.run('echo "$0"; exit 4', language="bash")
    assert out == b"/run/switchyard/main.sh\n" and done["exitCode"] == 4


def test_a_run_past_its_timeout_is_killed(runner):
    done, _, _ = runner.run("import time\ntime.sleep(30)", timeoutMs=300)
    assert done["timedOut"] is True and done["ended"] == "timeout"
    assert done["signal"] == "SIGKILL"
    assert done["durationMs"] < 5000


def test_output_past_the_cap_ends_the_run(runner):
    done, out, _ = runner.run("while True:\n    print('x' * 99)", capBytes=1000, capLines=100000)
    assert done["capped"] == {"stdout": True, "stderr": False}
    assert done["ended"] == "output"
    assert len(out) == 1000


def test_what_a_run_leaves_running_is_killed_after_it(runner):
    code = "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)\nprint('left')"
    done, out, _ = runner.run(code)
    assert out == b"left\n"
    assert done["leftovers"] == 1
    # The next ping finds nothing left to kill: the sandbox has only bwrap's reaper and the runner.
    assert runner.reply(runner.request("ping"), "pong")["ok"] is True
    _, out, _ = runner.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert out.decode().strip().startswith("[1, 2, ")


def test_a_second_run_while_one_goes_is_refused_as_busy(runner):
    first = runner.request("run", language="python", code="import time\ntime.sleep(30)")
    refused = runner.reply(runner.request("run", language="python", code="print(1)"), "error")
    assert refused["code"] == "busy"
    runner.send({"op": "kill", "id": first})
    done = runner.reply(first, "exit")
    assert done["ended"] == "kill"


def test_a_nested_run_goes_beside_the_fresh_run_and_its_end_kills_only_its_own_tree(runner, workspace):
    # The outer run (a skill's body) waits for a file the nested run (its call) writes, then reports what it sees.
    outer_code = (
        "import os, time, subprocess\n"
        "helper = subprocess.Popen(['sleep', '60'])\n"
        "while not os.path.exists('from-nested.txt'):\n"
        "    time.sleep(0.02)\n"
        "time.sleep(0.3)\n"
        "print('helper alive' if helper.poll() is None else 'helper dead', open('from-nested.txt').read())\n"
    )
    outer = runner.request("run", language="python", code=outer_code, timeoutMs=20000)
    nested_code = (
        "import subprocess, sys\n"
        "subprocess.Popen(['sleep', '60'], start_new_session=False)\n"
        "open('from-nested.txt', 'w').write(sys.argv[0])\n"
    )
    nested = runner.request("run", language="python", code=nested_code, nested=True)
    done = runner.reply(nested, "exit")
    assert done["exitCode"] == 0 and done["leftovers"] == 1  # its own sleep, killed
    assert (workspace / "from-nested.txt").read_text() == "/run/switchyard/nested-%d.py" % nested
    outer_done = runner.reply(outer, "exit")
    assert outer_done["exitCode"] == 0
    assert runner.output(outer, 1) == b"helper alive /run/switchyard/nested-%d.py\n" % nested
    assert outer_done["leftovers"] == 1  # the outer run's own sleep, at its end


def test_a_nested_run_without_a_run_to_nest_in_is_refused_and_the_outer_end_ends_it(runner):
    refused = runner.reply(runner.request("run", language="python", code="print(1)", nested=True), "error")
    assert refused["code"] == "busy"
    outer = runner.request("run", language="bash", code="sleep 0.5")
    nested = runner.request("run", language="bash", code="echo started; sleep 30", nested=True)
    assert runner.reply(outer, "exit")["exitCode"] == 0
    done = runner.reply(nested, "exit")
    assert done["signal"] == "SIGKILL" and done["durationMs"] < 5000
    assert runner.output(nested, 1) == b"started\n"
    # Both ended: the next fresh run is not busy.
    assert runner.run("print(2)")[1] == b"2\n"


def test_a_run_for_another_workspace_is_refused(runner):
    refused = runner.reply(runner.request("run", language="python", code="print(1)", workspace=["1", "2"]), "error")
    assert refused["code"] == "workspace"
    assert refused["workspace"] == runner.workspace


def test_an_unknown_language_is_refused(runner):
    refused = runner.reply(runner.request("run", language="cobol", code="DISPLAY 'HI'."), "error")
    assert refused["message"] == "unknown language 'cobol'"


def test_a_run_takes_its_interpreter_from_the_request_when_given(runner):
    # The subprocess tier's box on the host's system names its interpreters: the run's argv starts with it.
    done, out, _ = runner.run("echo \"$BASH\"", language="bash", interpreter="/usr/bin/bash")
    assert done["exitCode"] == 0 and out == b"/usr/bin/bash\n"
    # Only an absolute path replaces the default.
    done, out, _ = runner.run("echo \"$BASH\"", language="bash", interpreter="bash")
    assert done["exitCode"] == 0 and out == b"/bin/bash\n"
