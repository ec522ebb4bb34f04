#!/usr/bin/env bash
# Installs a real small package through the engine's egress proxy, from the package index THIS machine uses.
# A person runs it (CI uses the loopback index of test/e2e/egress.e2e-spec.ts); it needs Docker and the sandbox
# image (`npm start` sets both up once) and `npm run build`.
#
#   scripts/smoke-egress.sh              # installs `six`
#   SMOKE_PACKAGE=idna scripts/smoke-egress.sh
#
# It maps the machine's pip settings onto the engine's operator settings and prints each one:
#   PIP_INDEX_URL / `pip config` global.index-url  -> the index (default https://pypi.org/simple) and the hosts the
#                                                      session may reach (SWITCHYARD_EGRESS_ALLOWED, network.allow)
#   HTTPS_PROXY / https_proxy (http:// only)        -> SWITCHYARD_EGRESS_UPSTREAM_PROXY
#   PIP_CERT / `pip config` global.cert / REQUESTS_CA_BUNDLE / SSL_CERT_FILE
#                                                   -> SWITCHYARD_SANDBOX_CA_FILE
#   the index hosts' addresses that are not public  -> SWITCHYARD_EGRESS_TRUSTED_NETS (one /32 or /128 each)
# Then it starts an engine on a free loopback port with a scratch data dir, creates a session with network for the
# index hosts, runs `pip install <package>` (no flags) and imports it in a later action, and stops the engine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit

say() { printf '[smoke-egress] %s\n' "$*" >&2; }
package="${SMOKE_PACKAGE:-six}"
module="${SMOKE_MODULE:-${package//-/_}}"

pip_config() { python3 -m pip config get "$1" 2>/dev/null || true; }

index="${PIP_INDEX_URL:-$(pip_config global.index-url)}"
index="${index:-https://pypi.org/simple}"
index_host="$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).hostname or "")' "$index")"
if [[ -z "$index_host" ]]; then
  say "cannot read a host from the index URL $index"
  exit 2
fi
hosts=("$index_host")
# pypi.org's pages link their files on another host.
[[ "$index_host" == "pypi.org" ]] && hosts+=("files.pythonhosted.org")

upstream="${HTTPS_PROXY:-${https_proxy:-}}"
if [[ -n "$upstream" && "$upstream" != http://* ]]; then
  say "HTTPS_PROXY=$upstream is not an http:// proxy; going without an upstream"
  upstream=""
fi

ca="${PIP_CERT:-$(pip_config global.cert)}"
ca="${ca:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}"
[[ -n "$ca" && ! -r "$ca" ]] && { say "CA file $ca is not readable; going without"; ca=""; }

# Addresses of the index hosts the egress proxy would refuse as not public (a mirror, or an intercepting network).
trusted="$(
  for h in "${hosts[@]}"; do getent ahosts "$h" | awk '{print $1}'; done | sort -u | python3 -c '
import ipaddress, sys
nets = []
for line in sys.stdin:
    ip = ipaddress.ip_address(line.strip())
    if not ip.is_global:
        nets.append(f"{ip}/{ip.max_prefixlen}")
print(",".join(nets))
'
)"

allowed="$(IFS=,; echo "${hosts[*]}")"
say "package:                          $package (import $module)"
say "index:                            $index"
say "SWITCHYARD_EGRESS_ALLOWED:        $allowed"
say "SWITCHYARD_EGRESS_UPSTREAM_PROXY: ${upstream:-(none)}"
say "SWITCHYARD_SANDBOX_CA_FILE:       ${ca:-(none)}"
say "SWITCHYARD_EGRESS_TRUSTED_NETS:   ${trusted:-(none)}"

main=dist/apps/engine/src/main.js
if [[ ! -f "$main" ]]; then
  say "no $main: run npm run build first"
  exit 2
fi
data="$(mktemp -d /tmp/switchyard-smoke-egress-XXXXXX)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
api="http://127.0.0.1:$port"
log="$data/engine.log"
engine_pid=""
cleanup() {
  if [[ -n "$engine_pid" ]]; then
    kill "$engine_pid" 2>/dev/null || true
    wait "$engine_pid" 2>/dev/null || true
  fi
  rm -rf "$data"
}
trap cleanup EXIT

settings=(PORT="$port" HOST=127.0.0.1 SWITCHYARD_DATA_DIR="$data/data" SWITCHYARD_EGRESS_ALLOWED="$allowed")
[[ -n "$upstream" ]] && settings+=(SWITCHYARD_EGRESS_UPSTREAM_PROXY="$upstream")
[[ -n "$ca" ]] && settings+=(SWITCHYARD_SANDBOX_CA_FILE="$ca")
[[ -n "$trusted" ]] && settings+=(SWITCHYARD_EGRESS_TRUSTED_NETS="$trusted")
env "${settings[@]}" node "$main" >"$log" 2>&1 &
engine_pid=$!
say "engine pid $engine_pid on $api (log: $log)"

for _ in $(seq 1 120); do
  curl -fsS "$api/health" >/dev/null 2>&1 && break
  if ! kill -0 "$engine_pid" 2>/dev/null; then
    say "the engine stopped during start-up:"
    tail -20 "$log" >&2
    exit 1
  fi
  sleep 0.5
done

json() { python3 -c "import json, sys; print(json.dumps(sys.argv[1]))" "$1"; }
field() { python3 -c "import json, sys; d = json.load(sys.stdin); print(d$1)"; }

allow_json="$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1].split(",")))' "$allowed")"
sid="$(curl -fsS -X POST "$api/v1/sessions" -H 'content-type: application/json' \
  -d "{\"network\":{\"allow\":$allow_json}}" | field "['id']")"
say "session $sid"

action() {
  curl -sS -X POST "$api/v1/sessions/$sid/actions" -H 'content-type: application/json' -d "$1"
}

install="$(action "{\"type\":\"code\",\"language\":\"bash\",\"tier\":\"pooled\",\"timeoutMs\":180000,\"env\":{\"PIP_INDEX_URL\":$(json "$index")},\"code\":$(json "pip install $package 2>&1")}")"
printf '%s' "$install" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("--- pip install: status", r.get("status"))
print(r.get("stdout", ""))
for e in r.get("egress", []):
    print("egress:", e.get("host"), e.get("port"), "allowed" if e.get("allowed") else "refused", e.get("reason", ""))
for h in r.get("hints", []):
    print("hint:", h)
'
use="$(action "{\"type\":\"code\",\"language\":\"python\",\"tier\":\"pooled\",\"code\":$(json "import $module; print('imported', $module.__name__, 'from', $module.__file__)")}")"
if printf '%s' "$use" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("--- import: status", r.get("status"))
print(r.get("stdout", "") + r.get("stderr", ""))
sys.exit(0 if r.get("status") == "succeeded" else 1)
'; then
  say "ok: $package installed through the engine and imported"
else
  say "failed (engine log: last lines below)"
  tail -20 "$log" >&2
  exit 1
fi
