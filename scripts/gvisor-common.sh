#!/usr/bin/env bash
# shellcheck disable=SC2034 # GVISOR_VERSION is read by the scripts that source this
# The gVisor (runsc) built from the Go module proxy (sourced, never run): its version and where the build is cached.
# scripts/k8s-gvisor.sh builds it (runsc and its containerd shim) for the test cluster; scripts/docker-engine.sh
# registers that runsc with Docker too, once it is built, instead of Debian's (runsc 20221219): one gVisor for both
# backends, and a newer one (a one-off python `print(1)` through the engine on gVisor took p50 259 ms against 377 ms on
# Debian's, 20 runs each, on this 2-core machine: docs/benchmarks.md, Peers).
[[ -n "${SWITCHYARD_GVISOR_COMMON:-}" ]] && return 0
SWITCHYARD_GVISOR_COMMON=1

# gVisor publishes no tagged releases of its Go module: a pseudo-version of its `go` branch.
GVISOR_VERSION="${SWITCHYARD_K8S_GVISOR_VERSION:-v0.0.0-20260905035102-160fafc42237}"

# The build's recipe: raised when the patches scripts/k8s-gvisor.sh applies change, so that a cached build made
# without them is not used (2: runsc honours a seccomp rule's errnoRet).
GVISOR_RECIPE=2

# The build's directory: <cache>/gvisor-<version>-<go version>-r<recipe>, its binaries in bin/ once built. Empty
# without Go.
gvisor_dir() {
  local go
  go="$(go env GOVERSION 2>/dev/null)" || return 0
  echo "${SWITCHYARD_K8S_CACHE:-$HOME/.cache/switchyard-k8s}/gvisor-$GVISOR_VERSION-$go-r$GVISOR_RECIPE"
}

# The built runsc when there is one (and SWITCHYARD_K8S_GVISOR is not off), else nothing.
built_runsc() {
  [[ "${SWITCHYARD_K8S_GVISOR:-on}" != off ]] || return 0
  local dir
  dir="$(gvisor_dir)"
  [[ -n "$dir" && -x "$dir/bin/runsc" ]] && echo "$dir/bin/runsc"
  return 0
}
