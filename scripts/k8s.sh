#!/usr/bin/env bash
# A real single-node Kubernetes for the tests and for trying the Kubernetes backend, built on this machine and bound
# to 127.0.0.1 (scripts/k8s.README.md).
#
#   bash scripts/k8s.sh start    # build once, start (idempotent); the LAST stdout line is the kubeconfig path
#   bash scripts/k8s.sh stop     # stop everything (pods, shims, daemons), keeping the cluster data
#   bash scripts/k8s.sh clean    # stop and delete .runtime/k8s (the binary cache stays)
#   bash scripts/k8s.sh status   # exit 0 and print the kubeconfig path if the API answers and the node is Ready
#   bash scripts/k8s.sh build    # only build/check the binary cache
#
# `start` returns once the node is Ready, untainted and lists the imported images in its status (so an engine's first
# action finds them), the controllers have made the namespaces' service accounts, and it has written engine.env
# beside the kubeconfig: every setting an engine needs for this cluster (`set -a; . engine.env; set +a; npm start`).
#
# The parts, one job per file:
#   k8s-common.sh         settings, state paths, ports, PKI, kubeconfigs, daemons' processes, the admin's API calls
#   k8s-build.sh          the binaries from the Go module proxy (kube-apiserver, kubelet, kube-scheduler,
#                         kube-controller-manager, etcd) and the pause image, cached by version
#   k8s-control-plane.sh  etcd, kube-apiserver, kube-scheduler, kube-controller-manager; the namespaces
#   k8s-node.sh           containerd, CNI and the kubelet in a private mount namespace; the images; node readiness
#   k8s-gvisor.sh         runsc and its containerd shim, the runtime handler `runsc` and the RuntimeClass `gvisor`
set -euo pipefail

# shellcheck source=scripts/k8s-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-common.sh"
# shellcheck source=scripts/k8s-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-build.sh"
# shellcheck source=scripts/k8s-gvisor.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-gvisor.sh"
# shellcheck source=scripts/k8s-control-plane.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-control-plane.sh"
# shellcheck source=scripts/k8s-node.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s-node.sh"

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

DAEMONS=(etcd kube-apiserver kube-scheduler kube-controller-manager containerd kubelet)

all_running() {
  local d
  for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null || return 1; done
}
any_running() {
  local d
  for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null && return 0; done
  [[ -n "$(shim_pids)" ]]
}

lock() {
  # Beside the (real) state directory: checkouts sharing one cluster share its lock.
  mkdir -p "$(dirname "$STATE")"
  exec 9>"$(dirname "$STATE")/k8s.lock"
  flock 9
}

healthy() {
  all_running && load_ports && apiserver_ready && node_ready && scheduler_ready && controller_manager_ready
}
# On a loaded machine one check may miss its deadline: a cluster whose daemons all run gets three tries before start
# restarts it (which would take every engine's pods with it) or status says it is down.
healthy_now() {
  local try
  for try in 1 2 3; do
    healthy && return 0
    all_running || return 1
    sleep "$try"
  done
  return 1
}

# engine.env: what an engine needs in its environment to use this cluster, as shell assignments (`set -a; . file`).
# Argument: the RuntimeClass of the one-off pods (empty: none).
write_engine_env() {
  local runtime_class="$1" image tmp="$ENGINE_ENV_FILE.tmp"
  image="$(cat "$RUN/sandbox-image")"
  {
    printf '# An engine'"'"'s settings for the cluster of scripts/k8s.sh (written by its start; docs/kubernetes.md):\n'
    printf '#   set -a; . %q; set +a; npm start\n' "$ENGINE_ENV_FILE"
    printf 'SWITCHYARD_SANDBOX_BACKEND=kubernetes\n'
    printf 'KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
    printf 'SWITCHYARD_K8S_NAMESPACE=%q\n' "$ENGINE_NAMESPACE"
    printf '# The image the node has (imported from Docker at start); it is never pulled.\n'
    printf 'SWITCHYARD_SANDBOX_IMAGE=%q\n' "$image"
    printf 'SWITCHYARD_K8S_IMAGE_PULL_POLICY=Never\n'
    if [[ -n "$runtime_class" ]]; then
      printf '# One-off pods run in gVisor, as the Docker backend'"'"'s one-off containers.\n'
      printf 'SWITCHYARD_K8S_RUNTIME_CLASS=%q\n' "$runtime_class"
    fi
  } >"$tmp"
  chmod 600 "$tmp"
  mv "$tmp" "$ENGINE_ENV_FILE"
}

say_how_to_use() {
  say "an engine's settings for this cluster: $ENGINE_ENV_FILE"
  say "  use them: set -a; . $ENGINE_ENV_FILE; set +a; npm start"
}

# A running cluster gets the sandbox image built since it started (and any new $SWITCHYARD_K8S_IMAGES), and engine.env
# names it; the images it had stay, since engines may still run pods of them.
refresh_images() {
  local runtime_class
  runtime_class="$(sed -nE 's/^SWITCHYARD_K8S_RUNTIME_CLASS=(.*)$/\1/p' "$ENGINE_ENV_FILE")"
  local log="$RUN/images-refresh.log" ok=1
  import_images keep-older >"$log" 2>&1 9>&- || ok=0
  cat "$log" >>"$LOGS/images.log"
  grep -h '^\[k8s\]' "$log" >&2 || true
  if ((!ok)); then
    tail -n 20 "$log" >&2
    die "importing images into containerd failed (log: $LOGS/images.log)"
  fi
  wait_for "the node to list the imported images in its status" kubelet node_lists_images
  write_engine_env "$runtime_class"
}

start() {
  lock
  SOCK="$(socket_dir)"
  if [[ -f "$ENGINE_ENV_FILE" ]] && healthy_now; then
    refresh_images
    say "already running"
    say_how_to_use
    echo "$KUBECONFIG_FILE"
    return 0
  fi
  if any_running; then
    say "partly running (or started by an older scripts/k8s.sh): stopping what is left first"
    stop_all
  fi
  local t0=$SECONDS
  ensure_tools
  build
  build_pause
  mkdir -p "$STATE" "$LOGS" "$RUN" "$SOCK"
  gvisor_ready
  # A start that fails leaves nothing running (the logs stay).
  trap 'say "start failed: stopping what it started (logs: $LOGS)"; stop_all' EXIT
  choose_ports
  make_pki
  write_node_configs
  write_control_plane_configs
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
  # Images go in while the control plane comes up.
  rm -f "$RUN/images.ok"
  : >"$LOGS/images.log"
  (import_images >>"$LOGS/images.log" 2>&1 9>&- && touch "$RUN/images.ok") &
  local images_pid=$!
  wait_for "the API server" kube-apiserver apiserver_ready
  start_scheduler
  start_controller_manager
  say "etcd, containerd and the API server up in $((SECONDS - t0)) s (https://127.0.0.1:$API_PORT)"

  # The kubelet starts once the images are in: its first image list (which it refreshes only every 30 s) has them.
  wait "$images_pid" || true
  grep -h '^\[k8s\]' "$LOGS/images.log" >&2 || true
  if [[ ! -f "$RUN/images.ok" ]]; then
    tail -n 20 "$LOGS/images.log" >&2
    die "importing images into containerd failed (log: $LOGS/images.log)"
  fi
  start_kubelet
  wait_for "the node to register" kubelet node_registered
  prepare_node
  wait_for "the scheduler" kube-scheduler scheduler_ready
  wait_for "the controller manager" kube-controller-manager controller_manager_ready
  wait_for "the node to be Ready and untainted" kubelet node_ready
  say "node $NODE_NAME Ready after $((SECONDS - t0)) s"
  ensure_namespaces
  ensure_runtime_class
  wait_for "the node to list the imported images in its status" kubelet node_lists_images

  write_kubeconfig "$KUBECONFIG_FILE" switchyard-admin token "$(cat "$PKI/admin.token")"
  write_engine_env "${GVISOR_BIN:+$RUNTIME_CLASS}"
  trap - EXIT
  say "started in $((SECONDS - t0)) s; logs: $LOGS"
  say_how_to_use
  echo "$KUBECONFIG_FILE"
}

# pids_matching WORD TEXT [MNTNS]: the processes whose command line has both (or whose mount namespace is MNTNS, when
# given), in one pass over /proc.
pids_matching() {
  python3 - "$@" <<'EOF'
import os, sys
word, text = sys.argv[1], sys.argv[2]
mntns = sys.argv[3] if len(sys.argv) > 3 else None
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if mntns is not None:
            hit = os.readlink(f"/proc/{pid}/ns/mnt") == mntns
        else:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            hit = word in cmd and text in cmd
    except OSError:
        continue  # gone meanwhile
    if hit and int(pid) != os.getpid():
        print(pid)
EOF
}
# The shims of our containerd (they outlive it by design) and everything under them (the pods).
shim_pids() { pids_matching containerd-shim "$SOCK/containerd.sock"; }
# gVisor's sandboxes and gofers (runsc ... --root <our gvisor root>): they run in mount namespaces of their own.
gvisor_pids() { pids_matching runsc "$STATE/gvisor/root"; }
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
  done < <(
    python3 - "$STATE" <<'EOF'
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
  # The kubelet keeps nothing worth a graceful exit (no graceful node shutdown here); the scheduler and the
  # controllers would only react to pods going away.
  if pid="$(running_pid kubelet)"; then kill -KILL "$pid" 2>/dev/null || true; fi
  stop_daemons 10 kube-scheduler kube-controller-manager
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
  # Left-over shims (and what runs under them), and gVisor's sandboxes.
  local kids
  for p in $(shim_pids); do
    mapfile -t kids < <(descendants "$p")
    kill -KILL "${kids[@]}" "$p" 2>/dev/null || true
  done
  for p in $(gvisor_pids); do kill -KILL "$p" 2>/dev/null || true; done
  # Anything still in the node's mount namespace; when the last process goes, so do its mounts.
  if [[ -n "$mntns" && "$mntns" != "$(readlink /proc/self/ns/mnt)" ]]; then
    for p in $(pids_matching "" "" "$mntns"); do kill -KILL "$p" 2>/dev/null || true; done
  fi
  stop_daemons 20 kube-apiserver etcd
  unmount_state
  # The pods' network: their namespaces went with the node's mount namespace; the bridge and the addresses go too.
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -rf "$STATE/cni/ipam" "$STATE/gvisor/root"
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
  if healthy_now; then
    echo "$KUBECONFIG_FILE"
    return 0
  fi
  say "not running (or the node is not Ready)"
  return 1
}

case "${1:-}" in
  start | stop | clean | status) "$1" ;;
  build)
    build
    build_gvisor 1 || true
    ;;
  *) die "usage: $0 start|stop|clean|status|build" ;;
esac
