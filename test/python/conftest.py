"""Shared set-up of the Python tests: where the code under test lives, and the fixtures that run it for real.

Nothing here writes bytecode next to the code under test: docker/sandbox/ is hashed into the sandbox image's tag
(scripts/sandbox-image.mjs), so a __pycache__ there would change it.
"""

import os
import sys

sys.dont_write_bytecode = True

import pytest  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUNNER_DIR = os.path.join(REPO, "docker", "sandbox", "runner")
WORKSPACE_SRC = os.path.join(REPO, "libs", "workspace", "src")
sys.path.insert(0, RUNNER_DIR)

from runner_sandbox import RunnerSandbox  # noqa: E402


@pytest.fixture
def workspace(tmp_path):
    """The directory a sandboxed runner sees as /workspace."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def egress_dir(tmp_path):
    """The directory a sandboxed runner sees as /run/switchyard-egress (where the proxy's socket appears)."""
    path = tmp_path / "egress"
    path.mkdir()
    return path


@pytest.fixture
def runner(workspace, egress_dir):
    """The real runner (runner.py) in a bubblewrap sandbox of its own: a pid namespace (its cleanup kills every
    process it can see, so never on the host), no network but its own loopback, /workspace bound from `workspace`
    and /run/switchyard-egress from `egress_dir`."""
    sandbox = RunnerSandbox(RUNNER_DIR, workspace, egress_dir)
    yield sandbox
    sandbox.close()


@pytest.fixture
def relay_dir(tmp_path):
    """The directory a sandboxed runner sees as /run/switchyard-relay (where it listens on relay.sock)."""
    path = tmp_path / "relay"
    path.mkdir()
    return path


@pytest.fixture
def relay_runner(workspace, egress_dir, relay_dir):
    """`runner` with a relay directory, as a pooled container has it."""
    sandbox = RunnerSandbox(RUNNER_DIR, workspace, egress_dir, relay_dir)
    yield sandbox
    sandbox.close()


@pytest.fixture
def offline_runner(workspace):
    """The runner as the subprocess tier has it: no /run/switchyard-egress."""
    sandbox = RunnerSandbox(RUNNER_DIR, workspace)
    yield sandbox
    sandbox.close()


@pytest.fixture
def tree_tool():
    """libs/workspace/src/checkpoints/tree_tool.py, as `TreeTool` runs it (without its bubblewrap jail)."""
    from json_line_tool import JsonLineTool

    tool = JsonLineTool(os.path.join(WORKSPACE_SRC, "checkpoints", "tree_tool.py"))
    yield tool
    tool.close()


@pytest.fixture
def loop_helper():
    """libs/workspace/src/loop_host_helper.py, as `HelperLoopHost` runs it."""
    from json_line_tool import JsonLineTool

    tool = JsonLineTool(os.path.join(WORKSPACE_SRC, "loop_host_helper.py"))
    yield tool
    tool.close()
