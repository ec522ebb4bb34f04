#!/usr/bin/env bash
# The cluster's one node (sourced by scripts/k8s.sh, never run): a containerd of its own (own config, root, state
# and socket; Debian's containerd, runc and CNI plugins) and a kubelet, sharing a private mount namespace; the
# images copied into containerd from Docker; the node's readiness as the engine needs it (Ready, reachable at
# 127.0.0.1, untainted, and listing the imported images in its status).

# shellcheck source=scripts/k8s-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-common.sh"
# shellcheck source=scripts/k8s-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-build.sh"
# shellcheck source=scripts/k8s-gvisor.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-gvisor.sh"

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
have_sys_resource() { (((0x$(awk '/^CapEff:/ {print $2}' /proc/self/status) >> 24) & 1)); }

write_node_configs() {
  local driver systemd_cgroup=false restrict_oom=false oom_score_adj=-999
  driver="$(cgroup_driver)"
  [[ "$driver" == systemd ]] && systemd_cgroup=true
  if ! have_sys_resource; then
    restrict_oom=true
    oom_score_adj=0
  fi
  mkdir -p "$CTRD/root" "$CTRD/state" "$CTRD/opt" "$STATE/cni/net.d" "$STATE/cni/ipam" "$STATE/kubelet/pki" \
    "$STATE/pod-logs" "$STATE/node/sysctl"

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
$(gvisor_containerd_runtime)

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

  write_kubeconfig "$STATE/kubelet/kubeconfig" "system:node:$NODE_NAME" token "$(cat "$PKI/kubelet.token")"
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

# containerd in a new private mount namespace; the kubelet joins it later (nsenter). The /proc/sys files the kubelet
# and the bridge plugin write are covered there by the plain files of write_node_configs. gVisor's shim, when built,
# is found on containerd's PATH (containerd runs containerd-shim-<name>-v1 for runtime_type io.containerd.<name>.v1).
start_containerd() {
  # shellcheck disable=SC2016 # expanded by the inner bash (its $0 and $@), not here
  local setup='set -e
for f in "$0"/*; do mount --bind "$f" "/proc/sys/$(basename "$f" | tr . /)"; done
exec "$@"'
  PATH="${GVISOR_BIN:+$GVISOR_BIN:}$PATH" launch containerd unshare --mount --propagation private -- \
    bash -c "$setup" "$STATE/node/sysctl" containerd --config "$CTRD/config.toml"
}

containerd_ready() { ctr -a "$SOCK/containerd.sock" version >/dev/null 2>&1; }

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

node_registered() { api GET "/api/v1/nodes/$NODE_NAME" >/dev/null 2>&1; }

# The kubelet refuses a loopback node IP and, as --cloud-provider=external, leaves the addresses to whoever sets them
# first: the API server reaches the kubelet at 127.0.0.1 (its only preferred address type is InternalIP). That mode
# also taints the node node.cloudprovider.kubernetes.io/uninitialized until a cloud controller manager (there is
# none) initializes it: that taint goes; the node lifecycle controller's own taints (not-ready) stay its business.
prepare_node() {
  api PATCH "/api/v1/nodes/$NODE_NAME/status" -H 'Content-Type: application/merge-patch+json' -o /dev/null \
    -d "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"},{\"type\":\"Hostname\",\"address\":\"$NODE_NAME\"}]}}" ||
    die "patching the node's addresses failed"
  local try patch
  for try in 1 2 3 4 5; do
    # A merge patch carrying the resourceVersion it was computed from: refused (409) if the controller changed the
    # taints meanwhile, and then computed again.
    patch="$(api GET "/api/v1/nodes/$NODE_NAME" | python3 -c '
import json, sys
node = json.load(sys.stdin)
taints = node["spec"].get("taints") or []
kept = [t for t in taints if t["key"] != "node.cloudprovider.kubernetes.io/uninitialized"]
if len(kept) != len(taints):
    print(json.dumps({"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": kept}}))
')" || die "reading node $NODE_NAME failed"
    [[ -z "$patch" ]] && return 0
    api PATCH "/api/v1/nodes/$NODE_NAME" -H 'Content-Type: application/merge-patch+json' -o /dev/null \
      -d "$patch" 2>/dev/null && return 0
    say "removing the node's uninitialized taint: conflict (try $try), again"
  done
  die "removing the node's node.cloudprovider.kubernetes.io/uninitialized taint failed"
}

# Ready, reachable at 127.0.0.1, and no taint that keeps pods off it (NoSchedule, NoExecute).
node_ready() {
  api GET "/api/v1/nodes/$NODE_NAME" 2>/dev/null | python3 -c '
import json, sys
node = json.load(sys.stdin)
ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
addrs = [a["address"] for a in node["status"].get("addresses", []) if a["type"] == "InternalIP"]
taints = [t for t in node["spec"].get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
sys.exit(0 if ready and ready[0]["status"] == "True" and addrs == ["127.0.0.1"] and not taints else 1)' 2>/dev/null
}

# Whether the node's status lists every image imported by this start ($RUN/images.list): the engine refuses an
# image that no Ready node reports (imagePullPolicy Never), and the kubelet refreshes that list only every 30 s.
node_lists_images() {
  [[ -s "$RUN/images.list" ]] || return 1
  api GET "/api/v1/nodes/$NODE_NAME" 2>/dev/null | python3 -c '
import json, sys
node = json.load(sys.stdin)
listed = {n for i in node["status"].get("images") or [] for n in i.get("names", [])}
wanted = {line.strip() for line in open(sys.argv[1]) if line.strip()}
sys.exit(0 if wanted <= listed else 1)' "$RUN/images.list" 2>/dev/null
}

# ----------------------------------------------------------------------------------------------------------------
# Images: never pulled; copied from Docker (docker save | ctr import) unless that exact image is there.
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
  echo "$name" >>"$RUN/images.list.tmp"
  if [[ "$(cat "$marker" 2>/dev/null)" == "$name $id" ]] && has_image "$name"; then
    return 0
  fi
  docker save "$ref" | ctr_k8s images import - >/dev/null || {
    say "importing $ref into containerd failed"
    return 1
  }
  echo "$name $id" >"$marker"
  say "imported $ref into containerd in $((SECONDS - t)) s"
}

# Imports the pause, sandbox and extra images; writes the sandbox image's ref ($RUN/sandbox-image, as the engine is
# to name it) and the imported names ($RUN/images.list, as the node's status will list them). Older builds of the
# sandbox image go, unless the argument is keep-older (a running cluster: engines may still use them).
import_images() {
  local keep="${1:-}" ref status=0 sandbox
  mkdir -p "$STATE/images"
  rm -f "$RUN/images.list" "$RUN/images.list.tmp" "$RUN/sandbox-image"
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
    if [[ "$keep" != keep-older && "$name" == "${current%:*}:"* && "$name" != "$current" ]]; then
      marker="$STATE/images/$(printf '%s' "$name" | sha256sum | cut -c1-16)"
      old_id="$(cut -d' ' -f2 "$marker" 2>/dev/null || true)"
      [[ "$old_id" == "$current_id" ]] && old_id=""
      ctr_k8s images rm "$name" ${old_id:+"$old_id"} >/dev/null 2>&1 &&
        say "removed the older sandbox image $name from containerd"
      rm -f "$marker"
    fi
  done
  echo "$sandbox" >"$RUN/sandbox-image"
  mv "$RUN/images.list.tmp" "$RUN/images.list"
  return "$status"
}
