#!/usr/bin/env bash
# The tools that check the repository's Python (ruff.toml, test/python/): ruff and pytest, from PyPI, in a venv at
# $SWITCHYARD_RUNTIME_DIR/python-tools (default <repo>/.runtime/python-tools).
#
#   bash scripts/python-tools.sh   # install what is missing (idempotent; quick when all is there)
#
# Versions are pinned here, with every package they pull in (CONSTRAINTS), so a new release cannot change what lint
# and tests check. A venv that already holds the pinned versions is left alone; one that does not (other versions, a
# Python upgrade broke it) is rebuilt from scratch (scripts/pinned-venv.sh, as for the contract and client tools).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
VENV="$RUNTIME_DIR/python-tools"
PYTHON="${SWITCHYARD_PYTHON_TOOLS_PYTHON:-python3}"

RUFF_VERSION=0.17.6
PYTEST_VERSION=9.2.0

# `pip freeze` of a venv holding exactly the two tools above (Python 3.11).
CONSTRAINTS="
iniconfig==2.3.1
packaging==26.4
pluggy==1.7.0
Pygments==2.21.0
"

# shellcheck source=scripts/pinned-venv.sh
. "$REPO/scripts/pinned-venv.sh"
pinned_venv python-tools "$VENV" "$PYTHON" "ruff==$RUFF_VERSION pytest==$PYTEST_VERSION" "$CONSTRAINTS"
