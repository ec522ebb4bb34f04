"""runner_protocol: the runner's hello, ping and refusals, spoken to over its real stdin and stdout."""


def test_hello_says_the_protocol_and_that_no_oom_counter_is_readable_without_cgroups(runner):
    hello = runner.hello
    assert hello["protocol"] == 6
    assert hello["stateful"] is True
    assert hello["pid"] == 2  # bubblewrap's reaper is pid 1 of the sandbox's namespace
    assert hello["oomCounter"] is False  # no /sys here
    assert hello["python"].startswith("3.")


def test_ping_spawns_a_process_and_names_the_workspace(runner):
    pong = runner.reply(runner.request("ping"), "pong")
    assert pong["ok"] is True and pong["busy"] is False
    assert [str(v) for v in pong["workspace"]] == runner.workspace
    assert pong["ms"] >= 0


def test_an_unknown_op_is_refused_with_its_id_and_the_runner_goes_on(runner):
    refused = runner.reply(runner.request("launch_missiles"), "error")
    assert refused["message"] == "unknown op 'launch_missiles'"
    assert "code" not in refused
    assert runner.reply(runner.request("ping"), "pong")["ok"] is True


def test_a_line_that_is_not_json_is_refused_without_an_id(runner):
    runner.proc.stdin.write(b"{not json\n\n")
    runner.proc.stdin.flush()
    refused = runner.event(lambda m: m.get("ev") == "error")
    assert refused["id"] is None
    assert refused["message"].startswith("JSONDecodeError")


def test_a_request_split_across_writes_is_read_whole(runner):
    runner.proc.stdin.write(b'{"op": "pi')
    runner.proc.stdin.flush()
    runner.proc.stdin.write(b'ng", "id": 41}\n')
    runner.proc.stdin.flush()
    assert runner.reply(41, "pong")["ok"] is True


def test_closing_stdin_ends_the_runner_and_everything_it_started(runner):
    runner.reply(runner.request("proc_start", proc="p1", command="sleep 60"), "proc_started")
    runner.proc.stdin.close()
    assert runner.proc.wait(10) == 0
