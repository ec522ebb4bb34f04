#!/usr/bin/env bash
# The outside tools that check the engine's OpenAPI document (test/e2e/contract.e2e-spec.ts):
#   - openapi-spec-validator and Schemathesis, from PyPI, in a venv at $SWITCHYARD_RUNTIME_DIR/contract-venv
#     (default <repo>/.runtime/contract-venv);
#   - Redocly's CLI (`redocly lint`), an npm devDependency pinned in package.json (`npm ci` installs it).
#
#   bash scripts/contract-tools.sh   # install what is missing (idempotent; quick when all is there)
#
# Versions are pinned here, with every package they pull in (CONSTRAINTS), so a new release of a dependency cannot
# change what CI checks. A venv that already holds the pinned versions is left alone; one that does not (other
# versions, a Python upgrade broke it) is rebuilt from scratch.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
VENV="$RUNTIME_DIR/contract-venv"
PYTHON="${SWITCHYARD_CONTRACT_PYTHON:-python3}"

OPENAPI_SPEC_VALIDATOR_VERSION=0.7.1
SCHEMATHESIS_VERSION=4.32.5
REDOCLY_VERSION=2.77.0 # must match package.json's devDependency

# `pip freeze` of a venv holding exactly the two tools above (Python 3.11).
CONSTRAINTS="
anyio==4.16.0
attrs==26.1.0
certifi==2026.10.19.post1
charset-normalizer==3.5.2
click==8.5.1
graphql-core==3.3.2
harfile==0.6.0
hypothesis==6.170.17
hypothesis-graphql==0.13.5
idna==3.20
iniconfig==2.3.1
jsonschema==4.26.0
jsonschema-path==0.3.4
jsonschema-specifications==2025.9.1
jsonschema_rs==0.60.3
lazy-object-proxy==1.13.0
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mdurl==0.1.2
openapi-schema-validator==0.6.3
packaging==26.3
pathable==0.4.4
pluggy==1.7.0
Pygments==2.21.0
pyrate-limiter==4.5.1
pytest==9.2.0
PyYAML==6.0.4
referencing==0.36.2
requests==2.34.2
rfc3339-validator==0.1.4
rich==15.0.0
rpds-py==2026.9.1
six==1.17.0
sortedcontainers==2.4.0
typing_extensions==4.16.0
urllib3==2.8.0
Werkzeug==3.1.9
"

# shellcheck source=scripts/pinned-venv.sh
. "$REPO/scripts/pinned-venv.sh"
pinned_venv contract-tools "$VENV" "$PYTHON" "openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VERSION schemathesis==$SCHEMATHESIS_VERSION" "$CONSTRAINTS"

die() {
  printf '[contract-tools] ERROR: %s\n' "$*" >&2
  exit 1
}

# Redocly comes with `npm ci`; a checkout whose node_modules predates the devDependency needs `npm install`.
redocly="$REPO/node_modules/.bin/redocly"
[[ -x "$redocly" ]] || die "no $redocly: run npm ci (package.json pins @redocly/cli $REDOCLY_VERSION)"
installed="$(node -p "require('$REPO/node_modules/@redocly/cli/package.json').version")"
[[ "$installed" == "$REDOCLY_VERSION" ]] ||
  die "node_modules holds @redocly/cli $installed, not $REDOCLY_VERSION: run npm ci"
