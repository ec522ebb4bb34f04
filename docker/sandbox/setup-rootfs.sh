#!/bin/sh
# Finishes the Switchyard sandbox root filesystem. Runs as root INSIDE the target rootfs, in both
# build paths, so they produce the same image:
#   - Dockerfile:   RUN sh /tmp/sandbox-build/setup-rootfs.sh /tmp/sandbox-build/packages.txt
#   - offline path: chroot <debootstrap dir> sh /tmp/sandbox-build/setup-rootfs.sh ...
#                   (scripts/sandbox-image.mjs; packages are already there from --include, so the
#                   install below is a no-op and only security/point updates are applied)
# Needs network to the Debian mirror (apt-get update/upgrade/install).
#
# Env: SANDBOX_USER, SANDBOX_UID, SANDBOX_GID (defaults from the Dockerfile's ARG lines).
set -eu

PACKAGES_FILE="${1:?usage: setup-rootfs.sh <packages.txt>}"
SANDBOX_USER="${SANDBOX_USER:-sandbox}"
SANDBOX_UID="${SANDBOX_UID:-10001}"
SANDBOX_GID="${SANDBOX_GID:-10001}"
export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C

# Like debian:*-slim: never install docs/man pages (keeps copyright files).
mkdir -p /etc/dpkg/dpkg.cfg.d
cat >/etc/dpkg/dpkg.cfg.d/90-switchyard-nodoc <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
EOF

# Packages (+ pending security/point updates).
packages="$(sed -e 's/#.*//' "$PACKAGES_FILE" | tr -s ' \t\r\n' ' ')"
apt-get update -qq
apt-get upgrade -y -qq --no-install-recommends
# shellcheck disable=SC2086 # word splitting of the package list is intended
apt-get install -y -qq --no-install-recommends $packages

# The unprivileged user the sandbox runs as (the engine may still pass --user <uid>:<gid>).
if ! getent group "$SANDBOX_GID" >/dev/null; then
  groupadd --gid "$SANDBOX_GID" "$SANDBOX_USER"
fi
if ! getent passwd "$SANDBOX_UID" >/dev/null; then
  useradd --uid "$SANDBOX_UID" --gid "$SANDBOX_GID" --home-dir "/home/$SANDBOX_USER" \
    --create-home --shell /bin/bash --no-log-init "$SANDBOX_USER"
fi
mkdir -p /workspace /opt/switchyard # runner/ is added on top by COPY / the import stream
# /etc/hosts (loopback names only: containers with networking disabled keep the image's) is written by the
# builder after this script, with the other files Docker manages at run time.
chown "$SANDBOX_UID:$SANDBOX_GID" /workspace
chmod 0755 /workspace
chmod 1777 /tmp

# Trim: apt lists/caches, docs, logs, identity files the runtime provides.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/lib/dpkg/*-old
find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find /usr/share/doc -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf /usr/share/man/* /usr/share/groff/* /usr/share/info/* /usr/share/lintian/* /usr/share/linda/*
find /var/log -type f -exec truncate -s 0 {} +
rm -f /etc/machine-id /var/lib/dbus/machine-id
: >/etc/machine-id
