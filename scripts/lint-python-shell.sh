#!/usr/bin/env bash
# The lint of what ESLint and Prettier do not read (`npm run lint` runs it after them):
#   - Python: `ruff check` and `ruff format --check` (ruff.toml), with the ruff that scripts/python-tools.sh pins;
#   - shell: shellcheck over every *.sh the checkout has, and .ci/run (scripts/system-deps.sh test installs it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/python-tools.sh
ruff="${SWITCHYARD_RUNTIME_DIR:-$PWD/.runtime}/python-tools/bin/ruff"
"$ruff" check --quiet .
"$ruff" format --check --quiet .

if ! command -v shellcheck >/dev/null 2>&1; then
  echo "[lint] shellcheck not found: bash scripts/system-deps.sh test installs it (or: apt-get install shellcheck)" >&2
  exit 1
fi
# Tracked and new (not ignored) scripts: node_modules, dist and .runtime stay out.
mapfile -t scripts < <(git ls-files --cached --others --exclude-standard -- '*.sh' | sort -u)
shellcheck .ci/run "${scripts[@]}"
