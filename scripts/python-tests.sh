#!/usr/bin/env bash
# The Python tests (test/python/: the sandbox runner, the egress forwarder, the workspace tools, the scripts' helpers),
# with the pytest that scripts/python-tools.sh pins. `npm test` runs them; extra arguments go to pytest (`-k kernels`,
# `-x`).
#
# The runner's own tests start it in a bubblewrap sandbox with its own pid namespace (bwrap, from
# scripts/system-deps.sh): its cleanup kills every process it can see. No bytecode is written (docker/sandbox/ is
# hashed into the sandbox image's tag) and no .pytest_cache (test/python/pytest.ini).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/python-tools.sh
export PYTHONDONTWRITEBYTECODE=1
pytest="${SWITCHYARD_RUNTIME_DIR:-$PWD/.runtime}/python-tools/bin/pytest"
# From test/python itself: pytest reads `testpaths` only when run from its rootdir, and from the repository's root it
# would collect every test_*.py of the checkout (packages/python/tests are the SDK's, run by scripts/python-sdk.sh).
cd test/python
exec "$pytest" -c pytest.ini --rootdir . "$@"
