#!/usr/bin/env bash
# Sourced by the scripts that install pinned Python tools from PyPI into a venv of their own (python-tools.sh,
# contract-tools.sh, client-tools.sh). It defines one function:
#
#   pinned_venv LABEL VENV PYTHON "TOOLS" "CONSTRAINTS"
#
# TOOLS: "name==version …", the tools wanted; CONSTRAINTS: the `pip freeze` of a venv holding exactly them (every
# package they pull in, pinned), so a new release of a dependency cannot change what they check. A venv that runs
# and holds every tool at its pinned version is left alone ("present"); any other (other versions, a Python upgrade
# broke it) is rebuilt from scratch. Messages and errors are prefixed with [LABEL]; an error exits 1.

pinned_venv() {
  local label=$1 venv=$2 python=$3 tools=$4 constraints=$5
  pv_say() { printf '[%s] %s\n' "$label" "$*" >&2; }
  pv_die() {
    printf '[%s] ERROR: %s\n' "$label" "$*" >&2
    exit 1
  }
  # Exit 0 when the venv runs and holds every tool at its pinned version.
  pv_ready() {
    [[ -x "$venv/bin/python" ]] || return 1
    # shellcheck disable=SC2086 # one argument per pinned tool
    "$venv/bin/python" - $tools <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
sys.exit(0 if all(version(n) == v for n, v in (a.split("==") for a in sys.argv[1:])) else 1)
PY
  }
  # Debian's python3 makes venvs only with python3-venv (ensurepip): installed here when root (as in system-deps.sh).
  pv_make() {
    if "$python" -m venv "$venv" 2>/dev/null; then
      return 0
    fi
    rm -rf "$venv"
    if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
      pv_say "installing python3-venv"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null
      apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
      "$python" -m venv "$venv" && return 0
    fi
    pv_die "cannot create a venv with $python (install python3-venv: sudo apt-get install -y python3-venv)"
  }

  if pv_ready; then
    pv_say "present: $tools"
    return 0
  fi
  command -v "$python" >/dev/null 2>&1 || pv_die "$python not found (scripts/system-deps.sh test installs python3)"
  pv_say "installing $tools"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  pv_make
  local file
  file="$(mktemp)"
  printf '%s\n' "$constraints" >"$file"
  # shellcheck disable=SC2086 # one argument per pinned tool
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --constraint "$file" $tools >&2; then
    rm -f "$file"
    rm -rf "$venv"
    pv_die "pip could not install $tools (see above)"
  fi
  rm -f "$file"
  pv_ready || pv_die "the venv at $venv does not hold the pinned versions after installing"
}
