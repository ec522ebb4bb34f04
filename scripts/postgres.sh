#!/usr/bin/env bash
# A throwaway PostgreSQL from Debian's packages (/usr/lib/postgresql/<version>/bin) on 127.0.0.1, for the tests
# and local replica runs.
#
#   bash scripts/postgres.sh start [name]    # start instance <name> (default "test"); idempotent; prints its URL
#   bash scripts/postgres.sh stop [name]     # stop it, keeping its data dir and port (start again = restart)
#   bash scripts/postgres.sh clean [name]    # stop it and delete its data
#   bash scripts/postgres.sh status [name]   # exit 0 and print the URL if it answers, 1 if not
#
# - Binaries: the highest version under /usr/lib/postgresql/; the `postgresql` package is installed with apt-get
#   when none is there (as root), else this fails saying so.
# - Instance <name> lives in $SWITCHYARD_RUNTIME_DIR/postgres/<name>/: data/, log (the server's), pg_ctl.log, port,
#   url and password (mode 600), and the server's Unix socket. The port is picked free on the first start and
#   kept, so a restart serves the same URL. The server listens on 127.0.0.1 only; fsync and the other durability
#   defaults are kept; max_connections 200, shared_buffers 32MB.
# - Auth: scram-sha-256 over TCP for role switchyard (LOGIN CREATEDB, random password), owner of database
#   switchyard: postgres://switchyard:<password>@127.0.0.1:<port>/switchyard. The superuser (named after the OS
#   user running the server) only connects through the socket, by peer auth.
# - initdb refuses to run as root: as root, the server runs as the `postgres` system user (the Debian package
#   creates it; created here if missing), which owns the instance dir.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
TIMEOUT="${SWITCHYARD_POSTGRES_TIMEOUT:-60}"
ROLE=switchyard
DATABASE=switchyard
SYSTEM_USER=postgres # the server's OS user when this runs as root

say() { printf '[postgres] %s\n' "$*" >&2; }
die() { printf '[postgres] ERROR: %s\n' "$*" >&2; exit 1; }

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# Prints the bin dir of the highest PostgreSQL version installed, if any.
find_bin() {
  local d
  d="$(find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/initdb' -printf '%h\n' 2>/dev/null |
    sort -t/ -k5,5V | tail -n 1)"
  [[ -n "$d" ]] || return 1
  echo "$d"
}

# Prints the bin dir, installing PostgreSQL first when none is there.
ensure_bin() {
  local bin
  bin="$(find_bin)" && { echo "$bin"; return 0; }
  if is_root && command -v apt-get >/dev/null 2>&1; then
    say "installing postgresql"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1; then
      apt-get update -qq >/dev/null
      apt-get install -y -qq --no-install-recommends postgresql >/dev/null ||
        die "apt-get install postgresql failed"
    fi
    bin="$(find_bin)" || die "postgresql installed, but no /usr/lib/postgresql/*/bin/initdb"
    echo "$bin"
  else
    die "PostgreSQL is missing (no /usr/lib/postgresql/*/bin/initdb): sudo apt-get install -y postgresql"
  fi
}

# The OS user the server runs as: $SYSTEM_USER when root (created if missing), else the current user.
ensure_server_user() {
  is_root || return 0
  id "$SYSTEM_USER" >/dev/null 2>&1 && return 0
  say "creating system user $SYSTEM_USER"
  useradd --system --home-dir /var/lib/postgresql --shell /bin/bash "$SYSTEM_USER" ||
    die "could not create system user $SYSTEM_USER"
}

# Runs a command as the server's OS user, from the instance dir (the caller's cwd may be closed to that user).
as_server() {
  local dir="$1"
  shift
  if is_root; then
    (cd "$dir" && runuser -u "$SYSTEM_USER" -- "$@")
  else
    (cd "$dir" && "$@")
  fi
}

# A free port outside the kernel's ephemeral range (scripts/free_port.py).
free_port() { python3 "$REPO/scripts/free_port.py"; }

instance_dir() {
  local name="${1:-test}"
  [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || die "bad instance name: $name"
  local dir="$RUNTIME_DIR/postgres/$name"
  # Through a symlink (another checkout sharing this server) it goes by its real path: the running server is
  # recognised by it in its command line.
  if [[ -d "$dir" ]]; then dir="$(cd -P "$dir" && pwd)"; fi
  echo "$dir"
}

# Prints the postmaster's pid if postmaster.pid names a live postgres serving this data dir.
running_pid() {
  local dir="$1" pid
  [[ -f "$dir/data/postmaster.pid" ]] || return 1
  pid="$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-D $dir/data " || return 1
  echo "$pid"
}

# After a kill: the lock files name a dead (or reused) pid, which the postmaster would refuse to start over.
remove_stale_locks() {
  local dir="$1"
  running_pid "$dir" >/dev/null && return 0
  if [[ -f "$dir/data/postmaster.pid" ]]; then
    say "removing a stale postmaster.pid"
    rm -f "$dir/data/postmaster.pid"
  fi
  rm -f "$dir"/.s.PGSQL.*
}

# Answers when role switchyard can log in over TCP and run a query.
answers() {
  local dir="$1" bin
  [[ -f "$dir/url" ]] || return 1
  bin="$(find_bin)" || return 1
  PGCONNECT_TIMEOUT=5 "$bin/psql" -X -q -t -A -c 'select 1' "$(cat "$dir/url")" 2>/dev/null | grep -qx 1
}

# initdb on an empty data dir (once), and the settings file it includes.
init_data() {
  local dir="$1" bin="$2" port="$3"
  if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    rm -rf "$dir/data" # a half-made one from an interrupted initdb
    mkdir -m 700 "$dir/data"
    is_root && chown "$SYSTEM_USER:" "$dir/data"
    say "initdb ($bin)"
    if ! as_server "$dir" "$bin/initdb" -D "$dir/data" --encoding=UTF8 --locale=C.UTF-8 \
      --auth-local=peer --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1; then
      tail -n 30 "$dir/initdb.log" >&2
      die "initdb failed (log: $dir/initdb.log)"
    fi
    echo "include 'switchyard.conf'" >>"$dir/data/postgresql.conf"
  fi
  cat >"$dir/data/switchyard.conf" <<EOF
# Written by scripts/postgres.sh at each start.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
shared_buffers = 32MB
EOF
  chmod 644 "$dir/data/switchyard.conf"
}

# Role switchyard (password from the instance dir) and its database, whatever already exists.
provision() {
  local dir="$1" bin="$2" port="$3"
  # The password goes in on stdin, not on psql's command line (which ps shows).
  as_server "$dir" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -d postgres >/dev/null <<SQL
\set pw '$(cat "$dir/password")'
SELECT format('CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD %L', :'pw')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') \gexec
ALTER ROLE $ROLE LOGIN CREATEDB PASSWORD :'pw';
SELECT 'CREATE DATABASE $DATABASE OWNER $ROLE'
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DATABASE') \gexec
SQL
}

start() {
  local dir bin port pid url t0=$SECONDS
  dir="$(instance_dir "${1:-}")"
  if pid="$(running_pid "$dir")" && answers "$dir"; then
    say "already running (pid $pid)"
    cat "$dir/url"
    return 0
  fi
  bin="$(ensure_bin)"
  ensure_server_user
  mkdir -p "$dir"
  chmod 700 "$dir"
  # The socket's path must fit in sun_path (107 bytes).
  ((${#dir} + 20 <= 107)) ||
    die "instance dir too long for a Unix socket: $dir (set a shorter SWITCHYARD_RUNTIME_DIR)"
  [[ -f "$dir/port" ]] || free_port >"$dir/port"
  port="$(cat "$dir/port")"
  if [[ ! -s "$dir/password" ]]; then
    (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(16))' >"$dir/password")
  fi
  chmod 600 "$dir/password"
  url="postgres://$ROLE:$(cat "$dir/password")@127.0.0.1:$port/$DATABASE"
  (umask 077 && echo "$url" >"$dir/url")
  if is_root; then
    chown "$SYSTEM_USER:" "$dir"
    [[ -d "$dir/data" ]] && chown -R "$SYSTEM_USER:" "$dir/data"
  fi
  if ! pid="$(running_pid "$dir")"; then
    init_data "$dir" "$bin" "$port"
    remove_stale_locks "$dir"
    : >"$dir/log"
    is_root && chown "$SYSTEM_USER:" "$dir/log"
    # setsid: its own session, so the caller's terminal signals and process-group kills do not reach it.
    if ! as_server "$dir" setsid -w "$bin/pg_ctl" start -D "$dir/data" -l "$dir/log" -w -t "$TIMEOUT" \
      >"$dir/pg_ctl.log" 2>&1; then
      tail -n 30 "$dir/log" "$dir/pg_ctl.log" >&2
      as_server "$dir" "$bin/pg_ctl" stop -D "$dir/data" -m immediate >/dev/null 2>&1 || true
      die "PostgreSQL did not start (waited up to ${TIMEOUT} s; log: $dir/log)"
    fi
    pid="$(running_pid "$dir")" || { tail -n 30 "$dir/log" >&2; die "PostgreSQL exited (log: $dir/log)"; }
  fi
  provision "$dir" "$bin" "$port" || { tail -n 30 "$dir/log" >&2; die "could not create role $ROLE"; }
  local deadline=$((SECONDS + TIMEOUT))
  until answers "$dir"; do
    ((SECONDS < deadline)) || { tail -n 30 "$dir/log" >&2; die "PostgreSQL does not answer on port $port"; }
    sleep 0.2
  done
  say "started in $((SECONDS - t0)) s: 127.0.0.1:$port (pid $pid, data $dir/data)"
  cat "$dir/url"
}

stop() {
  local dir pid bin
  dir="$(instance_dir "${1:-}")"
  [[ -d "$dir" ]] || return 0
  if ! pid="$(running_pid "$dir")"; then
    remove_stale_locks "$dir"
    return 0
  fi
  bin="$(find_bin)" || die "no /usr/lib/postgresql/*/bin/pg_ctl to stop pid $pid with"
  if ! as_server "$dir" "$bin/pg_ctl" stop -D "$dir/data" -m fast -w -t "$TIMEOUT" >/dev/null 2>&1; then
    say "still running after ${TIMEOUT} s: killing pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  remove_stale_locks "$dir"
  say "stopped"
}

clean() {
  local dir
  dir="$(instance_dir "${1:-}")"
  stop "${1:-}"
  rm -rf "$dir"
}

status() {
  local dir
  dir="$(instance_dir "${1:-}")"
  if ! running_pid "$dir" >/dev/null || ! answers "$dir"; then
    say "not running"
    return 1
  fi
  cat "$dir/url"
}

case "${1:-}" in
  start | stop | clean | status) "$1" "${2:-}" ;;
  *) die "usage: $0 start|stop|clean|status [name]" ;;
esac
