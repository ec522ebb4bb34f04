#!/usr/bin/env bash
# The peers `bench/peers.ts` measures Switchyard against, pinned, in a venv of their own under
# $SWITCHYARD_RUNTIME_DIR (default <repo>/.runtime)/peers-venv: epicbox 1.1.0 (which needs urllib3 < 2 with the
# Docker SDK it uses) and llm-sandbox with its Docker backend. `bench/peers_driver.py` runs in it.
#
#   bash scripts/peers-venv.sh     # idempotent: quick when the venv holds these versions
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
# shellcheck source=scripts/pinned-venv.sh
source "$REPO/scripts/pinned-venv.sh"

TOOLS="epicbox==1.1.0 llm-sandbox==0.3.46 docker==7.2.0 urllib3==1.26.20"
# `pip freeze` of a venv holding exactly the tools (Python 3.11), with llm-sandbox's `docker` extra.
CONSTRAINTS="
annotated-types==0.8.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
docker==7.2.0
epicbox==1.1.0
idna==3.20
llm-sandbox==0.3.46
pydantic==2.14.4
pydantic_core==2.50.5
python-dateutil==2.9.0.post0
requests==2.34.2
six==1.17.0
structlog==26.1.0
typing-inspection==0.4.5
typing_extensions==4.16.0
urllib3==1.26.20
"

pinned_venv peers "$RUNTIME_DIR/peers-venv" "${SWITCHYARD_CLIENT_PYTHON:-python3}" "$TOOLS" "$CONSTRAINTS"
