#!/usr/bin/env bash
# shellcheck disable=SC2034 # the settings and paths here are read by the other scripts/k8s-*.sh that source this
# What every part of scripts/k8s.sh shares (sourced, never run): the settings, the state's paths, logging, ports,
# the PKI, the daemons' processes and the admin's calls to the API server. scripts/k8s.README.md describes it all.
[[ -n "${SWITCHYARD_K8S_COMMON:-}" ]] && return 0
SWITCHYARD_K8S_COMMON=1

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
STATE="$RUNTIME_DIR/k8s"
# A state directory reached through a symlink (another checkout sharing this cluster) goes by its real path: daemons
# are recognised by it in their command lines, so every checkout must name it alike or each starts a cluster of its own.
if [[ -d "$STATE" ]]; then STATE="$(cd -P "$STATE" && pwd)"; fi
K8S_VERSION="${SWITCHYARD_K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${SWITCHYARD_K8S_ETCD_VERSION:-v3.6.16}"
CACHE_ROOT="${SWITCHYARD_K8S_CACHE:-$HOME/.cache/switchyard-k8s}"
TIMEOUT="${SWITCHYARD_K8S_TIMEOUT:-120}"
NODE_NAME="${SWITCHYARD_K8S_NODE_NAME:-switchyard-node}"
POD_SUBNET="${SWITCHYARD_K8S_POD_SUBNET:-10.244.0.0/24}"
SERVICE_SUBNET="${SWITCHYARD_K8S_SERVICE_SUBNET:-10.96.0.0/24}"
BRIDGE="${SWITCHYARD_K8S_BRIDGE:-sy-k8s0}"
# The namespace an engine uses by default (SWITCHYARD_K8S_NAMESPACE's default), and the one the test suites use, so
# that an engine a person starts from engine.env and the suites' engines do not see each other's pods.
ENGINE_NAMESPACE="switchyard"
TEST_NAMESPACE="switchyard-test"
# A closed port on loopback: every HTTP(S) client of the daemons is sent there for anything not on loopback, so
# even an image pull someone asks for (imagePullPolicy Always) cannot leave the machine.
NO_EGRESS_PROXY="http://127.0.0.1:9"

PKI="$STATE/pki"
LOGS="$STATE/logs"
RUN="$STATE/run"
CTRD="$STATE/containerd"
KUBECONFIG_FILE="$STATE/kubeconfig"
# What an engine needs in its environment to use this cluster (written by start, beside the kubeconfig).
ENGINE_ENV_FILE="$STATE/engine.env"

# The binaries' directory (set by build) and the containerd socket's directory (socket_dir).
BIN=""
SOCK=""

say() { printf '[k8s] %s\n' "$*" >&2; }
die() {
  printf '[k8s] ERROR: %s\n' "$*" >&2
  exit 1
}

# Runs a command with its output appended to a log; on failure shows the log's tail.
run_logged() {
  local log="$1"
  shift
  if ! "$@" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    return 1
  fi
}

go_version() { go env GOVERSION; }

# ----------------------------------------------------------------------------------------------------------------
# Ports
# ----------------------------------------------------------------------------------------------------------------

# Free for a daemon: nothing listens there. SO_REUSEADDR as the daemons (Go) bind, so that the connections of a
# stopped cluster still in TIME_WAIT do not count (else each restart would move the API server's port).
port_free() {
  python3 -c 'import socket,sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}
# A free port outside the kernel's ephemeral range (scripts/free_port.py); args: ports already given.
free_port() { python3 "$REPO/scripts/free_port.py" "$@"; }

PORT_NAMES=(ETCD ETCD_PEER API KUBELET SCHEDULER CONTROLLER_MANAGER)
ETCD_PORT="" ETCD_PEER_PORT="" API_PORT="" KUBELET_PORT="" SCHEDULER_PORT="" CONTROLLER_MANAGER_PORT=""

load_ports() {
  [[ -f "$STATE/ports.env" ]] || return 1
  # shellcheck source=/dev/null # choose_ports writes it at run time: nothing to follow here
  source "$STATE/ports.env"
}

# Ports: $SWITCHYARD_K8S_<NAME>_PORT, else the one kept from an earlier start (so the kubeconfig stays the same), else
# a free one. A kept port that someone else took meanwhile is replaced.
choose_ports() {
  local name var kept env_value port given=()
  load_ports || true
  : >"$STATE/ports.env.tmp"
  for name in "${PORT_NAMES[@]}"; do
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
      port="$(free_port "${given[@]}")"
    fi
    given+=("$port")
    printf -v "$var" '%s' "$port"
    printf '%s=%s\n' "$var" "$port" >>"$STATE/ports.env.tmp"
  done
  mv "$STATE/ports.env.tmp" "$STATE/ports.env"
}

# Unix sockets must fit in 108 bytes (the shims add nothing here: containerd 1.6 puts theirs in /run/containerd/s).
socket_dir() {
  if ((${#RUN} <= 80)); then
    echo "$RUN"
  else
    echo "/run/switchyard-k8s-$(printf '%s' "$STATE" | sha256sum | cut -c1-12)"
  fi
}

# ----------------------------------------------------------------------------------------------------------------
# PKI and kubeconfigs
# ----------------------------------------------------------------------------------------------------------------

# A leaf certificate from the throwaway CA, unless it exists: name, subject, extendedKeyUsage, subjectAltName (may
# be empty).
leaf_cert() {
  local name="$1" subject="$2" eku="$3" san="$4" ext
  [[ -f "$PKI/$name.crt" && -f "$PKI/$name.key" ]] && return 0
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
  chmod 600 "$PKI/$name.key" "$PKI/$name.crt"
}

# Once per cluster: the CA, the service account key pair and the static tokens (admin in system:masters; the
# kubelet as system:node:<node>). Then every certificate not made yet (a cluster made by an older k8s.sh gets the
# control plane's on its next start): serving certs for 127.0.0.1, the API server's kubelet client, and the
# scheduler's and controller-manager's clients, whose names the API server's default RBAC bindings know.
make_pki() {
  if [[ ! -f "$PKI/done" ]]; then
    rm -rf "$PKI" && mkdir -p "$PKI" && chmod 700 "$PKI"
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=switchyard-k8s-ca" -days 3650 -out "$PKI/ca.crt" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null ||
      die "openssl failed making the CA"
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
  fi
  # The CA of the front proxy (requestheader) the API server trusts for identities in headers: nothing is given a
  # cert from it (no aggregated API servers here), but the scheduler and the controller manager read it from the
  # API server's extension-apiserver-authentication config map and keep logging its absence otherwise.
  if [[ ! -f "$PKI/front-proxy-ca.crt" ]]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/front-proxy-ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/front-proxy-ca.key" -subj "/CN=switchyard-k8s-front-proxy-ca" -days 3650 \
      -out "$PKI/front-proxy-ca.crt" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null || die "openssl failed making the front proxy CA"
    chmod 600 "$PKI/front-proxy-ca.key" "$PKI/front-proxy-ca.crt"
  fi
  leaf_cert apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  leaf_cert kubelet "/CN=system:node:$NODE_NAME/O=system:nodes" serverAuth "IP:127.0.0.1,DNS:$NODE_NAME"
  leaf_cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" clientAuth ""
  leaf_cert kube-scheduler "/CN=system:kube-scheduler" clientAuth ""
  leaf_cert kube-scheduler-server "/CN=kube-scheduler" serverAuth "IP:127.0.0.1,DNS:localhost"
  leaf_cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth ""
  leaf_cert kube-controller-manager-server "/CN=kube-controller-manager" serverAuth "IP:127.0.0.1,DNS:localhost"
}

# write_kubeconfig FILE USER token TOKEN | write_kubeconfig FILE USER cert NAME (pki/NAME.crt and .key, embedded).
write_kubeconfig() {
  local file="$1" user="$2" kind="$3" value="$4" tmp credentials
  tmp="$file.tmp"
  if [[ "$kind" == token ]]; then
    credentials="    token: $value"
  else
    credentials="    client-certificate-data: $(base64 -w0 <"$PKI/$value.crt")
    client-key-data: $(base64 -w0 <"$PKI/$value.key")"
  fi
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
$credentials
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
  local pid=$! waited=0
  echo "$pid" >"$RUN/$name.pid"
  disown "$pid"
  # Until the forked shell has exec'd the daemon, its command line is this script's, and running_pid would take it
  # for a daemon that exited (a CI run failed so on a loaded machine: "etcd exited while waiting for etcd", its log
  # empty). Bounded: a daemon that never shows is reported by wait_for.
  while ! running_pid "$name" >/dev/null && kill -0 "$pid" 2>/dev/null && ((waited++ < 200)); do
    sleep 0.05
  done
}

# wait_for WHAT DAEMON CHECK [SECONDS]: polls CHECK until it passes; fails at once if DAEMON (when named) exits.
wait_for() {
  local what="$1" name="$2" check="$3" limit="${4:-$TIMEOUT}" deadline pid
  deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    "$check" && return 0
    if [[ -n "$name" ]] && ! pid="$(running_pid "$name")"; then
      tail -n 30 "$LOGS/$name.log" >&2 || true
      die "$name exited while waiting for $what (log: $LOGS/$name.log)"
    fi
    sleep 0.25
  done
  [[ -n "$name" ]] && tail -n 30 "$LOGS/$name.log" >&2
  die "timed out after $limit s waiting for $what${name:+ (log: $LOGS/$name.log)}"
}

# api METHOD PATH [curl args...]: the admin's request to the API server; prints the body, fails on HTTP errors.
api() {
  local method="$1" path="$2"
  shift 2
  curl -fsS --max-time 10 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/admin.token")" \
    -X "$method" "https://127.0.0.1:$API_PORT$path" "$@"
}

# Creates an object unless it exists (409 Conflict is fine).
ensure_object() {
  local path="$1" body="$2" code
  code="$(api POST "$path" -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d "$body" 2>/dev/null ||
    true)"
  [[ "$code" == 201 || "$code" == 409 ]] || die "POST $path answered HTTP $code"
}

# A component's /healthz on 127.0.0.1:<port>, its serving cert checked against the cluster CA.
healthz() {
  [[ "$(curl -fsS --max-time 2 --cacert "$PKI/ca.crt" "https://127.0.0.1:$1/healthz" 2>/dev/null)" == ok ]]
}
