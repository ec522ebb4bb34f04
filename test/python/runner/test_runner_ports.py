"""runner_ports: the box's listening TCP ports, and the kernel or process each belongs to."""

import socket
import time

from runner_ports import diag_listeners, owner_of, parse_proc_net, proc_net_listeners

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0
   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0 100 0 0 10 0
   2: 0100007F:1F40 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 4444 1 0 20 4 30 10 -1
"""
PROC_NET_TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when \
retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F41 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 \
00000000  1000        0 5151 1 0 100 0 0 10 0
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 \
00000000  1000        0 5252 1 0 100 0 0 10 0
"""


def listed(listeners):
    return sorted((s.port, s.address, s.inode) for s in listeners)


def test_proc_net_lines_in_listen_are_read_with_their_address_port_and_inode():
    # Little-endian words, as this machine writes them.
    assert listed(parse_proc_net(PROC_NET_TCP, socket.AF_INET)) == [(3000, "0.0.0.0", 4343), (8000, "127.0.0.1", 4242)]
    assert listed(parse_proc_net(PROC_NET_TCP6, socket.AF_INET6)) == [(80, "::", 5252), (8001, "::1", 5151)]


def test_socket_diagnostics_and_proc_net_agree_on_a_real_listener():
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::1", 0))
        s.listen()
        port = s.getsockname()[1]
        mine = ("::1", port)
        diag = {(x.address, x.port): x.inode for x in diag_listeners(socket.AF_INET6)}
        proc = {(x.address, x.port): x.inode for x in proc_net_listeners()}
        assert diag[mine] == proc[mine] > 0


def test_an_owner_is_the_first_known_leader_up_the_parent_chain_or_of_the_session():
    # pid -> (ppid, session): 10 leads a process's session; 12 descends from it; 20 left it by setsid but its chain
    # still reaches 10; 30 was orphaned to the runner (2) in a session of its own.
    table = {10: (2, 10), 11: (10, 10), 12: (11, 10), 20: (12, 20), 30: (2, 30), 2: (1, 1)}
    roots = {10: ("proc", "prc_a")}
    assert [owner_of(pid, roots, table.get) for pid in (10, 12, 20, 30, 99)] == [("proc", "prc_a")] * 3 + [None] * 2


def wait_for(runner, predicate):
    deadline = time.monotonic() + 10
    while True:
        ports = runner.reply(runner.request("ports"), "ports")["ports"]
        if predicate(ports) or time.monotonic() > deadline:
            return ports
        time.sleep(0.02)


def test_ports_lists_listeners_with_the_process_or_kernel_that_holds_them(runner):
    assert runner.reply(runner.request("ports"), "ports")["ports"] == []
    # A background process whose server is a grandchild in a session of its own.
    command = "setsid python3 -m http.server 8100 --bind 0.0.0.0 & wait"
    runner.reply(runner.request("proc_start", proc="prc_web", command=command, cwd="", env=ENV), "proc_started")
    runner.reply(runner.request("kernel_start", kernel="krn_py", language="python", env={}), "kernel_ready")
    code = "import socket\ns = socket.socket(socket.AF_INET6)\ns.bind(('::', 8200))\ns.listen()"
    request_id = runner.request("cell", kernel="krn_py", code=code, timeoutMs=10000, env={})
    assert runner.reply(request_id, "cell_done")["ok"] is True
    term = {"term": "trm_1", "cols": 80, "rows": 24, "env": ENV, "cwd": ""}
    command = "exec python3 -m http.server 8300 --bind 127.0.0.1"
    runner.reply(runner.request("term_open", command=command, **term), "term_started")
    ports = wait_for(runner, lambda p: len(p) == 3)
    assert ports == [
        {"port": 8100, "address": "0.0.0.0", "proc": "prc_web", "kernel": None},
        {"port": 8200, "address": "::", "proc": None, "kernel": "krn_py"},
        {"port": 8300, "address": "127.0.0.1", "proc": None, "kernel": None},  # a terminal's: neither
    ]
    opened = runner.reply(runner.request("tunnel_open", tunnel="tun_k", port=8200))
    assert opened["ev"] == "tunnel_opened" and opened["kernel"] == "krn_py" and opened["proc"] is None
    runner.reply(runner.request("proc_signal", proc="prc_web", signal="KILL"), "ack")
    assert wait_for(runner, lambda p: len(p) == 2)[0]["port"] == 8200
