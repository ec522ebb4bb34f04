"""runner_terms: shells on pseudo-terminals, their size, input, ^C, hang-up and end."""

import base64
import re
import time

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm-256color", "HOME": "/workspace"}


def open_term(runner, term, cols=80, rows=24, command=None, cwd="", env=None):
    fields = {"term": term, "cols": cols, "rows": rows, "env": ENV if env is None else env, "cwd": cwd}
    if command is not None:
        fields["command"] = command
    return runner.reply(runner.request("term_open", **fields))


def type_in(runner, term, text):
    request_id = runner.request("term_write", term=term, data=base64.b64encode(text.encode()).decode())
    return runner.reply(request_id, "ack")


def screen(runner, term, until, timeout=10.0):
    """What the terminal wrote (the `tout` events taken off the backlog) once `until` (a regex) shows in it."""
    out = b""
    deadline = time.monotonic() + timeout
    while True:
        mine = [m for m in runner.backlog if m.get("ev") == "tout" and m.get("term") == term]
        runner.backlog = [m for m in runner.backlog if m not in mine]
        out += b"".join(base64.b64decode(m["data"]) for m in mine)
        if re.search(until, out.decode("utf-8", "replace")):
            return out.decode("utf-8", "replace")
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("%r never showed; the terminal wrote %r" % (until, out))
        try:
            runner.backlog.append(runner.read_line(time.monotonic() + min(left, 0.2)))
        except TimeoutError:
            pass


def ended(runner, term):
    return runner.event(lambda m: m.get("ev") == "texit" and m.get("term") == term)


def test_a_command_sees_the_window_size_and_its_status_is_reported(runner):
    started = open_term(runner, "t1", cols=100, rows=30, command="stty size; tput cols; exit 3")
    assert started["ev"] == "term_started" and started["term"] == "t1" and started["pid"] > 2
    done = ended(runner, "t1")
    # All of its output comes before its end.
    assert screen(runner, "t1", "100") == "30 100\r\n100\r\n"
    assert done == {"ev": "texit", "term": "t1", "exitCode": 3, "signal": None}


def test_a_login_shell_follows_a_resize_and_keeps_its_state(runner, workspace):
    (workspace / "sub").mkdir()
    assert open_term(runner, "t1", cwd="sub")["ev"] == "term_started"
    type_in(runner, "t1", "X=4$((1+1)); echo at-$PWD\r")
    assert "at-/workspace/sub" in screen(runner, "t1", r"at-/workspace/sub\r\n")
    ack = runner.reply(runner.request("term_resize", term="t1", cols=120, rows=40), "ack")
    assert ack["found"] is True
    type_in(runner, "t1", "echo size-$(tput cols)x$(tput lines) x-$X\r")
    assert "size-120x40 x-42" in screen(runner, "t1", r"size-\d+x\d+ x-42\r\n")
    type_in(runner, "t1", "exit\r")
    assert ended(runner, "t1")["exitCode"] == 0


def test_ctrl_c_interrupts_the_foreground_command_and_the_shell_goes_on(runner):
    open_term(runner, "t1")
    # The job itself says it runs (then it is the terminal's foreground job: ^C typed before would reach the shell).
    type_in(runner, "t1", "sh -c 'echo $((40+2))go; exec sleep 100'\r")
    screen(runner, "t1", r"42go\r\n")
    t = time.monotonic()
    type_in(runner, "t1", "\x03")
    type_in(runner, "t1", "echo status=$?\r")
    assert "status=130" in screen(runner, "t1", r"status=\d+\r\n")
    assert time.monotonic() - t < 5


def test_a_full_screen_program_draws_and_reads_keys(runner, workspace):
    (workspace / "app.py").write_text(
        "import curses\n"
        "def main(win):\n"
        "    h, w = win.getmaxyx()\n"
        "    win.addstr(5, 10, 'SIZE %dx%d' % (w, h))\n"
        "    win.refresh()\n"
        "    key = win.getkey()\n"
        "    return key\n"
        "print('got', curses.wrapper(main))\n"
    )
    open_term(runner, "t1", cols=90, rows=20, command="python3 app.py")
    drawn = screen(runner, "t1", "SIZE 90x20")
    assert "\x1b[?1049h" in drawn  # the alternate screen of xterm
    assert "\x1b[6;11H" in drawn  # row 5, column 10 (1-based on the wire)
    type_in(runner, "t1", "q")
    assert "got q" in screen(runner, "t1", "got q")
    assert ended(runner, "t1")["exitCode"] == 0


def test_close_hangs_up_the_shell_and_its_jobs(runner):
    open_term(runner, "t1")
    type_in(runner, "t1", "sleep 100 & echo job-$((1+1))\r")
    screen(runner, "t1", r"job-2\r\n")
    assert runner.reply(runner.request("term_close", term="t1"), "ack")["found"] is True
    done = ended(runner, "t1")
    assert done["signal"] == "SIGHUP" and done["exitCode"] is None
    _, out, _ = runner.run("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert out == b"3\n"  # bwrap's reaper, the runner and this run: the job is gone too
    assert runner.reply(runner.request("term_close", term="t1"), "ack")["found"] is False


def test_a_shell_hung_up_as_it_reads_its_next_line_still_ends_by_the_hang_up(runner):
    # bash can take a SIGHUP just before readline blocks in read(); the signal is then only seen with the next input.
    # Without a second hang-up, 4 of 150 closes here ended by the SIGKILL a second later.
    endings = {}
    for i in range(40):
        term = "t%d" % i
        open_term(runner, term)
        type_in(runner, term, "echo at-$((i=%d+1))\r" % i)
        screen(runner, term, r"at-%d\r\n" % (i + 1))
        runner.reply(runner.request("term_close", term=term), "ack")
        signal = ended(runner, term)["signal"]
        endings[signal] = endings.get(signal, 0) + 1
    assert endings == {"SIGHUP": 40}


def test_a_shell_that_ignores_the_hang_up_is_killed_a_second_later(runner):
    open_term(runner, "t1", command="trap '' HUP; echo ready-$((2+2)); while :; do sleep 1; done")
    screen(runner, "t1", r"ready-4\r\n")
    t = time.monotonic()
    runner.reply(runner.request("term_close", term="t1"), "ack")
    assert ended(runner, "t1")["signal"] == "SIGKILL"
    assert 0.9 < time.monotonic() - t < 5


def test_what_a_terminal_leaves_running_dies_with_it(runner):
    open_term(runner, "t1", command="setsid sleep 100 & sleep 100 & echo left-$((3+3))")
    screen(runner, "t1", r"left-6")
    assert ended(runner, "t1")["exitCode"] == 0
    _, out, _ = runner.run("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert out == b"3\n"


def test_a_terminal_survives_a_fresh_run(runner):
    open_term(runner, "t1")
    type_in(runner, "t1", "echo one-$((0+1))\r")
    screen(runner, "t1", r"one-1\r\n")
    done, _, _ = runner.run("print('fresh')")
    assert done["leftovers"] == 0
    type_in(runner, "t1", "echo two-$((1+1))\r")
    screen(runner, "t1", r"two-2\r\n")


def test_terminal_refusals_and_the_limit(runner):
    assert open_term(runner, "t0", cwd="../..")["code"] == "cwd"
    refused = runner.reply(runner.request("term_open", term="t0", cols=80, rows=24, env=ENV, workspace=["1", "2"]))
    assert refused["code"] == "workspace"
    bad = runner.reply(runner.request("term_open", term="t0", cols=0, rows=24, env=ENV))
    assert bad["message"] == "cols must be an integer from 1 to 1000" and "code" not in bad
    for n in range(16):
        assert open_term(runner, "t%d" % n, command="sleep 100")["ev"] == "term_started"
    assert open_term(runner, "t0", command="true")["code"] == "exists"
    refused = open_term(runner, "t16", command="true")
    assert refused["code"] == "term_limit" and refused["message"] == "this box has 16 terminals, the most it may"
    for op, fields in (("term_write", {"data": ""}), ("term_resize", {"cols": 1, "rows": 1}), ("term_close", {})):
        assert runner.reply(runner.request(op, term="nope", **fields), "ack")["found"] is False
