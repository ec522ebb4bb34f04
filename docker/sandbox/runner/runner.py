#!/usr/bin/env python3
"""Switchyard runner (protocol 6): the main process of a pooled container and of a session's stateful sandbox.

Started as `python3 -I /opt/switchyard/runner/runner.py`, it speaks JSON lines with the engine on its stdin and
stdout: fresh runs, kernels that keep state between cells, background processes, terminals, tunnels to the box's
ports and the list of those ports (README.md documents the protocol). Python 3 stdlib only. The work is done by the
modules beside this file:

  runner_protocol.py   the protocol and the main loop (one selector for everything), ping
  runner_runs.py       fresh runs
  runner_kernels.py    kernels (kernel_python.py, kernel_node.js, kernel_bash.sh run inside them)
  runner_cells.py      a cell, from its request to its outcome
  runner_languages.py  what differs per kernel language
  runner_procs.py      background processes
  runner_terms.py      terminals (a shell on a pseudo-terminal)
  runner_tunnels.py    tunnels: the engine's TCP connections to a port inside the box
  runner_ports.py      the listening ports, and which process or kernel each belongs to
  runner_resync.py     a new engine taking over a live runner (its kernels and processes kept)
  runner_streams.py    output caps, and a cell's boundaries in a kernel's output
  runner_trees.py      process trees, and killing them
  runner_egress.py     keeps egress_forwarder.py (127.0.0.1:3128 -> the session's egress proxy) running
  runner_channels.py   back channels: the box's egress and call sockets carried to the engine as tunnels
  runner_spawn.py      the workspace check, starting user code, cgroup counters

The runner shares its uid with the code it runs, so it is not a security boundary inside a session: the container
(or the bubblewrap sandbox) is. It makes itself non-dumpable so the code cannot ptrace it or open its pipes through
/proc; code that kills it only loses its own sandbox, which the engine then replaces.
"""

import os
import sys

# -I leaves this directory out of sys.path. The image's directory is read-only: its modules are compiled when the
# image is built (scripts/sandbox-image.mjs), and nothing is written there at run time.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from runner_protocol import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
