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
# The Neo4j store's tests need a Neo4j: a throwaway embedded Community 5.26 on 127.0.0.1 from
# test/neo4j-launcher (built with Maven the first time; jars cached in ~/.m2). Reused when one already runs;
# otherwise started on an empty data dir here and stopped, its data removed, when the tests end.
if ! bash scripts/neo4j.sh status >/dev/null 2>&1; then
  bash scripts/neo4j.sh clean
  trap 'bash scripts/neo4j.sh clean' EXIT
  bash scripts/neo4j.sh start >/dev/null
fi
# The OpenAPI document is checked by tools nobody here wrote (test/e2e/contract.e2e-spec.ts):
# openapi-spec-validator and Schemathesis, pinned, go into a venv under .runtime/ the first time (quick once
# there); Redocly's CLI is a devDependency, installed by npm ci.
bash scripts/contract-tools.sh
npx jest --ci --selectProjects unit e2e "$@"
