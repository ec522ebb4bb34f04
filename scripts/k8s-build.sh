#!/usr/bin/env bash
# The cluster's binaries, built from the Go module proxy (sourced by scripts/k8s.sh, never run): kube-apiserver,
# kubelet, kube-scheduler and kube-controller-manager (k8s.io/kubernetes $SWITCHYARD_K8S_VERSION) and etcd
# (go.etcd.io/etcd/server/v3 $SWITCHYARD_K8S_ETCD_VERSION), with CGO_ENABLED=0, into
# ${SWITCHYARD_K8S_CACHE:-~/.cache/switchyard-k8s}/<k8s>-etcd<etcd>-<go>/bin. A binary is built once: a cache made
# before a binary joined the list gets just that one on the next build.

# shellcheck source=scripts/k8s-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-common.sh"

# The Kubernetes commands, in the two groups they are built in (the second group's build reuses most of the
# first's packages: the log shows what each group costs).
K8S_CORE_CMDS=(kube-apiserver kubelet)
K8S_CONTROL_CMDS=(kube-scheduler kube-controller-manager)

# Prints the cache dir (its bin/ holds the binaries).
cache_dir() { echo "$CACHE_ROOT/$K8S_VERSION-etcd$ETCD_VERSION-$(go_version)"; }

# A wrapper module for k8s.io/kubernetes: its go.mod replaces the k8s.io staging modules with ./staging paths,
# which only exist in its own repository. The same modules are published as k8s.io/<name> v0.<minor>.<patch>:
# the replace list is derived from its go.mod's "=> ./staging/..." lines.
write_k8s_module() {
  local src="$1" gomod staging_version replaces godebug cmd
  gomod="$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -nE 's/^\s*"GoMod": "(.*)",?$/\1/p')"
  [[ -f "$gomod" ]] || die "cannot download k8s.io/kubernetes@$K8S_VERSION's go.mod from the Go module proxy"
  staging_version="v0.${K8S_VERSION#v1.}"
  replaces="$(sed -nE "s#^\s*(k8s\.io/[A-Za-z0-9._/-]+) => \./staging/.*#\t\1 => \1 $staging_version#p" "$gomod")"
  [[ -n "$replaces" ]] || die "no './staging' replace lines in $gomod"
  godebug="$(grep -E '^godebug ' "$gomod" || true)"
  mkdir -p "$src"
  cat >"$src/go.mod" <<EOF
module switchyard.local/k8s-build

go $(sed -nE 's/^go ([0-9.]+)$/\1/p' "$gomod")

$godebug

require k8s.io/kubernetes $K8S_VERSION

replace (
$replaces
)
EOF
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for cmd in "${K8S_CORE_CMDS[@]}" "${K8S_CONTROL_CMDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } >"$src/tools.go"
  say "k8s.io/kubernetes $K8S_VERSION: $(grep -c ' => ' <<<"$replaces") staging modules replaced by $staging_version"
}

write_etcd_module() {
  local src="$1"
  mkdir -p "$src"
  cat >"$src/go.mod" <<EOF
module switchyard.local/etcd-build

go 1.24.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  cat >"$src/tools.go" <<'EOF'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
EOF
}

# go build with CGO_ENABLED=0; if that fails, once more with cgo.
go_build() {
  local dir="$1" log="$2"
  shift 2
  if ! (cd "$dir" && CGO_ENABLED=0 run_logged "$log" go build -trimpath "$@"); then
    say "CGO_ENABLED=0 build failed; retrying with cgo"
    (cd "$dir" && CGO_ENABLED=1 run_logged "$log" go build -trimpath "$@")
  fi
}

# The -X flags that set the version the binaries report (hack/lib/version.sh sets the same variables).
k8s_ldflags() {
  local minor="${K8S_VERSION#v1.}" ldflags="-s -w" pkg
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%FT%TZ)"
  done
  echo "$ldflags"
}

# Prints the names of the binaries not in $BIN yet.
missing_binaries() {
  local name
  for name in "${K8S_CORE_CMDS[@]}" "${K8S_CONTROL_CMDS[@]}" etcd; do
    [[ -x "$BIN/$name" ]] || echo "$name"
  done
}

# build_k8s_group LABEL CMD...: the commands of the group that are missing, built into $BIN.
build_k8s_group() {
  local label="$1" cmd pkgs=() t=$SECONDS dir out log
  shift
  dir="$(cache_dir)"
  log="$dir/build.log"
  for cmd in "$@"; do [[ -x "$BIN/$cmd" ]] || pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  [[ ${#pkgs[@]} -eq 0 ]] && return 0
  out="$dir/bin.tmp"
  rm -rf "$out" && mkdir -p "$out"
  go_build "$dir/src/k8s" "$log" -ldflags "$(k8s_ldflags)" -o "$out/" "${pkgs[@]}" ||
    die "building ${pkgs[*]##*/} failed (log: $log)"
  mv "$out"/* "$BIN/" && rmdir "$out"
  say "$label (${pkgs[*]##*/}) built in $((SECONDS - t)) s"
}

build() {
  local dir
  dir="$(cache_dir)"
  BIN="$dir/bin"
  [[ -z "$(missing_binaries)" ]] && return 0
  command -v go >/dev/null 2>&1 || die "go is not installed (the binaries are built from the Go module proxy)"
  mkdir -p "$CACHE_ROOT"
  exec 8>"$CACHE_ROOT/.lock"
  flock 8 # another start may be building the same thing
  local missing t0=$SECONDS t log="$dir/build.log"
  missing="$(missing_binaries | xargs)"
  if [[ -z "$missing" ]]; then
    flock -u 8
    return 0
  fi
  mkdir -p "$dir/src" "$BIN"
  say "building $missing ($K8S_VERSION, etcd $ETCD_VERSION) with $(go_version) into $dir"
  say "  (once per version set; cold Go caches: ~15 min on 2 cores, gVisor ~4 min more; a few minutes when only"
  say "  the cache dir is new or a binary joined the list; log: $log)"
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" GOTOOLCHAIN=local

  if [[ " $missing " != " etcd " ]]; then
    t=$SECONDS
    write_k8s_module "$dir/src/k8s"
    (cd "$dir/src/k8s" && run_logged "$log" go mod tidy) || die "go mod tidy (kubernetes) failed (log: $log)"
    say "k8s.io/kubernetes module resolved in $((SECONDS - t)) s"
    build_k8s_group "the node's binaries" "${K8S_CORE_CMDS[@]}"
    build_k8s_group "the control plane's scheduler and controllers" "${K8S_CONTROL_CMDS[@]}"
  fi
  if [[ ! -x "$BIN/etcd" ]]; then
    t=$SECONDS
    write_etcd_module "$dir/src/etcd"
    (cd "$dir/src/etcd" && run_logged "$log" go mod tidy) || die "go mod tidy (etcd) failed (log: $log)"
    go_build "$dir/src/etcd" "$log" -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 ||
      die "building etcd failed (log: $log)"
    mv "$BIN/etcd.tmp" "$BIN/etcd"
    say "etcd built in $((SECONDS - t)) s"
  fi
  touch "$dir/ready"
  say "binaries built in $((SECONDS - t0)) s: $(cd "$BIN" && echo *)"
  flock -u 8
}

# ----------------------------------------------------------------------------------------------------------------
# The pause image (the pod sandbox's first process): a static `for(;;) pause();` built with gcc, packed as a
# docker-archive tar by hand (no Docker needed), cached beside the binaries by the hash of its source and gcc.
# ----------------------------------------------------------------------------------------------------------------

PAUSE_C='#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>
static void down(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction a = {0}, r = {0};
  a.sa_handler = down; sigaction(SIGINT, &a, NULL); sigaction(SIGTERM, &a, NULL);
  r.sa_handler = reap; r.sa_flags = SA_NOCLDSTOP; sigaction(SIGCHLD, &r, NULL);
  for (;;) pause();
}'
pause_hash() {
  {
    printf '%s' "$PAUSE_C"
    gcc --version 2>/dev/null | head -n1
    uname -m
  } | sha256sum | cut -c1-12
}
pause_dir() { echo "$CACHE_ROOT/pause-$(pause_hash)"; }
pause_ref() { echo "switchyard.local/k8s-pause:$(pause_hash)"; }

build_pause() {
  local dir tmp
  dir="$(pause_dir)"
  [[ -f "$dir/pause.tar" ]] && return 0
  tmp="$dir.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  printf '%s\n' "$PAUSE_C" >"$tmp/pause.c"
  gcc -static -Os -s -o "$tmp/pause" "$tmp/pause.c" || die "gcc -static failed building the pause binary"
  PAUSE_BIN="$tmp/pause" REF="$(pause_ref)" OUT="$tmp/pause.tar" python3 - <<'EOF'
import hashlib, io, json, os, tarfile

def add(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))

layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w", format=tarfile.USTAR_FORMAT) as t:
    with open(os.environ["PAUSE_BIN"], "rb") as f:
        add(t, "pause", f.read(), 0o755)
layer = layer.getvalue()
diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
config = json.dumps({
    "architecture": arch, "os": "linux",
    "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
    "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    "history": [{"created_by": "switchyard scripts/k8s.sh: static for(;;) pause();"}],
}, sort_keys=True).encode()
config_name = hashlib.sha256(config).hexdigest() + ".json"
manifest = json.dumps([{"Config": config_name, "RepoTags": [os.environ["REF"]],
                        "Layers": ["layer/layer.tar"]}]).encode()
with tarfile.open(os.environ["OUT"], mode="w", format=tarfile.USTAR_FORMAT) as t:
    add(t, config_name, config)
    add(t, "layer/layer.tar", layer)
    add(t, "manifest.json", manifest)
EOF
  rm -rf "$dir" && mv "$tmp" "$dir"
}
