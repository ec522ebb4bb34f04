#!/usr/bin/env bash
# Installs the system packages Switchyard needs on Debian/Ubuntu.
#   system-deps.sh runtime  -> what the engine uses (bubblewrap); warns instead of failing when it can't install
#   system-deps.sh test     -> the same, and fails when something is missing
set -euo pipefail
mode="${1:-runtime}"

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 || need+=(util-linux)
[ -x /usr/bin/python3 ] || need+=(python3)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || need+=(e2fsprogs)
# Workspace images with checkpoints (snapshots) are btrfs; without it they are ext4 and checkpoints are copies.
[ -x /usr/sbin/mkfs.btrfs ] || [ -x /sbin/mkfs.btrfs ] || need+=(btrfs-progs)
# The tests' throwaway PostgreSQL (scripts/postgres.sh) runs Debian's server binaries; the engine itself only
# connects to one.
if [ "$mode" = test ]; then
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
  # `npm run lint` checks the shell scripts with it (scripts/lint-more.sh).
  command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
fi

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    msg="switchyard: missing system packages: ${need[*]} (install with: sudo apt-get install -y ${need[*]})"
    if [ "$mode" = test ]; then echo "$msg" >&2; exit 1; fi
    echo "$msg; the subprocess tier will report itself unavailable" >&2
    exit 0
  fi
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "switchyard: no apt-get here; install ${need[*]} with your package manager" >&2
  [ "$mode" = test ] && exit 1
  exit 0
fi

echo "switchyard: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >/dev/null
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
