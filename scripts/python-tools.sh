#!/usr/bin/env bash
# The tools that check the repository's Python (ruff.toml, test/python/): ruff and pytest, from PyPI, in a venv at
# $SWITCHYARD_RUNTIME_DIR/python-tools (default <repo>/.runtime/python-tools).
#
#   bash scripts/python-tools.sh   # install what is missing (idempotent; quick when all is there)
#
# Versions are pinned here, with every package they pull in (CONSTRAINTS), so a new release cannot change what lint
# and tests check. A venv that already holds the pinned versions is left alone; one that does not (other versions, a
# Python upgrade broke it) is rebuilt from scratch. The same pattern as scripts/contract-tools.sh.
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

say() { printf '[python-tools] %s\n' "$*" >&2; }
die() {
  printf '[python-tools] ERROR: %s\n' "$*" >&2
  exit 1
}

# Exit 0 when the venv runs and holds both tools at the pinned versions.
venv_ready() {
  [[ -x "$VENV/bin/python" && -x "$VENV/bin/ruff" && -x "$VENV/bin/pytest" ]] || return 1
  "$VENV/bin/python" - "$RUFF_VERSION" "$PYTEST_VERSION" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
sys.exit(0 if (version("ruff"), version("pytest")) == tuple(sys.argv[1:3]) else 1)
EOF
}

# Debian's python3 makes venvs only with python3-venv (ensurepip): installed here when root (as in system-deps.sh).
make_venv() {
  if "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    return 0
  fi
  rm -rf "$VENV"
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing python3-venv"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    "$PYTHON" -m venv "$VENV" && return 0
  fi
  die "cannot create a venv with $PYTHON (install python3-venv: sudo apt-get install -y python3-venv)"
}

if venv_ready; then
  say "present: ruff $RUFF_VERSION, pytest $PYTEST_VERSION"
else
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (scripts/system-deps.sh test installs python3)"
  say "installing ruff $RUFF_VERSION, pytest $PYTEST_VERSION"
  rm -rf "$VENV"
  mkdir -p "$RUNTIME_DIR"
  make_venv
  constraints="$(mktemp)"
  trap 'rm -f "$constraints"' EXIT
  printf '%s\n' "$CONSTRAINTS" >"$constraints"
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --constraint "$constraints" "ruff==$RUFF_VERSION" "pytest==$PYTEST_VERSION" >&2; then
    rm -rf "$VENV"
    die "pip could not install the Python tools (see above)"
  fi
  venv_ready || die "the venv at $VENV does not hold the pinned versions after installing"
fi
