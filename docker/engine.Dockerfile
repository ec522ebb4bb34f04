# Switchyard engine image (registry path). Build context: the repository root.
#
#   docker build -f docker/engine.Dockerfile -t switchyard/engine .
#   (or: docker compose -f docker/compose.yml build)
#
# The engine drives sandbox containers through the HOST's Docker engine: run it with
# /var/run/docker.sock mounted (see docker/compose.yml). That socket is the engine's alone;
# sandbox containers never get it. The sandbox image itself is built on the host with
# `npm run sandbox:image` (scripts/sandbox-image.mjs).

# ---- build: full install, compile, then drop dev dependencies --------------------------------
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# Sources (filtered by docker/engine.Dockerfile.dockerignore: no node_modules, dist, .runtime, .git).
COPY . .
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# Docker CLI only (no daemon), for an engine that shells out to `docker`.
FROM docker:28-cli AS docker-cli

# ---- runtime -----------------------------------------------------------------------------------
FROM node:24-slim
# python3 + bubblewrap + prlimit (util-linux): the in-engine subprocess tier (see scripts/system-deps.sh).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 bubblewrap util-linux ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=docker-cli /usr/local/bin/docker /usr/local/bin/docker
WORKDIR /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    SWITCHYARD_DATA_DIR=/var/lib/switchyard
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules/ node_modules/
COPY --from=build /app/dist/ dist/
COPY --from=build /app/scripts/ scripts/
# The runner, bound read-only into each session's stateful sandbox of the subprocess tier (kernels, processes).
COPY --from=build /app/docker/sandbox/runner/ docker/sandbox/runner/
# Root on purpose: it talks to the Docker socket (root-equivalent on the host anyway) and chowns
# each session's workspace to the sandbox image's uid (10001) before bind-mounting it.
EXPOSE 8080
# `npm start` minus its `prestart` rebuild (the image is already built).
CMD ["node", "dist/apps/engine/src/main.js"]
