#!/usr/bin/env bash
# A throwaway Neo4j Community 5.26 for the tests (embedded, Bolt on 127.0.0.1), from test/neo4j-launcher.
#
#   bash scripts/neo4j.sh start [name]    # start instance <name> (default "test"); idempotent; prints its URI
#   bash scripts/neo4j.sh stop [name]     # stop it, keeping its data dir and port (start again = restart)
#   bash scripts/neo4j.sh clean [name]    # stop it and delete its data
#   bash scripts/neo4j.sh status [name]   # exit 0 and print the URI if it answers, 1 if not
#   bash scripts/neo4j.sh build           # only build the launcher (done by start when needed)
#
# - Build: the Maven project's jar and runtime classpath, plus a class-data-sharing archive made by one
#   training start (cuts a start from ~13 s to ~4 s on 2 cores), cached under
#   $SWITCHYARD_RUNTIME_DIR/neo4j-launcher/<hash of pom, sources and java version>/. The jars themselves
#   stay in Maven's cache (~/.m2): the first build downloads them from Maven Central, later ones are offline.
# - Instance <name> lives in $SWITCHYARD_RUNTIME_DIR/neo4j/<name>/: data/, launcher.log, pid, port, uri,
#   password. The port is picked free on the first start and kept, so a restart serves the same URI.
# - Auth is on: user neo4j, password $SWITCHYARD_NEO4J_PASSWORD (default switchyard-test).
# - The JVM is kept small: -Xmx${SWITCHYARD_NEO4J_HEAP:-512m}, ${SWITCHYARD_NEO4J_PAGECACHE_MIB:-128} MiB page cache.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNTIME_DIR="${SWITCHYARD_RUNTIME_DIR:-$REPO/.runtime}"
PROJECT="$REPO/test/neo4j-launcher"
TIMEOUT="${SWITCHYARD_NEO4J_TIMEOUT:-120}"
PASSWORD="${SWITCHYARD_NEO4J_PASSWORD:-switchyard-test}"
HEAP="${SWITCHYARD_NEO4J_HEAP:-512m}"
PAGECACHE_MIB="${SWITCHYARD_NEO4J_PAGECACHE_MIB:-128}"
MAIN=dev.switchyard.neo4j.Launcher

say() { printf '[neo4j] %s\n' "$*" >&2; }
die() { printf '[neo4j] ERROR: %s\n' "$*" >&2; exit 1; }

java_bin() { if [[ -n "${JAVA_HOME:-}" ]]; then echo "$JAVA_HOME/bin/java"; else echo java; fi; }

ensure_tools() {
  local need=()
  command -v "$(java_bin)" >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || need+=(maven)
  [[ ${#need[@]} -eq 0 ]] && return 0
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
      die "apt-get install ${need[*]} failed"
  else
    die "missing ${need[*]}: install Java 17+ and Maven (sudo apt-get install -y ${need[*]})"
  fi
}

build_hash() {
  {
    cat "$PROJECT/pom.xml"
    find "$PROJECT/src" -type f -print0 | sort -z | xargs -0 cat
    "$(java_bin)" -version 2>&1
  } | sha256sum | cut -c1-16
}

# Prints the cache dir holding launcher.jar, classpath.txt and (when the JVM could make it) cds.jsa.
build() {
  ensure_tools
  local hash cache
  hash="$(build_hash)"
  cache="$RUNTIME_DIR/neo4j-launcher/$hash"
  [[ -f "$cache/ready" ]] && { echo "$cache"; return 0; }
  mkdir -p "$RUNTIME_DIR/neo4j-launcher"
  exec 9>"$RUNTIME_DIR/neo4j-launcher/.lock"
  flock 9 # another start may be building the same thing
  if [[ ! -f "$cache/ready" ]]; then
    # Built in place (under the lock): the archive records the classpath, so the jar must not move later.
    local t0=$SECONDS dir="$cache"
    rm -rf "$dir" && mkdir -p "$dir"
    say "building the launcher (the first build downloads Neo4j's jars from Maven Central into ~/.m2)"
    if ! mvn -q -B -f "$PROJECT/pom.xml" -Dlauncher.buildDir="$dir/target" -DskipTests \
      package dependency:build-classpath -Dmdep.outputFile="$dir/classpath.txt" -Dmdep.includeScope=runtime \
      >"$dir/mvn.log" 2>&1; then
      tail -n 30 "$dir/mvn.log" >&2
      die "maven build failed (log: $dir/mvn.log)"
    fi
    cp "$dir"/target/neo4j-launcher-*.jar "$dir/launcher.jar"
    rm -rf "$dir/target"
    # Class-data sharing: one training start records the classes Neo4j loads; later starts map them.
    local train="$dir/train" port
    port="$(free_port)"
    say "training start for the class-data-sharing archive"
    "$(java_bin)" -Xmx"$HEAP" -XX:ArchiveClassesAtExit="$dir/cds.jsa" -cp "$(classpath "$dir")" "$MAIN" \
      "$train" "$port" "$PASSWORD" >"$dir/train.log" 2>&1 &
    local pid=$!
    # Stopped whether or not it got ready in time: a training start slower than the timeout (a loaded machine) must
    # not leave this script waiting on a JVM that runs on.
    wait_ready "$pid" "$dir/train.log" || say "training start not ready in ${TIMEOUT} s; stopping it"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$train"
    [[ -s "$dir/cds.jsa" ]] || say "no class-data-sharing archive (starts will be slower): see $dir/train.log"
    touch "$cache/ready"
    say "launcher built in $((SECONDS - t0)) s ($cache)"
    # Older builds (~100 MB each with their archive) go; a JVM still running from one keeps its open files.
    find "$RUNTIME_DIR/neo4j-launcher" -mindepth 1 -maxdepth 1 -type d ! -path "$cache" -exec rm -rf {} +
  fi
  flock -u 9
  echo "$cache"
}

classpath() { echo "$1/launcher.jar:$(cat "$1/classpath.txt")"; }

# A free port outside the kernel's ephemeral range (scripts/free_port.py).
free_port() { python3 "$REPO/scripts/free_port.py"; }

# Waits for the READY line of a starting launcher; fails early if the JVM dies.
wait_ready() {
  local pid="$1" log="$2" deadline=$((SECONDS + TIMEOUT))
  while ((SECONDS < deadline)); do
    grep -q '^READY ' "$log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

instance_dir() {
  local name="${1:-test}"
  [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || die "bad instance name: $name"
  local dir="$RUNTIME_DIR/neo4j/$name"
  # Through a symlink (another checkout sharing this server) it goes by its real path: the running server is
  # recognised by it in its command line.
  if [[ -d "$dir" ]]; then dir="$(cd -P "$dir" && pwd)"; fi
  echo "$dir"
}

# Prints the pid of the instance's launcher if it is still running.
running_pid() {
  local dir="$1" pid
  [[ -f "$dir/pid" ]] || return 1
  pid="$(cat "$dir/pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$MAIN $dir/data " || return 1
  echo "$pid"
}

start() {
  local dir cache port pid t0=$SECONDS
  dir="$(instance_dir "${1:-}")"
  if pid="$(running_pid "$dir")"; then
    say "already running (pid $pid)"
    cat "$dir/uri"
    return 0
  fi
  cache="$(build)"
  mkdir -p "$dir/data"
  [[ -f "$dir/port" ]] || free_port >"$dir/port"
  port="$(cat "$dir/port")"
  local cds=()
  [[ -s "$cache/cds.jsa" ]] && cds=(-XX:SharedArchiveFile="$cache/cds.jsa" -Xshare:auto)
  : >"$dir/launcher.log"
  # setsid: its own session, so the caller's terminal signals and process-group kills do not reach it.
  setsid "$(java_bin)" -Xmx"$HEAP" -Dswitchyard.pagecacheMiB="$PAGECACHE_MIB" "${cds[@]}" \
    -cp "$(classpath "$cache")" "$MAIN" \
    "$dir/data" "$port" "$PASSWORD" >>"$dir/launcher.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$dir/pid"
  if ! wait_ready "$pid" "$dir/launcher.log"; then
    tail -n 30 "$dir/launcher.log" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
    die "Neo4j did not start within ${TIMEOUT} s (log: $dir/launcher.log)"
  fi
  echo "bolt://127.0.0.1:$port" >"$dir/uri"
  echo "$PASSWORD" >"$dir/password"
  say "started in $((SECONDS - t0)) s: bolt://127.0.0.1:$port (pid $pid, data $dir/data)"
  cat "$dir/uri"
}

stop() {
  local dir pid
  dir="$(instance_dir "${1:-}")"
  if ! pid="$(running_pid "$dir")"; then
    rm -f "$dir/pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "still running after 30 s: killing pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
  say "stopped"
}

clean() {
  local dir
  dir="$(instance_dir "${1:-}")"
  stop "${1:-}"
  rm -rf "$dir"
}

status() {
  local dir pid
  dir="$(instance_dir "${1:-}")"
  pid="$(running_pid "$dir")" || { say "not running"; return 1; }
  cat "$dir/uri"
}

case "${1:-}" in
  start | stop | clean | status) "$1" "${2:-}" ;;
  build) build >/dev/null ;;
  *) die "usage: $0 start|stop|clean|status [name] | build" ;;
esac
