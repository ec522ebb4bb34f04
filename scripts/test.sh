#!/usr/bin/env bash
# The whole test suite, as CI runs it: system dependencies, lint, type check, build, unit + e2e tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step says how long it took ("[test] lint: 74 s"), so a CI log shows where the time went.
started=$SECONDS
step_at=$SECONDS
step() {
  printf '[test] %s: %d s (total %d s)\n' "$1" $((SECONDS - step_at)) $((SECONDS - started))
  step_at=$SECONDS
}
node scripts/check-node.mjs
bash scripts/system-deps.sh test
# The Kubernetes backend's tests need a real single-node cluster (scripts/k8s.sh). Its binaries are built from the
# Go module proxy once (~15-20 min cold, cached in ~/.cache/switchyard-k8s): that build runs in the background
# while lint, type check, build and the sandbox image go on.
mkdir -p .runtime
bash scripts/k8s.sh build >.runtime/k8s-build.log 2>&1 &
k8s_build=$!
cleanup=()
on_exit() {
  local c
  for c in "${cleanup[@]}"; do eval "$c" || true; done
}
trap on_exit EXIT
npm run lint
step lint
# The Python tests (test/python/: the sandbox runner, the workspace tools, scripts/free_port.py), with the pinned
# pytest (python-tools.sh).
bash scripts/python-tests.sh -q
step 'python tests'
npm run typecheck
step 'type check'
npm run build
step build
# The container tiers need a Docker engine (installed and started here when none answers) and the sandbox
# image (built offline with debootstrap the first time, then reused while its definition hash holds).
bash scripts/docker-engine.sh
node scripts/sandbox-image.mjs >/dev/null
# The rich-results and Jupyter tests run pandas and matplotlib in a session: the shipped data-science template,
# built from PyPI on top of the sandbox image (about 20 s; reused while its tag holds).
node scripts/sandbox-image.mjs --template data-science >/dev/null
step 'docker engine, sandbox image and the data-science template'
# The Neo4j store's tests need a Neo4j: a throwaway embedded Community 5.26 on 127.0.0.1 from
# test/neo4j-launcher (built with Maven the first time; jars cached in ~/.m2). Reused when one already runs;
# otherwise started on an empty data dir here and stopped, its data removed, when the tests end.
if ! bash scripts/neo4j.sh status >/dev/null 2>&1; then
  bash scripts/neo4j.sh clean
  cleanup+=('bash scripts/neo4j.sh clean')
  bash scripts/neo4j.sh start >/dev/null
fi
# The replica state's tests need a PostgreSQL: a throwaway one from Debian's packages on 127.0.0.1
# (scripts/postgres.sh; each suite makes its own database in it). Reused when one already answers; otherwise
# started on an empty data dir here and stopped, its data removed, when the tests end.
if ! bash scripts/postgres.sh status >/dev/null 2>&1; then
  bash scripts/postgres.sh clean
  cleanup+=('bash scripts/postgres.sh clean')
  bash scripts/postgres.sh start >/dev/null
fi
# The cluster: reused when one already answers; otherwise started fresh (the sandbox image imported from Docker)
# and removed, data and all, when the tests end.
if ! wait "$k8s_build"; then
  cat .runtime/k8s-build.log >&2
  exit 1
fi
# That build made gVisor too: the Docker engine this script started switches its runsc runtime to it (a reload).
bash scripts/docker-engine.sh
if ! bash scripts/k8s.sh status >/dev/null 2>&1; then
  bash scripts/k8s.sh clean
  cleanup+=('bash scripts/k8s.sh clean')
  bash scripts/k8s.sh start >/dev/null
fi
step 'neo4j, postgres and the test cluster'
# The OpenAPI document is checked by tools nobody here wrote (test/e2e/contract.e2e-spec.ts):
# openapi-spec-validator and Schemathesis, pinned, go into a venv under .runtime/ the first time (quick once
# there); Redocly's CLI is a devDependency, installed by npm ci.
bash scripts/contract-tools.sh
# Real Jupyter clients (jupyter_server's gateway client, nbclient) and the anthropic and openai packages' types, in
# a venv under .runtime/ (scripts/client-tools.sh: pinned, quick once there).
bash scripts/client-tools.sh
# The outside client generators (openapi-python-client, datamodel-code-generator) test/e2e/generated-clients.e2e-spec.ts
# runs on the engine's document, in a venv under .runtime/ (scripts/generator-tools.sh: pinned, quick once there).
bash scripts/generator-tools.sh
# The Python SDK (packages/python): its wheel, a wheelhouse of it and its adapters' dependencies (pinned; the e2e
# installs it offline into a fresh venv, test/e2e/python-sdk.e2e-spec.ts), and its unit tests.
bash scripts/python-sdk.sh test -q
step 'contract, client and generator tools'
# --expose-gc: the event-loop test collects the test process's own garbage before it measures the engine's loop.
node --expose-gc node_modules/jest/bin/jest.js --ci --selectProjects unit e2e "$@"
