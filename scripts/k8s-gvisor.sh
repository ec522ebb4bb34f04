#!/usr/bin/env bash
# gVisor on the cluster (sourced by scripts/k8s.sh, never run): runsc and its containerd shim
# (containerd-shim-runsc-v1) built from the Go module proxy (gvisor.dev/gvisor, $SWITCHYARD_K8S_GVISOR_VERSION) into
# ${SWITCHYARD_K8S_CACHE:-~/.cache/switchyard-k8s}/gvisor-<version>-<go>/bin, containerd's runtime handler `runsc`,
# and the RuntimeClass `gvisor` that names it: a pod with runtimeClassName gvisor runs in a gVisor sandbox, as the
# Docker backend's one-off containers do. SWITCHYARD_K8S_GVISOR=off leaves it out. A build that fails is not fatal
# (the cluster then has no RuntimeClass gvisor, and says so); it is tried again by the next `k8s.sh build`.

# shellcheck source=scripts/k8s-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-common.sh"
# shellcheck source=scripts/gvisor-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/gvisor-common.sh"
RUNTIME_CLASS="gvisor"
RUNTIME_HANDLER="runsc"
# The directory of runsc and containerd-shim-runsc-v1 once built (gvisor_ready); empty without gVisor.
GVISOR_BIN=""

gvisor_wanted() { [[ "${SWITCHYARD_K8S_GVISOR:-on}" != off ]]; }

# replace_once FILE OLD NEW: OLD must occur exactly once in FILE (a newer module that moved it fails the build here,
# saying so, rather than building a shim that containerd cannot start).
replace_once() {
  python3 -c '
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"{path}: expected exactly one {old!r}, found {text.count(old)}")
open(path, "w").write(text.replace(old, new))' "$@"
}

# The shim's sources, vendored from the Go module proxy, with two lines changed for this host's containerd and root:
# - containerd 1.6 (Debian 12's) reads the answer of `shim start` as the bare socket address; the shim library of
#   containerd 2 writes JSON bootstrap parameters (version 2), which only containerd 1.7 and later read. The shim
#   serves the task API v2 that containerd 1.6 speaks, so the address alone is all that differs.
# - the shim sets its own oom_score_adj to -999 and gives up when it may not; a root without CAP_SYS_RESOURCE (these
#   machines) may not lower it, and containerd's own shims then keep the score they have, as this one now does.
patch_shim_sources() {
  local vendor="$1"
  replace_once "$vendor/github.com/containerd/containerd/v2/pkg/shim/shim.go" \
    $'\t\tif _, err := os.Stdout.Write(data); err != nil {\n\t\t\treturn err\n\t\t}\n\n\t\treturn nil\n\t}' \
    $'\t\tif _, err := os.Stdout.Write(append(data[:0], params.Address...)); err != nil {\n\t\t\treturn err\n\t\t}\n\n\t\treturn nil\n\t}' &&
    replace_once "$vendor/gvisor.dev/gvisor/pkg/shim/v1/manager.go" \
      'if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {' \
      'if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil && !os.IsPermission(err) {'
}

# runsc's own sources, with one change: its OCI seccomp answers a rule's `errnoRet` (upstream answers EPERM to every
# rule, as old runc did). The Docker backend's one-off containers on gVisor deny `clone3` with ENOSYS (its flags are in
# memory, where no rule can look, so glibc must fall back to `clone`, whose namespace flags the profile denies); with
# EPERM instead, no thread could start (libs/sandbox/src/backends/docker/gvisor.ts).
patch_runsc_sources() {
  local vendor="$1"
  replace_once "$vendor/gvisor.dev/gvisor/runsc/specutils/seccomp/seccomp.go" \
    $'\t\taction, err := convertAction(syscall.Action)\n\t\tif err != nil {\n\t\t\treturn nil, err\n\t\t}\n' \
    $'\t\taction, err := convertAction(syscall.Action)\n\t\tif err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t\tif syscall.Action == specs.ActErrno && syscall.ErrnoRet != nil {\n\t\t\taction = seccomp.ReturnError.Code(uint16(*syscall.ErrnoRet))\n\t\t}\n'
}

# Builds runsc and the shim unless they are there. FORCE=1 tries again after a failed build (`k8s.sh build`);
# otherwise a failure recorded by an earlier start is reported, not retried (it takes minutes).
build_gvisor() {
  local force="${1:-0}" dir log t0=$SECONDS
  gvisor_wanted || return 1
  dir="$(gvisor_dir)"
  log="$dir/build.log"
  [[ -x "$dir/bin/runsc" && -x "$dir/bin/containerd-shim-runsc-v1" ]] && return 0
  if [[ -f "$dir/failed" && "$force" != 1 ]]; then
    say "gVisor: an earlier build failed ($log); \`bash scripts/k8s.sh build\` tries again"
    return 1
  fi
  command -v go >/dev/null 2>&1 || return 1
  mkdir -p "$CACHE_ROOT"
  exec 7>"$CACHE_ROOT/.gvisor.lock"
  flock 7
  if [[ -x "$dir/bin/runsc" && -x "$dir/bin/containerd-shim-runsc-v1" ]]; then
    flock -u 7
    return 0
  fi
  rm -rf "$dir" && mkdir -p "$dir/src" "$dir/bin.tmp"
  say "building gVisor (runsc, containerd-shim-runsc-v1) $GVISOR_VERSION with $(go_version) into $dir (log: $log)"
  cat >"$dir/src/go.mod" <<EOF
module switchyard.local/gvisor-build

go $(go_version | sed -E 's/^go//')

require gvisor.dev/gvisor $GVISOR_VERSION
EOF
  cat >"$dir/src/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "gvisor.dev/gvisor/runsc"
	_ "gvisor.dev/gvisor/shim"
)
EOF
  if (
    cd "$dir/src" &&
      export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" GOTOOLCHAIN=local CGO_ENABLED=0 &&
      run_logged "$log" go mod tidy &&
      run_logged "$log" go mod vendor &&
      patch_shim_sources vendor &&
      patch_runsc_sources vendor &&
      export GOFLAGS="-mod=vendor" &&
      run_logged "$log" go build -trimpath -ldflags "-s -w" -o "$dir/bin.tmp/containerd-shim-runsc-v1" \
        gvisor.dev/gvisor/shim &&
      run_logged "$log" go build -trimpath -ldflags "-s -w" -o "$dir/bin.tmp/runsc" gvisor.dev/gvisor/runsc
  ); then
    mv "$dir/bin.tmp" "$dir/bin"
    say "gVisor built in $((SECONDS - t0)) s"
    flock -u 7
    return 0
  fi
  touch "$dir/failed"
  say "warning: building gVisor failed (log: $log): the cluster gets no RuntimeClass $RUNTIME_CLASS"
  flock -u 7
  return 1
}

# Sets GVISOR_BIN when gVisor is wanted and built (building it if needed) and writes the shim's options file.
gvisor_ready() {
  GVISOR_BIN=""
  build_gvisor 0 || return 0
  GVISOR_BIN="$(gvisor_dir)/bin"
  mkdir -p "$STATE/gvisor/root" "$STATE/gvisor/logs"
  # The shim's options (pkg/shim/v1/runsc's TOML): which runsc, its state root, and runsc's flags. The sandbox gets
  # no network of its own (a sandbox pod has none to use); systrap needs no KVM. The pod's seccomp profile is not
  # applied inside the sandbox (oci-seccomp off, unlike the Docker backend's runsc): containerd 1.6's RuntimeDefault
  # profile predates clone3, which runc answers ENOSYS (so glibc falls back to clone) but gVisor answers with the
  # profile's default, EPERM, and then no posix_spawn works. gVisor's kernel serves the code's syscalls either way;
  # the host sees only the sandbox's own, under gVisor's seccomp filter.
  cat >"$STATE/gvisor/runsc.toml" <<EOF
binary_name = "$GVISOR_BIN/runsc"
root = "$STATE/gvisor/root"
log_level = "info"
log_path = "$STATE/gvisor/logs/shim-%ID%.log"

[runsc_config]
  platform = "systrap"
  network = "none"
  oci-seccomp = "false"
  debug-log = "$STATE/gvisor/logs/%ID%/"
EOF
}

# containerd's runtime handler for the RuntimeClass (printed into its config; nothing without gVisor).
gvisor_containerd_runtime() {
  [[ -n "$GVISOR_BIN" ]] || return 0
  cat <<EOF

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$RUNTIME_HANDLER]
      runtime_type = "io.containerd.runsc.v1"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$RUNTIME_HANDLER.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$STATE/gvisor/runsc.toml"
EOF
}

# The RuntimeClass, when gVisor is there; when it is not, a RuntimeClass left by an earlier start goes (a pod asking
# for it would never start).
ensure_runtime_class() {
  if [[ -n "$GVISOR_BIN" ]]; then
    ensure_object /apis/node.k8s.io/v1/runtimeclasses \
      "{\"metadata\":{\"name\":\"$RUNTIME_CLASS\"},\"handler\":\"$RUNTIME_HANDLER\"}"
  else
    api DELETE "/apis/node.k8s.io/v1/runtimeclasses/$RUNTIME_CLASS" -o /dev/null 2>/dev/null || true
  fi
}
