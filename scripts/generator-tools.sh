#!/usr/bin/env bash
# The outside client generators test/e2e/generated-clients.e2e-spec.ts runs on the engine's OpenAPI document
# (/docs-json), from PyPI, in a venv at $SWITCHYARD_RUNTIME_DIR/generator-venv (default <repo>/.runtime/generator-venv):
#   - openapi-python-client: generates a Python client package (attrs models, httpx calls); the package it makes
#     needs httpx, attrs and python-dateutil at run time, here too so the e2e can import and call it;
#   - datamodel-code-generator: generates pydantic models from the document's schemas.
# (openapi-typescript, the third generator, is a devDependency: npm ci installs it.)
#
#   bash scripts/generator-tools.sh   # install what is missing (idempotent; quick when all is there)
#
# Versions are pinned here, with every package they pull in (CONSTRAINTS), so a new release of a dependency cannot
# change what CI checks. A venv that already holds the pinned versions is left alone; one that does not is rebuilt.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
VENV="$RUNTIME_DIR/generator-venv"
PYTHON="${SWITCHYARD_GENERATOR_PYTHON:-python3}"

TOOLS="openapi-python-client==0.29.1 datamodel-code-generator==0.89.0 python-dateutil==4.0.0"

# `pip freeze` of a venv holding exactly the tools above (Python 3.11).
CONSTRAINTS="
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
argcomplete==3.7.2
attrs==26.1.0
black==26.10.1
certifi==2026.10.19.post1
click==8.5.1
datamodel-code-generator==0.89.0
genson==1.4.0
h11==0.16.0
httpcore==1.0.9
httpx==0.28.1
idna==3.20
inflect==7.6.0
isort==8.0.1
jaraco.functools==4.6.0
Jinja2==3.1.6
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mdurl==0.1.2
more-itertools==11.2.1
mypy_extensions==1.2.0
openapi-python-client==0.29.1
packaging==26.4
pathspec==1.1.1
platformdirs==4.14.8
pydantic==2.14.4
pydantic_core==2.50.5
Pygments==2.21.0
python-dateutil==4.0.0
pytokens==0.4.1
PyYAML==6.0.4
rich==15.0.0
ruamel.yaml==0.19.1
ruff==0.17.6
shellingham==1.5.4
typeguard==4.6.1
typer==0.27.3
typing-inspection==0.4.5
typing_extensions==4.16.0
tzdata==2026.6
"

# shellcheck source=scripts/pinned-venv.sh
. "$REPO/scripts/pinned-venv.sh"
pinned_venv generator-tools "$VENV" "$PYTHON" "$TOOLS" "$CONSTRAINTS"
