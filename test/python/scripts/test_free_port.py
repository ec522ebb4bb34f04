"""scripts/free_port.py: a free port on 127.0.0.1 for a local daemon, outside the kernel's ephemeral range."""

import importlib.util
import os
import socket
import subprocess
import sys

import pytest

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "free_port.py")
spec = importlib.util.spec_from_file_location("free_port", PATH)
free_port = importlib.util.module_from_spec(spec)
spec.loader.exec_module(free_port)


class Picks:
    """An rng whose randrange gives the indexes of `ports` in the candidates, in order, then the real rng's."""

    def __init__(self, ports, low, high):
        below, above = free_port.candidates(low, high)
        self.indexes = [below.index(p) if p in below else len(below) + above.index(p) for p in ports]

    def randrange(self, n):
        return self.indexes.pop(0) if self.indexes else free_port.random.randrange(n)


def test_the_port_is_free_and_outside_this_machines_ephemeral_range():
    low, high = free_port.ephemeral_range()
    for _ in range(20):
        port = free_port.free_port()
        assert not low <= port <= high and port > 1024
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_passed_over():
    low, high = 32768, 60999
    port = free_port.free_port(ephemeral=(low, high))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        other = free_port.free_port(ephemeral=(low, high), rng=Picks([port], low, high))
        assert other != port and free_port.is_free(other) and not free_port.is_free(port)


def test_ports_already_given_are_not_given_again():
    low, high = 32768, 60999
    first = free_port.free_port(ephemeral=(low, high))
    second = free_port.free_port([first], ephemeral=(low, high), rng=Picks([first], low, high))
    assert second != first and not low <= second <= high


def test_with_no_room_outside_the_range_it_takes_the_kernels():
    taken = {free_port.kernel_port() for _ in range(5)}
    port = free_port.free_port(taken, ephemeral=(1025, 65535))
    assert port not in taken and free_port.is_free(port)


def test_the_range_is_read_from_the_kernel_or_linux_default(tmp_path):
    good = tmp_path / "range"
    good.write_text("40000\t50000\n")
    assert free_port.ephemeral_range(str(good)) == (40000, 50000)
    bad = tmp_path / "bad"
    bad.write_text("nonsense\n")
    assert free_port.ephemeral_range(str(bad)) == (32768, 60999)
    assert free_port.ephemeral_range(str(tmp_path / "absent")) == (32768, 60999)
    assert free_port.candidates(40000, 50000) == (range(23616, 40000), range(50001, 65536))
    assert free_port.candidates(2000, 60999) == (range(1025, 2000), range(61000, 65536))


def test_the_command_line(capsys):
    assert free_port.main(["1", "2"]) == 0
    assert int(capsys.readouterr().out) not in (1, 2)
    assert free_port.main(["x"]) == 2
    assert "usage" in capsys.readouterr().err


@pytest.mark.parametrize("taken", [[], [20000, 30000]])
def test_it_runs_as_a_script(taken):
    out = subprocess.run([sys.executable, PATH, *map(str, taken)], capture_output=True, text=True, check=True).stdout
    assert int(out) not in taken and 1024 < int(out) < 65536
