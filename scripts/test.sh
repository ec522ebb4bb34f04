#!/usr/bin/env bash
# The whole test suite, as CI runs it: system dependencies, lint, type check, build, unit + e2e tests.
set -euo pipefail
cd "$(dirname "$0")/.."
node scripts/check-node.mjs
bash scripts/system-deps.sh test
npm run lint
npm run typecheck
npm run build
# The container tiers need a Docker engine (installed and started here when none answers) and the sandbox
# image (built offline with debootstrap the first time, then reused while its definition hash holds).
bash scripts/docker-engine.sh
node scripts/sandbox-image.mjs >/dev/null
npx jest --ci --selectProjects unit e2e "$@"
