#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine; start one if not.
#
#   bash scripts/docker-engine.sh           # ensure an engine runs (idempotent)
#   bash scripts/docker-engine.sh status    # exit 0 if an engine answers, 1 if not
#   bash scripts/docker-engine.sh stop      # stop the dockerd THIS script started (pid file)
#
# - gVisor for the one-off container tier: the runsc that scripts/k8s.sh builds from the Go module proxy when it is
#   built (scripts/gvisor-common.sh: a newer gVisor, the same as the test cluster's); else Debian's `runsc`,
#   installed with apt when missing as root (otherwise the command to run is printed; the engine then uses runc).
#   Run this script again once that build is done (scripts/test.sh does) and the engine it started switches to it.
#   The daemons this script starts register it as the Docker runtime `runsc` (arguments: RUNSC_ARGS below) through a daemon config file,
#   $SWITCHYARD_RUNTIME_DIR/dockerd.json (plus /etc/docker/daemon.json, if any), passed with --config-file. It is
#   never the default runtime: the pooled tier stays on runc.
# - If an engine already answers (`docker info`, or GET /_ping on the socket) and has the runtime (or runsc is
#   not installed), nothing is done. One that lacks it: when this script started it (pid file), it is told to
#   reload its config (SIGHUP) or, if it was started without our config file, restarted with it; any other
#   daemon is left alone and how to add the runtime is printed.
# - Else, as root: install Debian's `docker.io` if `dockerd` is missing, then start
#   `dockerd --bridge=none --iptables=false` in the background (nohup + setsid), logging to
#   $SWITCHYARD_RUNTIME_DIR/dockerd.log (default <repo>/.runtime/) with the pid in dockerd.pid,
#   and wait up to $SWITCHYARD_DOCKERD_TIMEOUT seconds (default 60) for the socket to answer.
# - The engine only ever starts sandboxes with `--network none`, so the daemon runs without a
#   bridge and without touching iptables: no docker0, no NAT rules, no private address ranges.
# - Without systemd (containers, CI VMs), apt's post-install must not try to start the packaged
#   service (its init script would start a *default* dockerd with a bridge): during the install a
#   temporary policy-rc.d that denies service starts is put in place if none exists.
#   With systemd as PID 1, the packaged docker.service is left to start itself and is used as is.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
LOG_FILE="$RUNTIME_DIR/dockerd.log"
PID_FILE="$RUNTIME_DIR/dockerd.pid"
CONFIG_FILE="$RUNTIME_DIR/dockerd.json"
SOCKET="/var/run/docker.sock"
TIMEOUT="${SWITCHYARD_DOCKERD_TIMEOUT:-60}"
# Docker's own default config; a daemon started with --config-file reads only that file, so ours includes it.
SYSTEM_CONFIG="/etc/docker/daemon.json"
CONFIG_CHANGED=0
# runsc's arguments (docker/README.md says why each): no KVM needed; no network of its own (sandboxes have none);
# the container's seccomp profile applied to the code; the session's egress proxy socket reachable.
RUNSC_ARGS='["--platform=ptrace", "--network=none", "--oci-seccomp", "--host-uds=open"]'

say() { printf '[docker-engine] %s\n' "$*"; }
die() { printf '[docker-engine] ERROR: %s\n' "$*" >&2; exit 1; }

engine_answers() {
  # Socket ping first: cheap, and independent of the CLI/daemon API version pairing.
  if [[ -S "$SOCKET" ]] && command -v curl >/dev/null 2>&1; then
    if [[ "$(curl -fsS --max-time 3 --unix-socket "$SOCKET" http://localhost/_ping 2>/dev/null)" == "OK" ]]; then
      return 0
    fi
  fi
  # `docker info` also covers DOCKER_HOST / contexts pointing elsewhere.
  if command -v docker >/dev/null 2>&1; then
    timeout 10 docker info >/dev/null 2>&1 && return 0
  fi
  return 1
}

our_pid() {
  # Prints the pid from our pid file if that process is still a dockerd.
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" == "dockerd" ]] || return 1
  echo "$pid"
}

have_systemd() { [[ -d /run/systemd/system ]]; }

# shellcheck source=scripts/gvisor-common.sh
source "$REPO/scripts/gvisor-common.sh"

runsc_path() {
  local built
  built="$(built_runsc)"
  if [[ -n "$built" ]]; then echo "$built"; else command -v runsc 2>/dev/null || true; fi
}

# Installs Debian's runsc (gVisor) when missing. Never fatal: without it the engine runs the one-off tier on runc.
ensure_runsc() {
  [[ -n "$(runsc_path)" ]] && return 0
  if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    say "gVisor (runsc) is not installed: the one-off container tier will use runc (the host kernel)."
    say "  to add it: sudo apt-get install runsc && bash scripts/docker-engine.sh"
    return 0
  fi
  mkdir -p "$RUNTIME_DIR"
  export DEBIAN_FRONTEND=noninteractive
  local policy_out
  policy_out="$(apt-cache policy runsc 2>/dev/null || true)"
  if [[ "$policy_out" != *"Candidate: "[0-9]* ]]; then
    say "apt-get update"
    apt-get update -qq >/dev/null 2>&1 || true
  fi
  say "installing gVisor (apt-get install --no-install-recommends runsc)"
  if ! apt-get install -y -qq --no-install-recommends runsc >"$RUNTIME_DIR/apt-runsc.log" 2>&1; then
    tail -n 5 "$RUNTIME_DIR/apt-runsc.log" >&2 || true
    say "warning: apt-get install runsc failed (log: $RUNTIME_DIR/apt-runsc.log); the one-off tier will use runc"
    return 0
  fi
  say "installed $(runsc --version 2>/dev/null | head -n1 || echo runsc)"
}

# The daemon config of the dockerds this script starts: Docker's default config (when there is one) plus the runsc
# runtime when runsc is installed. Rewritten only when its content changes.
write_daemon_config() {
  local runsc content
  runsc="$(runsc_path)"
  mkdir -p "$RUNTIME_DIR"
  if [[ -s "$SYSTEM_CONFIG" ]]; then
    content="$(
      RUNSC="$runsc" RUNSC_ARGS="$RUNSC_ARGS" SYSTEM_CONFIG="$SYSTEM_CONFIG" python3 -c '
import json, os, sys
with open(os.environ["SYSTEM_CONFIG"]) as f:
    config = json.load(f)
if os.environ["RUNSC"]:
    args = json.loads(os.environ["RUNSC_ARGS"])
    config.setdefault("runtimes", {})["runsc"] = {"path": os.environ["RUNSC"], "runtimeArgs": args}
json.dump(config, sys.stdout, indent=2, sort_keys=True)
'
    )" || die "cannot build $CONFIG_FILE from $SYSTEM_CONFIG (python3 missing, or not valid JSON?)"
  elif [[ -n "$runsc" ]]; then
    content="{\"runtimes\": {\"runsc\": {\"path\": \"$runsc\", \"runtimeArgs\": $RUNSC_ARGS}}}"
  else
    content='{}'
  fi
  CONFIG_CHANGED=0
  if [[ ! -f "$CONFIG_FILE" || "$(cat "$CONFIG_FILE")" != "$content" ]]; then
    printf '%s\n' "$content" >"$CONFIG_FILE"
    CONFIG_CHANGED=1
  fi
}

# Whether the answering engine has a runtime named runsc (GET /info on the socket, else `docker info`).
engine_has_runsc() {
  local info=""
  if [[ -S "$SOCKET" ]] && command -v curl >/dev/null 2>&1; then
    info="$(curl -fsS --max-time 5 --unix-socket "$SOCKET" http://localhost/info 2>/dev/null || true)"
  fi
  if [[ -z "$info" ]] && command -v docker >/dev/null 2>&1; then
    info="$(timeout 10 docker info --format '{{json .Runtimes}}' 2>/dev/null || true)"
  fi
  [[ "$info" == *'"runsc"'* ]]
}

# The engine answers: make sure it has the runsc runtime when runsc is installed. Ours is reloaded (SIGHUP: running
# containers keep running) or, when it was started without our config file, restarted; anyone else's is left as it
# is, with instructions.
ensure_runtime_registered() {
  local runsc pid
  runsc="$(runsc_path)"
  [[ -z "$runsc" ]] && return 0
  if pid="$(our_pid)" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config-file $CONFIG_FILE"; then
    write_daemon_config
    if [[ "$CONFIG_CHANGED" -eq 1 ]] || ! engine_has_runsc; then
      say "registering the runsc runtime with dockerd (pid $pid): reloading its config (SIGHUP)"
      kill -HUP "$pid"
      local waited=0
      # The reload is quick; give it a moment even when runsc was already there (new arguments).
      sleep 1
      until engine_has_runsc || ((waited >= 10)); do
        sleep 1
        waited=$((waited + 1))
      done
    fi
    engine_has_runsc && return 0
  fi
  engine_has_runsc && return 0
  if ! pid="$(our_pid)"; then
    say "this Docker engine has no runsc runtime, and it was not started by this script: left as it is."
    say "  the one-off tier uses runc until it has one. To add gVisor, put this in $SYSTEM_CONFIG and restart"
    say "  Docker (systemctl restart docker, or send dockerd SIGHUP):"
    say "    {\"runtimes\": {\"runsc\": {\"path\": \"$runsc\", \"runtimeArgs\": $RUNSC_ARGS}}}"
    return 0
  fi
  say "restarting dockerd (pid $pid) to register the runsc runtime (its running containers stop)"
  stop_ours "$pid"
  start_dockerd
}

# Stops the dockerd of our pid file and waits for it (and its socket) to go.
stop_ours() {
  local pid="$1"
  kill -TERM "$pid"
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$PID_FILE"; return 0; }
    sleep 1
  done
  die "dockerd (pid $pid) did not stop within 30s"
}

install_docker_io() {
  [[ "$(id -u)" -eq 0 ]] || die "dockerd is not installed and this is not root: install docker.io (apt-get install docker.io) or run as root"
  command -v apt-get >/dev/null 2>&1 || die "dockerd is not installed and apt-get is missing: install a Docker engine by hand"
  export DEBIAN_FRONTEND=noninteractive
  # apt-get update once, only if docker.io is not known to apt yet.
  local policy_out
  policy_out="$(apt-cache policy docker.io 2>/dev/null || true)"
  if [[ "$policy_out" != *"Candidate: "[0-9]* ]]; then
    say "apt-get update"
    apt-get update -qq || die "apt-get update failed"
  fi
  local policy=/usr/sbin/policy-rc.d temp_policy=0
  if ! have_systemd && [[ ! -e "$policy" ]]; then
    # No systemd: keep the package from starting its own (bridged) daemon via invoke-rc.d.
    printf '#!/bin/sh\n# temporary, from switchyard scripts/docker-engine.sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    temp_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  say "installing docker.io (apt-get install --no-install-recommends docker.io)"
  if ! apt-get install -y -qq --no-install-recommends docker.io >"$RUNTIME_DIR/apt-docker.io.log" 2>&1; then
    tail -n 20 "$RUNTIME_DIR/apt-docker.io.log" >&2 || true
    die "apt-get install docker.io failed (full log: $RUNTIME_DIR/apt-docker.io.log)"
  fi
  if [[ "$temp_policy" -eq 1 ]]; then
    rm -f "$policy"
    trap - EXIT
  fi
  command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd is still not on PATH"
  say "installed $(dockerd --version 2>/dev/null || echo dockerd)"
}

wait_for_engine() {
  local pid="${1:-}" waited=0
  while ((waited < TIMEOUT)); do
    if engine_answers; then return 0; fi
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      say "dockerd (pid $pid) exited; last log lines:"
      tail -n 25 "$LOG_FILE" >&2 || true
      [[ -n "${START_RETRY:-}" ]] && return 1
      die "dockerd failed to start (log: $LOG_FILE)"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  [[ -f "$LOG_FILE" ]] && tail -n 25 "$LOG_FILE" >&2
  die "no Docker engine answered on $SOCKET within ${TIMEOUT}s (log: $LOG_FILE)"
}

cmd_status() {
  if engine_answers; then say "engine answers"; exit 0; fi
  say "no engine answers"; exit 1
}

cmd_stop() {
  local pid
  if ! pid="$(our_pid)"; then say "no dockerd started by this script is running"; exit 0; fi
  say "stopping dockerd (pid $pid)"
  stop_ours "$pid"
  say "stopped"
}

cmd_start() {
  ensure_runsc
  if engine_answers; then
    ensure_runtime_registered
    say "engine answers ($(runtimes_line))"
    return 0
  fi
  bring_up
  ensure_runtime_registered
}

runtimes_line() { engine_has_runsc && echo 'runtimes: runc, runsc' || echo 'runtime: runc'; }

# No engine answers: wait for one coming up, or start one.
bring_up() {
  mkdir -p "$RUNTIME_DIR"

  # A daemon we (or someone) started may still be coming up: wait for it rather than start a second.
  local pid
  if pid="$(our_pid)"; then
    say "dockerd (pid $pid) from an earlier run is starting; waiting up to ${TIMEOUT}s"
    if START_RETRY=1 wait_for_engine "$pid"; then
      say "engine ready"
      return 0
    fi
    # It was stopping, not starting: wait for its children to go, then start a fresh one below.
    sleep 3
  fi
  if command -v pgrep >/dev/null 2>&1 && pid="$(pgrep -x dockerd | head -n1)" && [[ -n "$pid" ]]; then
    if [[ "$(id -u)" -ne 0 && -S "$SOCKET" && ! -w "$SOCKET" ]]; then
      die "a dockerd (pid $pid) runs but this user cannot use $SOCKET (run as root, or join the docker group)"
    fi
    say "a dockerd (pid $pid) not started by this script is running; waiting up to ${TIMEOUT}s for it"
    if START_RETRY=1 wait_for_engine "$pid"; then
      say "engine ready"
      return 0
    fi
    sleep 3
  fi

  if ! command -v dockerd >/dev/null 2>&1; then
    install_docker_io
    if engine_answers; then # e.g. systemd started the packaged service
      say "engine answers after install (packaged service)"
      return 0
    fi
  fi

  [[ "$(id -u)" -eq 0 ]] || die "starting dockerd needs root (or start the Docker service yourself)"
  if have_systemd && systemctl cat docker.service >/dev/null 2>&1; then
    say "systemd present: systemctl start docker"
    systemctl start docker || die "systemctl start docker failed (see: journalctl -u docker)"
    wait_for_engine ""
    say "engine ready (docker.service)"
    return 0
  fi
  start_dockerd
}

# Starts our dockerd (no bridge, no iptables, runsc registered through our config file) and waits for it.
start_dockerd() {
  local pid
  write_daemon_config
  say "starting dockerd --bridge=none --iptables=false --config-file $CONFIG_FILE (log: $LOG_FILE)"
  {
    printf '\n===== %s scripts/docker-engine.sh start =====\n' "$(date -u +%FT%TZ)"
  } >>"$LOG_FILE"
  local attempt
  for attempt in 1 2; do
    # A daemon killed moments ago can leave its pid file and socket behind; the next start then exits at once.
    if [[ -f /var/run/docker.pid ]] && ! kill -0 "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null; then
      rm -f /var/run/docker.pid
    fi
    # setsid: own session, so stopping the shell/job that ran this script does not stop the daemon.
    setsid nohup dockerd --config-file "$CONFIG_FILE" --bridge=none --iptables=false --ip6tables=false \
      >>"$LOG_FILE" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PID_FILE"
    if [[ "$attempt" -eq 1 ]]; then
      START_RETRY=1 wait_for_engine "$pid" && break
      say "retrying once in 3 s"
      sleep 3
    else
      wait_for_engine "$pid"
    fi
  done
  local driver
  driver="$(timeout 10 docker info --format '{{.Driver}}' 2>/dev/null || echo '?')"
  say "engine ready (dockerd pid $pid, storage driver $driver, $(runtimes_line))"
  if [[ "$driver" == "vfs" ]]; then
    say "warning: storage driver vfs (no overlayfs here): every layer is a full copy, builds and runs are slow"
  fi
}

case "${1:-start}" in
  start) cmd_start ;;
  status) cmd_status ;;
  stop) cmd_stop ;;
  *) die "usage: $0 [start|status|stop]" ;;
esac
