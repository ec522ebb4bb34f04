#!/usr/bin/env bash
# The whole test suite, as CI runs it: system dependencies, lint, type check, build, unit + e2e tests.
set -euo pipefail
cd "$(dirname "$0")/.."
node scripts/check-node.mjs
bash scripts/system-deps.sh test
npm run lint
npm run typecheck
npm run build
npx jest --ci "$@"
