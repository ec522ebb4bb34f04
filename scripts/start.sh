#!/usr/bin/env bash
# `npm start`: set up what the execution tiers need, then run the engine (after `prestart` built dist/ if needed).
#
#   1. system packages (bubblewrap, Chromium, …): scripts/system-deps.sh runtime
#   2. a Docker engine with gVisor registered: scripts/docker-engine.sh (installs docker.io and runsc, starts dockerd)
#   3. the sandbox image: scripts/sandbox-image.mjs (built offline the first time, about 60–90 s; reused afterwards)
#   4. node dist/apps/engine/src/main.js
#
# Every step is idempotent and quick when its work is done (a second start rebuilds nothing). A step that cannot work
# here (not root, no apt, no Docker) prints why and the start goes on: the engine then reports the tiers it cannot
# offer in /health, and their actions are denied, never run in a weaker tier.
#
# SWITCHYARD_START_SETUP=off skips steps 1–3 (a machine set up by other means).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit

say() { printf '[start] %s\n' "$*" >&2; }

if [[ "${SWITCHYARD_START_SETUP:-on}" != "off" ]]; then
  bash scripts/system-deps.sh runtime || say "warning: system packages could not be checked (see above)"

  docker_ok=0
  if bash scripts/docker-engine.sh >&2; then
    docker_ok=1
  else
    say "no Docker engine: the container tiers (pooled, one-off) will be unavailable; /health says why"
  fi

  if [[ "$docker_ok" -eq 1 ]]; then
    tag="$(node scripts/sandbox-image.mjs --print-tag 2>/dev/null || true)"
    if [[ -n "$tag" ]] && ! docker image inspect "$tag" >/dev/null 2>&1; then
      say "sandbox image $tag is missing: building it now (the first, offline build takes about 60–90 s;"
      say "later starts reuse it until docker/sandbox/ changes)"
    fi
    if built="$(node scripts/sandbox-image.mjs)"; then
      # The engine reads the tag from ./.runtime; a build recorded elsewhere is named to it directly.
      runtime_dir="${SWITCHYARD_RUNTIME_DIR:-$PWD/.runtime}"
      if [[ -z "${SWITCHYARD_SANDBOX_IMAGE:-}" && "$(cd "$runtime_dir" 2>/dev/null && pwd -P)" != "$(pwd -P)/.runtime" ]]; then
        export SWITCHYARD_SANDBOX_IMAGE="$built"
      fi
    else
      say "the sandbox image could not be built (see above): the container tiers will be unavailable"
    fi
  fi
fi

say "starting the engine"
exec node dist/apps/engine/src/main.js "$@"
