#!/usr/bin/env bash
# A real single-node Kubernetes for the tests, built on this machine and bound to 127.0.0.1 (scripts/k8s.README.md).
#
#   bash scripts/k8s.sh start    # build once, start (idempotent); the LAST stdout line is the kubeconfig path
#   bash scripts/k8s.sh stop     # stop everything (pods, shims, daemons), keeping the cluster data
#   bash scripts/k8s.sh clean    # stop and delete .runtime/k8s (the binary cache stays)
#   bash scripts/k8s.sh status   # exit 0 and print the kubeconfig path if the API answers and the node is Ready
#   bash scripts/k8s.sh build    # only build/check the binary cache
#
# - Binaries: kube-apiserver + kubelet (k8s.io/kubernetes $SWITCHYARD_K8S_VERSION) and etcd
#   (go.etcd.io/etcd/server/v3 $SWITCHYARD_K8S_ETCD_VERSION), built from the Go module proxy with CGO_ENABLED=0 into
#   ${SWITCHYARD_K8S_CACHE:-~/.cache/switchyard-k8s}/<k8s>-etcd<etcd>-<go>/bin, once. There is no scheduler,
#   controller-manager or kube-proxy: pods set spec.nodeName; nothing routes service IPs.
# - Runs (state, logs, pids under $SWITCHYARD_RUNTIME_DIR/k8s, default <repo>/.runtime/k8s), all on 127.0.0.1:
#   etcd, kube-apiserver (TLS from a throwaway CA, static admin token, RBAC + Node authorizer), a containerd of its
#   own (own config/root/state/socket; Debian's containerd, runc and CNI plugins) and a kubelet. containerd and the
#   kubelet share a private mount namespace: what they mount vanishes with them, and the kernel settings the kubelet
#   insists on (kernel.panic_on_oops=1, vm.overcommit_memory=1, ...) and the bridge plugin's ip_forward=1 land on
#   plain files there, not on the host.
# - Pods get an address on a bridge with no address on the host and no route out (isGateway/ipMasq false).
# - Images are never pulled: the locally built pause image, the project's sandbox image
#   (node scripts/sandbox-image.mjs) and $SWITCHYARD_K8S_IMAGES are copied from Docker (docker save | ctr import).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
STATE="$RUNTIME_DIR/k8s"
K8S_VERSION="${SWITCHYARD_K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${SWITCHYARD_K8S_ETCD_VERSION:-v3.6.16}"
CACHE_ROOT="${SWITCHYARD_K8S_CACHE:-$HOME/.cache/switchyard-k8s}"
TIMEOUT="${SWITCHYARD_K8S_TIMEOUT:-120}"
NODE_NAME="${SWITCHYARD_K8S_NODE_NAME:-switchyard-node}"
POD_SUBNET="${SWITCHYARD_K8S_POD_SUBNET:-10.244.0.0/24}"
SERVICE_SUBNET="${SWITCHYARD_K8S_SERVICE_SUBNET:-10.96.0.0/24}"
BRIDGE="${SWITCHYARD_K8S_BRIDGE:-sy-k8s0}"
TEST_NAMESPACE="switchyard-test"
# A closed port on loopback: every HTTP(S) client of the daemons is sent there for anything not on loopback, so
# even an image pull someone asks for (imagePullPolicy Always) cannot leave the machine.
NO_EGRESS_PROXY="http://127.0.0.1:9"

PKI="$STATE/pki"
LOGS="$STATE/logs"
RUN="$STATE/run"
CTRD="$STATE/containerd"

say() { printf '[k8s] %s\n' "$*" >&2; }
die() { printf '[k8s] ERROR: %s\n' "$*" >&2; exit 1; }

# ----------------------------------------------------------------------------------------------------------------
# Build: kube-apiserver + kubelet (k8s.io/kubernetes) and etcd (go.etcd.io/etcd/server/v3), once per version set.
# ----------------------------------------------------------------------------------------------------------------

go_version() { go env GOVERSION; }

# Prints the cache dir (its bin/ holds kube-apiserver, kubelet, etcd).
cache_dir() { echo "$CACHE_ROOT/$K8S_VERSION-etcd$ETCD_VERSION-$(go_version)"; }
BIN=""

# Runs a build step with its output in a log; on failure shows the log's tail.
run_logged() {
  local log="$1"
  shift
  if ! "$@" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    return 1
  fi
}

# A wrapper module for k8s.io/kubernetes: its go.mod replaces the k8s.io staging modules with ./staging paths,
# which only exist in its own repository. The same modules are published as k8s.io/<name> v0.<minor>.<patch>:
# the replace list is derived from its go.mod's "=> ./staging/..." lines.
write_k8s_module() {
  local src="$1" gomod staging_version replaces godebug
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
  cat >"$src/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOF
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

build() {
  local dir
  dir="$(cache_dir)"
  BIN="$dir/bin"
  [[ -f "$dir/ready" ]] && return 0
  command -v go >/dev/null 2>&1 || die "go is not installed (the binaries are built from the Go module proxy)"
  mkdir -p "$CACHE_ROOT"
  exec 8>"$CACHE_ROOT/.lock"
  flock 8 # another start may be building the same thing
  if [[ -f "$dir/ready" ]]; then flock -u 8; return 0; fi
  local t0=$SECONDS t log="$dir/build.log" out="$dir/bin.tmp"
  rm -rf "$dir" && mkdir -p "$dir/src" "$out"
  say "building kube-apiserver, kubelet $K8S_VERSION and etcd $ETCD_VERSION with $(go_version) into $dir"
  say "  (once per version set; cold Go caches: ~15-20 min on 2 cores, ~40 s when only the cache dir is new; log: $log)"
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" GOTOOLCHAIN=local

  t=$SECONDS
  write_k8s_module "$dir/src/k8s"
  (cd "$dir/src/k8s" && run_logged "$log" go mod tidy) || die "go mod tidy (kubernetes) failed (log: $log)"
  write_etcd_module "$dir/src/etcd"
  (cd "$dir/src/etcd" && run_logged "$log" go mod tidy) || die "go mod tidy (etcd) failed (log: $log)"
  say "modules resolved in $((SECONDS - t)) s"

  # The version the binaries report (hack/lib/version.sh sets the same variables).
  local minor="${K8S_VERSION#v1.}" ldflags="-s -w" pkg
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%FT%TZ)"
  done
  t=$SECONDS
  go_build "$dir/src/k8s" "$log" -ldflags "$ldflags" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet ||
    die "building kube-apiserver/kubelet failed (log: $log)"
  say "kube-apiserver + kubelet built in $((SECONDS - t)) s"
  t=$SECONDS
  go_build "$dir/src/etcd" "$log" -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3 ||
    die "building etcd failed (log: $log)"
  say "etcd built in $((SECONDS - t)) s"

  mv "$out" "$BIN"
  touch "$dir/ready"
  say "binaries built in $((SECONDS - t0)) s: $(cd "$BIN" && echo *)"
  flock -u 8
}

# ----------------------------------------------------------------------------------------------------------------
# Tools, ports, PKI, configs
# ----------------------------------------------------------------------------------------------------------------

ensure_tools() {
  [[ "$(id -u)" -eq 0 ]] || die "needs root (containerd, the kubelet, mounts and cgroups)"
  local need=()
  command -v containerd >/dev/null 2>&1 || need+=(containerd)
  command -v ctr >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
    need+=(containernetworking-plugins)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  command -v python3 >/dev/null 2>&1 || need+=(python3)
  command -v unshare >/dev/null 2>&1 || need+=(util-linux)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  if [[ ! -f "$(pause_dir)/pause.tar" ]]; then
    command -v gcc >/dev/null 2>&1 || need+=(gcc)
    [[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/aarch64-linux-gnu/libc.a || -f /usr/lib/libc.a ]] ||
      need+=(libc6-dev)
  fi
  [[ ${#need[@]} -eq 0 ]] && return 0
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} (no apt-get here: install them by hand)"
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >"$RUNTIME_DIR/apt-k8s.log" 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq --no-install-recommends "${need[@]}" >"$RUNTIME_DIR/apt-k8s.log" 2>&1 ||
      die "apt-get install ${need[*]} failed (log: $RUNTIME_DIR/apt-k8s.log)"
  fi
}

port_free() {
  python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Ports: $SWITCHYARD_K8S_<NAME>_PORT, else the one kept from an earlier start (so the kubeconfig stays the same), else
# a free one. A kept port that someone else took meanwhile is replaced.
ETCD_PORT="" ETCD_PEER_PORT="" API_PORT="" KUBELET_PORT=""
choose_ports() {
  local name var kept env_value port
  # shellcheck source=/dev/null # choose_ports writes it at run time: nothing to follow here
  [[ -f "$STATE/ports.env" ]] && source "$STATE/ports.env"
  for name in ETCD ETCD_PEER API KUBELET; do
    var="${name}_PORT"
    env_value="$(printenv "SWITCHYARD_K8S_${name}_PORT" || true)"
    kept="${!var}"
    if [[ -n "$env_value" ]]; then
      port="$env_value"
      port_free "$port" || die "port $port (SWITCHYARD_K8S_${name}_PORT) is in use"
    elif [[ -n "$kept" ]] && port_free "$kept"; then
      port="$kept"
    else
      [[ -n "$kept" ]] && say "port $kept (${name,,}) is taken now: choosing another"
      port="$(free_port)"
    fi
    printf -v "$var" '%s' "$port"
  done
  printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPI_PORT=%s\nKUBELET_PORT=%s\n' \
    "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$KUBELET_PORT" >"$STATE/ports.env"
}

# Unix sockets must fit in 108 bytes (the shims add nothing here: containerd 1.6 puts theirs in /run/containerd/s).
socket_dir() {
  if ((${#RUN} <= 80)); then
    echo "$RUN"
  else
    echo "/run/switchyard-k8s-$(printf '%s' "$STATE" | sha256sum | cut -c1-12)"
  fi
}
SOCK=""

# A leaf certificate from the throwaway CA: name, subject, extendedKeyUsage, subjectAltName (may be empty).
leaf_cert() {
  local name="$1" subject="$2" eku="$3" san="$4" ext
  ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$eku"
  [[ -n "$san" ]] && ext+="
subjectAltName=$san"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subject" 2>/dev/null |
    openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 3650 -out "$PKI/$name.crt" -extfile <(printf '%s\n' "$ext") 2>/dev/null ||
    die "openssl failed making $name.crt"
}

# Once per cluster: CA, API server / kubelet serving certs, the API server's kubelet client cert, the service
# account key pair and the static tokens (admin in system:masters; the kubelet as system:node:<node>).
make_pki() {
  [[ -f "$PKI/done" ]] && return 0
  rm -rf "$PKI" && mkdir -p "$PKI" && chmod 700 "$PKI"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=switchyard-k8s-ca" -days 3650 -out "$PKI/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null ||
    die "openssl failed making the CA"
  leaf_cert apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  leaf_cert kubelet "/CN=system:node:$NODE_NAME/O=system:nodes" serverAuth "IP:127.0.0.1,DNS:$NODE_NAME"
  leaf_cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" clientAuth ""
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
  openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  openssl rand -hex 32 >"$PKI/admin.token"
  openssl rand -hex 32 >"$PKI/kubelet.token"
  {
    printf '%s,switchyard-admin,switchyard-admin,"system:masters"\n' "$(cat "$PKI/admin.token")"
    printf '%s,system:node:%s,system:node:%s,"system:nodes"\n' "$(cat "$PKI/kubelet.token")" "$NODE_NAME" "$NODE_NAME"
  } >"$PKI/tokens.csv"
  chmod 600 "$PKI"/*
  touch "$PKI/done"
}

write_kubeconfig() {
  local file="$1" user="$2" token="$3" tmp
  tmp="$file.tmp"
  cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: switchyard
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    token: $token
contexts:
- name: switchyard
  context:
    cluster: switchyard
    user: $user
current-context: switchyard
EOF
  chmod 600 "$tmp"
  mv "$tmp" "$file"
}

# The pause image (the pod sandbox's first process): a static `for(;;) pause();` built with gcc, packed as a
# docker-archive tar by hand (no Docker needed), cached beside the binaries by the hash of its source and gcc.
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
  { printf '%s' "$PAUSE_C"; gcc --version 2>/dev/null | head -n1; uname -m; } | sha256sum | cut -c1-12
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

cgroup_driver() {
  # cgroup v2 with systemd as init: systemd (what it expects); otherwise cgroupfs.
  if [[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" == cgroup2fs && -d /run/systemd/system ]]; then
    echo systemd
  else
    echo cgroupfs
  fi
}

# Whether this root may lower oom_score_adj (CAP_SYS_RESOURCE): some VMs/containers drop that capability even for
# root, and then every pod sandbox (oom_score_adj -998) dies in runc with "can't get final child's PID from pipe".
have_sys_resource() { (( (0x$(awk '/^CapEff:/ {print $2}' /proc/self/status) >> 24) & 1 )); }

write_configs() {
  local driver systemd_cgroup=false restrict_oom=false oom_score_adj=-999
  driver="$(cgroup_driver)"
  [[ "$driver" == systemd ]] && systemd_cgroup=true
  if ! have_sys_resource; then
    restrict_oom=true
    oom_score_adj=0
  fi
  mkdir -p "$CTRD/root" "$CTRD/state" "$CTRD/opt" "$STATE/cni/net.d" "$STATE/cni/ipam" "$STATE/kubelet/pki" \
    "$STATE/pod-logs" "$STATE/apiserver" "$STATE/etcd" "$STATE/node/sysctl"
  chmod 700 "$STATE/etcd"

  cat >"$CTRD/config.toml" <<EOF
# containerd for scripts/k8s.sh: its own root, state and socket (never the system's or Docker's).
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$SOCK/containerd.sock"

[ttrpc]
  address = "$SOCK/containerd.sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(pause_ref)"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = $restrict_oom
  enable_selinux = false
  disable_apparmor = true
  max_concurrent_downloads = 1

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = $systemd_cgroup

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
EOF

  cat >"$STATE/cni/net.d/10-switchyard.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "switchyard-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_SUBNET" }]],
        "dataDir": "$STATE/cni/ipam"
      }
    }
  ]
}
EOF

  write_kubeconfig "$STATE/kubelet/kubeconfig" "system:node:$NODE_NAME" "$(cat "$PKI/kubelet.token")"
  cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzPort: 0
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$SOCK/containerd.sock
cgroupDriver: $driver
cgroupsPerQOS: true
enforceNodeAllocatable: []
# Every pod gets its own cgroup with a process cap: a fork bomb in one sandbox stops at 128 tasks, as the Docker
# tiers' PidsLimit. (Pod-level cgroups need cgroupsPerQOS; this kubelet's in-place resize code panics on that
# layout here, so that feature is off.)
podPidsLimit: 128
featureGates:
  InPlacePodVerticalScaling: false
failSwapOn: false
failCgroupV1: false
oomScoreAdj: $oom_score_adj
makeIPTablesUtilChains: false
hairpinMode: none
podLogsDir: $STATE/pod-logs
volumePluginDir: $STATE/kubelet/volume-plugins
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
mergeDefaultEvictionSettings: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 30s
serializeImagePulls: false
shutdownGracePeriod: 0s
rotateCertificates: false
serverTLSBootstrap: false
EOF

  # The values the kubelet wants for these host kernel settings (it writes them when they differ), and ip_forward=1
  # (which the bridge plugin writes): containerd and the kubelet see these files in place of /proc/sys.
  local kv
  for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
    kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000 net/ipv4/ip_forward=1; do
    printf '%s\n' "${kv#*=}" >"$STATE/node/sysctl/$(tr / . <<<"${kv%%=*}")"
  done
}

# ----------------------------------------------------------------------------------------------------------------
# Processes
# ----------------------------------------------------------------------------------------------------------------

# Prints the pid of daemon <name> if it still runs with our state dir in its command line.
running_pid() {
  local pid
  [[ -f "$RUN/$1.pid" ]] || return 1
  pid="$(cat "$RUN/$1.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ "$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null)" == *"$STATE/"* ]] || return 1
  echo "$pid"
}

# Starts a daemon in its own session with the egress-closing proxy settings; args: name, command...
launch() {
  local name="$1"
  shift
  printf '\n===== %s scripts/k8s.sh start =====\n' "$(date -u +%FT%TZ)" >>"$LOGS/$name.log"
  HTTP_PROXY="$NO_EGRESS_PROXY" HTTPS_PROXY="$NO_EGRESS_PROXY" http_proxy="$NO_EGRESS_PROXY" \
    https_proxy="$NO_EGRESS_PROXY" NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost" \
    setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 8>&- 9>&- &
  echo "$!" >"$RUN/$name.pid"
  disown "$!"
}

wait_for() {
  local what="$1" name="$2" check="$3" deadline=$((SECONDS + TIMEOUT)) pid
  while ((SECONDS < deadline)); do
    "$check" && return 0
    if [[ -n "$name" ]] && ! pid="$(running_pid "$name")"; then
      tail -n 30 "$LOGS/$name.log" >&2 || true
      die "$name exited while waiting for $what (log: $LOGS/$name.log)"
    fi
    sleep 0.25
  done
  [[ -n "$name" ]] && tail -n 30 "$LOGS/$name.log" >&2
  die "timed out after ${TIMEOUT} s waiting for $what${name:+ (log: $LOGS/$name.log)}"
}

api() {
  # api METHOD PATH [curl args...]: the admin's request to the API server; prints the body, fails on HTTP errors.
  local method="$1" path="$2"
  shift 2
  curl -fsS --max-time 10 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/admin.token")" \
    -X "$method" "https://127.0.0.1:$API_PORT$path" "$@"
}

etcd_ready() { [[ "$(curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null)" == *'"health":"true"'* ]]; }
apiserver_ready() { [[ "$(api GET /readyz 2>/dev/null)" == ok ]]; }
containerd_ready() { ctr -a "$SOCK/containerd.sock" version >/dev/null 2>&1; }
node_registered() { api GET "/api/v1/nodes/$NODE_NAME" >/dev/null 2>&1; }
node_ready() {
  api GET "/api/v1/nodes/$NODE_NAME" 2>/dev/null | python3 -c '
import json, sys
node = json.load(sys.stdin)
ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
addrs = [a["address"] for a in node["status"].get("addresses", []) if a["type"] == "InternalIP"]
sys.exit(0 if ready and ready[0]["status"] == "True" and addrs == ["127.0.0.1"] else 1)' 2>/dev/null
}

start_etcd() {
  launch etcd "$BIN/etcd" --name switchyard --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "switchyard=http://127.0.0.1:$ETCD_PEER_PORT" \
    --log-level warn --unsafe-no-fsync --snapshot-count 10000 --quota-backend-bytes $((2 * 1024 * 1024 * 1024))
}

start_apiserver() {
  launch kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --cert-dir "$STATE/apiserver" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --token-auth-file "$PKI/tokens.csv" --anonymous-auth=false \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range "$SERVICE_SUBNET" --endpoint-reconciler-type none \
    --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction --disable-admission-plugins TaintNodesByCondition \
    --allow-privileged=false \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --profiling=false --v=1
}

# containerd in a new private mount namespace; the kubelet joins it later (nsenter). The /proc/sys files the kubelet
# and the bridge plugin write are covered there by the plain files of write_configs.
start_containerd() {
  # shellcheck disable=SC2016 # expanded by the inner bash (its $0 and $@), not here
  local setup='set -e
for f in "$0"/*; do mount --bind "$f" "/proc/sys/$(basename "$f" | tr . /)"; done
exec "$@"'
  launch containerd unshare --mount --propagation private -- \
    bash -c "$setup" "$STATE/node/sysctl" containerd --config "$CTRD/config.toml"
}

# The node's mount namespace (containerd's), so that stop can find whatever is left in it.
record_mntns() {
  local pid ns
  pid="$(running_pid containerd)" || die "containerd is not running"
  ns="$(readlink "/proc/$pid/ns/mnt")"
  [[ -n "$ns" && "$ns" != "$(readlink /proc/self/ns/mnt)" ]] || die "containerd is not in a mount namespace of its own"
  echo "$ns" >"$RUN/node.mntns"
}

start_kubelet() {
  local ctrd_pid
  ctrd_pid="$(running_pid containerd)" || die "containerd is not running"
  launch kubelet nsenter --target "$ctrd_pid" --mount -- "$BIN/kubelet" \
    --config "$STATE/kubelet/config.yaml" --kubeconfig "$STATE/kubelet/kubeconfig" \
    --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" \
    --hostname-override "$NODE_NAME" --cloud-provider external --v=1
}

# ----------------------------------------------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------------------------------------------

ctr_k8s() { ctr -a "$SOCK/containerd.sock" -n k8s.io "$@"; }
has_image() {
  local names
  names="$(ctr_k8s images ls -q)" || return 1
  grep -Fxq -- "$1" <<<"$names"
}

# docker.io normalisation, as containerd names an image imported from `docker save`.
normalize_ref() {
  local ref="$1" first="${1%%/*}"
  if [[ "$ref" != */* ]]; then
    ref="docker.io/library/$ref"
  elif [[ "$first" != *.* && "$first" != *:* && "$first" != localhost ]]; then
    ref="docker.io/$ref"
  fi
  [[ "${ref##*/}" == *:* || "$ref" == *@* ]] || ref="$ref:latest"
  echo "$ref"
}

node_bin() {
  if command -v node >/dev/null 2>&1 && node -e 'process.exit(+process.versions.node.split(".")[0] < 24)' 2>/dev/null; then
    echo node
  elif [[ -x "$REPO/node_modules/.bin/node" ]]; then
    echo "$REPO/node_modules/.bin/node"
  else
    echo node
  fi
}

# The project's sandbox image tag (built by sandbox-image.mjs when missing), or $SWITCHYARD_SANDBOX_IMAGE as is.
sandbox_image() {
  if [[ -n "${SWITCHYARD_SANDBOX_IMAGE:-}" ]]; then
    echo "$SWITCHYARD_SANDBOX_IMAGE"
    return 0
  fi
  local out
  out="$(cd "$REPO" && "$(node_bin)" scripts/sandbox-image.mjs)" || return 1
  tail -n 1 <<<"$out"
}

docker_up() {
  timeout 10 docker info >/dev/null 2>&1 && return 0
  say "no Docker engine answers: starting one (scripts/docker-engine.sh)"
  bash "$REPO/scripts/docker-engine.sh" start >&2
}

# Copies one image from Docker into containerd's k8s.io namespace unless that exact image (Docker image id) is there.
import_docker_image() {
  local ref="$1" id marker name t=$SECONDS
  id="$(docker image inspect -f '{{.Id}}' "$ref" 2>/dev/null)" || {
    say "image $ref is not in Docker"
    return 1
  }
  name="$(normalize_ref "$ref")"
  marker="$STATE/images/$(printf '%s' "$name" | sha256sum | cut -c1-16)"
  if [[ "$(cat "$marker" 2>/dev/null)" == "$name $id" ]] && has_image "$name"; then
    say "$ref: already in containerd"
    return 0
  fi
  docker save "$ref" | ctr_k8s images import - >/dev/null || {
    say "importing $ref into containerd failed"
    return 1
  }
  echo "$name $id" >"$marker"
  say "imported $ref into containerd in $((SECONDS - t)) s"
}

import_images() {
  local ref status=0 sandbox
  mkdir -p "$STATE/images"
  if ! has_image "$(pause_ref)"; then
    ctr_k8s images import - <"$(pause_dir)/pause.tar" >/dev/null || {
      say "importing the pause image failed"
      return 1
    }
  fi
  docker_up || return 1
  sandbox="$(sandbox_image)" || {
    say "node scripts/sandbox-image.mjs failed"
    return 1
  }
  for ref in "$sandbox" ${SWITCHYARD_K8S_IMAGES:-}; do
    import_docker_image "$ref" || status=1
  done
  # Earlier builds of the sandbox image (other tags of its repository) only take space: their tag goes, and the
  # image-id reference CRI keeps beside it (the Docker image id of the import, from its marker).
  local name current current_id marker old_id
  current="$(normalize_ref "$sandbox")"
  current_id="$(docker image inspect -f '{{.Id}}' "$sandbox" 2>/dev/null || true)"
  for name in $(ctr_k8s images ls -q); do
    if [[ "$name" == "${current%:*}:"* && "$name" != "$current" ]]; then
      marker="$STATE/images/$(printf '%s' "$name" | sha256sum | cut -c1-16)"
      old_id="$(cut -d' ' -f2 "$marker" 2>/dev/null || true)"
      [[ "$old_id" == "$current_id" ]] && old_id=""
      ctr_k8s images rm "$name" ${old_id:+"$old_id"} >/dev/null 2>&1 &&
        say "removed the older sandbox image $name from containerd"
      rm -f "$marker"
    fi
  done
  return "$status"
}

# ----------------------------------------------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------------------------------------------

DAEMONS=(etcd kube-apiserver containerd kubelet)

all_running() {
  local d
  for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null || return 1; done
}
any_running() {
  local d
  for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null && return 0; done
  [[ -n "$(shim_pids)" ]]
}

load_ports() {
  [[ -f "$STATE/ports.env" ]] || return 1
  # shellcheck source=/dev/null # choose_ports writes it at run time: nothing to follow here
  source "$STATE/ports.env"
}

lock() {
  mkdir -p "$RUNTIME_DIR"
  exec 9>"$RUNTIME_DIR/k8s.lock"
  flock 9
}

# Creates an object unless it exists (409 Conflict is fine).
ensure_object() {
  local path="$1" body="$2" code
  code="$(api POST "$path" -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d "$body" 2>/dev/null ||
    true)"
  [[ "$code" == 201 || "$code" == 409 ]] || die "POST $path answered HTTP $code"
}

start() {
  lock
  SOCK="$(socket_dir)"
  if all_running && load_ports && apiserver_ready && node_ready; then
    say "already running"
    echo "$STATE/kubeconfig"
    return 0
  fi
  if any_running; then
    say "partly running: stopping what is left first"
    stop_all
  fi
  local t0=$SECONDS
  ensure_tools
  build
  build_pause
  mkdir -p "$STATE" "$LOGS" "$RUN" "$SOCK"
  # A start that fails leaves nothing running (the logs stay).
  trap 'say "start failed: stopping what it started (logs: $LOGS)"; stop_all' EXIT
  choose_ports
  make_pki
  write_configs
  if [[ -f "$STATE/etcd/member/snap/db" ]]; then
    say "starting (cluster data kept)"
  else
    say "starting a new cluster"
  fi

  start_etcd
  start_containerd
  wait_for "etcd" etcd etcd_ready
  start_apiserver
  wait_for "containerd" containerd containerd_ready
  ip link del "$BRIDGE" 2>/dev/null || true # a bridge left by an earlier containerd: its ports are gone
  record_mntns
  # Images go in while the API server comes up.
  rm -f "$RUN/images.ok"
  : >"$LOGS/images.log"
  (import_images >>"$LOGS/images.log" 2>&1 9>&- && touch "$RUN/images.ok") &
  local images_pid=$!
  wait_for "the API server" kube-apiserver apiserver_ready
  say "etcd, containerd and the API server up in $((SECONDS - t0)) s (https://127.0.0.1:$API_PORT)"
  start_kubelet
  wait_for "the node to register" kubelet node_registered
  # The kubelet refuses a loopback node IP and, as --cloud-provider=external, leaves the addresses to whoever sets
  # them first: the API server reaches the kubelet at 127.0.0.1 (its only preferred address type is InternalIP).
  api PATCH "/api/v1/nodes/$NODE_NAME/status" -H 'Content-Type: application/merge-patch+json' -o /dev/null \
    -d "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"},{\"type\":\"Hostname\",\"address\":\"$NODE_NAME\"}]}}" ||
    die "patching the node's addresses failed"
  api PATCH "/api/v1/nodes/$NODE_NAME" -H 'Content-Type: application/merge-patch+json' -o /dev/null \
    -d '{"spec":{"taints":null}}' || die "removing the node's taints failed"
  wait_for "the node to be Ready" kubelet node_ready
  say "node $NODE_NAME Ready after $((SECONDS - t0)) s"

  # No controller-manager: what its controllers would make for pods is made here (the namespaces' default
  # service account, and the kube-root-ca.crt config map that service-account token volumes mount).
  local ns root_ca
  root_ca="$(python3 -c 'import json, sys; print(json.dumps({"metadata": {"name": "kube-root-ca.crt"},
    "data": {"ca.crt": open(sys.argv[1]).read()}}))' "$PKI/ca.crt")"
  ensure_object /api/v1/namespaces "{\"metadata\":{\"name\":\"$TEST_NAMESPACE\"}}"
  for ns in default "$TEST_NAMESPACE"; do
    ensure_object "/api/v1/namespaces/$ns/serviceaccounts" '{"metadata":{"name":"default"}}'
    ensure_object "/api/v1/namespaces/$ns/configmaps" "$root_ca"
  done

  wait "$images_pid" || true
  if [[ ! -f "$RUN/images.ok" ]]; then
    tail -n 20 "$LOGS/images.log" >&2
    die "importing images into containerd failed (log: $LOGS/images.log)"
  fi
  grep -h '^\[k8s\]' "$LOGS/images.log" >&2 || true

  write_kubeconfig "$STATE/kubeconfig" switchyard-admin "$(cat "$PKI/admin.token")"
  trap - EXIT
  say "started in $((SECONDS - t0)) s; logs: $LOGS"
  echo "$STATE/kubeconfig"
}

# The shims of our containerd (they outlive it by design) and everything under them (the pods).
shim_pids() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd="$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null)" || continue
    [[ "$cmd" == *containerd-shim* && "$cmd" == *"$SOCK/containerd.sock"* ]] && echo "${p#/proc/}"
  done
}
descendants() {
  local pid="$1" child
  for child in $(pgrep -P "$pid" 2>/dev/null); do
    echo "$child"
    descendants "$child"
  done
}

# Stops the named daemons together: SIGTERM, then SIGKILL for whatever still runs after <grace> seconds.
stop_daemons() {
  local grace="$1" name pid pids=() i left
  shift
  for name in "$@"; do
    if pid="$(running_pid "$name")"; then
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  for ((i = 0; i < grace * 10; i++)); do
    left=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
    ((left)) || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      say "pid $pid ($(cat "/proc/$pid/comm" 2>/dev/null)) still running after $grace s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

# Unmounts whatever is mounted under the state dir in this (the host's) mount namespace, deepest first.
unmount_state() {
  local m
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
  done < <(python3 - "$STATE" <<'EOF'
import sys
root = sys.argv[1].rstrip("/") + "/"
points = []
with open("/proc/self/mountinfo") as f:
    for line in f:
        point = line.split()[4].encode().decode("unicode_escape")
        if (point + "/").startswith(root):
            points.append(point)
for p in sorted(set(points), key=len, reverse=True):
    print(p)
EOF
  )
}

stop_all() {
  local pid p mntns=""
  SOCK="$(socket_dir)"
  [[ -f "$RUN/node.mntns" ]] && mntns="$(cat "$RUN/node.mntns")"
  # The kubelet keeps nothing worth a graceful exit (no graceful node shutdown here).
  if pid="$(running_pid kubelet)"; then kill -KILL "$pid" 2>/dev/null || true; fi
  # The pods' processes first (containerd still answers), so that nothing restarts them.
  if running_pid containerd >/dev/null; then
    local tasks
    tasks="$(ctr_k8s tasks ls -q 2>/dev/null || true)"
    if [[ -n "$tasks" ]]; then
      # shellcheck disable=SC2086
      timeout 60 ctr -a "$SOCK/containerd.sock" -n k8s.io tasks delete --force $tasks >/dev/null 2>&1 || true
    fi
  fi
  stop_daemons 20 containerd kube-apiserver
  # Left-over shims (and what runs under them).
  local kids
  for p in $(shim_pids); do
    mapfile -t kids < <(descendants "$p")
    kill -KILL "${kids[@]}" "$p" 2>/dev/null || true
  done
  # Anything still in the node's mount namespace; when the last process goes, so do its mounts.
  if [[ -n "$mntns" && "$mntns" != "$(readlink /proc/self/ns/mnt)" ]]; then
    for p in /proc/[0-9]*; do
      if [[ "$(readlink "$p/ns/mnt" 2>/dev/null)" == "$mntns" ]]; then
        kill -KILL "${p#/proc/}" 2>/dev/null || true
      fi
    done
  fi
  stop_daemons 20 kube-apiserver etcd
  unmount_state
  # The pods' network: their namespaces went with the node's mount namespace; the bridge and the addresses go too.
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -rf "$STATE/cni/ipam"
  # The parent cgroup containerd made for the pods (rmdir only removes it when empty).
  rmdir /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io 2>/dev/null || true
  rm -f "$RUN"/*.pid "$RUN/node.mntns" "$SOCK"/containerd.sock*
}

stop() {
  lock
  if ! any_running; then
    unmount_state
    say "not running"
    return 0
  fi
  stop_all
  say "stopped (data kept in $STATE)"
}

clean() {
  lock
  stop_all
  if [[ -n "$(unmount_state 2>&1)" ]] || grep -qF " $STATE/" /proc/self/mountinfo; then
    die "something is still mounted under $STATE: not deleting it"
  fi
  rm -rf "$STATE"
  local sock_dir
  sock_dir="$(socket_dir)"
  [[ "$sock_dir" == /run/switchyard-k8s-* ]] && rm -rf "$sock_dir"
  say "removed $STATE (binary cache kept: $CACHE_ROOT)"
}

status() {
  SOCK="$(socket_dir)"
  if all_running && load_ports && apiserver_ready && node_ready; then
    echo "$STATE/kubeconfig"
    return 0
  fi
  say "not running (or the node is not Ready)"
  return 1
}

case "${1:-}" in
  start | stop | clean | status) "$1" ;;
  build) build ;;
  *) die "usage: $0 start|stop|clean|status|build" ;;
esac
