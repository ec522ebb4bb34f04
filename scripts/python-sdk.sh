#!/usr/bin/env bash
# The Python SDK (packages/python, importable as `switchyard`) as CI ships and tests it, under
# $SWITCHYARD_RUNTIME_DIR (default <repo>/.runtime):
#   - python-sdk-build/: a venv with the pinned build tools (hatchling, build);
#   - python-sdk/dist/switchyard-<version>-py3-none-any.whl: the wheel, built offline (`--no-isolation`: the backend
#     comes from that venv, not from PyPI at build time);
#   - python-sdk/wheelhouse/: the wheel and every wheel it and its adapters need (httpx, openai-agents,
#     langchain-core and what they pull in, pinned), so test/e2e/python-sdk.e2e-spec.ts installs it into a fresh
#     venv with `pip install --no-index --find-links` (offline), as a user without PyPI would;
#   - python-sdk-venv/: pytest, mypy, openai-agents and langchain-core, pinned: the SDK's unit tests, its type check
#     and the bench driver.
#
#   bash scripts/python-sdk.sh            # build the wheel, fill the wheelhouse and the venvs (idempotent; quick when there)
#   bash scripts/python-sdk.sh test -q    # the same, then `mypy --strict` of the package (type hints throughout: it
#                                         # ships py.typed) and its unit tests (packages/python/tests; pytest args follow)
#
# The wheelhouse is downloaded once per set of pins and Python version (a stamp file says which); the wheel is rebuilt
# every time (about a second), so it always holds the checkout's sources.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
PYTHON="${SWITCHYARD_CLIENT_PYTHON:-python3}"
OUT="$RUNTIME_DIR/python-sdk"
BUILD_VENV="$RUNTIME_DIR/python-sdk-build"
TEST_VENV="$RUNTIME_DIR/python-sdk-venv"

BUILD_TOOLS="hatchling==1.33.0 build==1.6.1"
# `pip freeze` of a venv holding exactly the build tools (Python 3.11).
BUILD_CONSTRAINTS="
build==1.6.1
hatchling==1.33.0
packaging==26.4
pathspec==1.1.1
pluggy==1.7.0
pyproject_hooks==1.3.3
tomlkit==0.15.2
trove-classifiers==2026.9.21.13
"

# The runtime dependency and the adapters' frameworks, as the wheelhouse and the test venv hold them.
RUNTIME_PINS="httpx==0.28.1 openai-agents==0.24.0 langchain-core==1.8.3"
TEST_TOOLS="pytest==9.2.0 mypy==2.4.1 $RUNTIME_PINS"
# `pip freeze` of a venv holding exactly the test tools (Python 3.11).
TEST_CONSTRAINTS="
annotated-types==0.8.0
anyio==4.16.0
ast_serialize==0.13.1
attrs==26.1.0
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
click==8.5.1
cryptography==50.0.2
distro==1.9.0
griffelib==2.4.1
h11==0.16.0
httpcore==1.0.9
httpcore2==2.16.2
httpx==0.28.1
httpx2==2.16.2
idna==3.20
iniconfig==2.3.1
jiter==0.19.0
jsonpatch==1.48
jsonpointer==3.12
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
langchain-core==1.8.3
langchain-protocol==0.0.20
langsmith==0.15.1
librt==0.17.0
mcp==2.3.0
mcp-types==2.3.0
mypy==2.4.1
mypy_extensions==1.2.0
openai==3.57.0
openai-agents==0.24.0
opentelemetry-api==1.45.2
orjson==3.13.0
packaging==26.4
pathspec==1.1.1
pluggy==1.7.0
pycparser==3.12
pydantic==2.14.4
pydantic_core==2.50.5
Pygments==2.21.0
PyJWT==2.15.1
pytest==9.2.0
python-multipart==0.0.34
PyYAML==6.0.4
referencing==0.37.0
requests==2.34.2
requests-toolbelt==1.0.0
rpds-py==2026.9.1
sniffio==1.3.1
sse-starlette==3.7.0
starlette==1.10.0
tenacity==9.2.1
truststore==0.10.5
typing-inspection==0.4.5
typing_extensions==4.16.0
urllib3==2.8.0
uuid_utils==0.19.0
uvicorn==0.54.0
websockets==16.1.1
xxhash==4.1.0
zstandard==0.25.0
"

say() { printf '[python-sdk] %s\n' "$*" >&2; }

# shellcheck source=scripts/pinned-venv.sh
. "$REPO/scripts/pinned-venv.sh"
pinned_venv python-sdk-build "$BUILD_VENV" "$PYTHON" "$BUILD_TOOLS" "$BUILD_CONSTRAINTS"
pinned_venv python-sdk-venv "$TEST_VENV" "$PYTHON" "$TEST_TOOLS" "$TEST_CONSTRAINTS"

# The wheel, from the sources as they are (the build writes nothing into packages/python but the wheel's output).
rm -rf "$OUT/dist"
mkdir -p "$OUT/dist" "$OUT/wheelhouse"
PYTHONDONTWRITEBYTECODE=1 "$BUILD_VENV/bin/python" -m build --wheel --no-isolation --outdir "$OUT/dist" \
  "$REPO/packages/python" >"$OUT/build.log" 2>&1 || {
  cat "$OUT/build.log" >&2
  say "ERROR: the wheel did not build (above)"
  exit 1
}
wheel="$(find "$OUT/dist" -name 'switchyard-*.whl' -print -quit)"
[[ -n "$wheel" ]] || {
  say "ERROR: no wheel in $OUT/dist"
  exit 1
}

# The dependencies' wheels: fetched when the pins or the Python version changed, else reused (offline from then on).
stamp="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') $RUNTIME_PINS $(printf '%s' "$TEST_CONSTRAINTS" | sha256sum | cut -c1-16)"
if [[ "$(cat "$OUT/wheelhouse/.stamp" 2>/dev/null)" != "$stamp" ]]; then
  say "downloading $RUNTIME_PINS and their dependencies into $OUT/wheelhouse"
  rm -rf "$OUT/wheelhouse"
  mkdir -p "$OUT/wheelhouse"
  constraints="$(mktemp)"
  printf '%s\n' "$TEST_CONSTRAINTS" >"$constraints"
  # shellcheck disable=SC2086 # one argument per pin
  if ! "$TEST_VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-input \
    --only-binary=:all: --constraint "$constraints" --dest "$OUT/wheelhouse" $RUNTIME_PINS >&2; then
    rm -f "$constraints"
    say "ERROR: pip could not download $RUNTIME_PINS (see above)"
    exit 1
  fi
  rm -f "$constraints"
  printf '%s\n' "$stamp" >"$OUT/wheelhouse/.stamp"
fi
rm -f "$OUT"/wheelhouse/switchyard-*.whl
cp "$wheel" "$OUT/wheelhouse/"
say "wheel: $OUT/wheelhouse/$(basename "$wheel")"

if [[ "${1:-}" == "test" ]]; then
  shift
  cd "$REPO/packages/python"
  # The oldest Python it supports (pyproject.toml), so 3.11-only code fails here.
  "$TEST_VENV/bin/mypy" --strict --python-version 3.10 --cache-dir "$RUNTIME_DIR/mypy-cache" src/switchyard
  PYTHONDONTWRITEBYTECODE=1 exec "$TEST_VENV/bin/pytest" -c pyproject.toml --rootdir . "$@"
fi
