#!/bin/sh
# Installs npm into the sandbox image on the Dockerfile path (the offline path adds the same files to its import
# stream, scripts/sandbox-image.mjs): the registry tarball named in npm.txt, checked against its integrity.
set -eu
PIN_FILE="${1:?usage: install-npm.sh <npm.txt>}"
pin="$(sed -e 's/#.*//' "$PIN_FILE" | tr -s ' \t\r\n' ' ')"
# shellcheck disable=SC2086 # the pin is two words, split on purpose
set -- $pin
version="$1"
integrity="$2"
curl -fsSL -o /tmp/npm.tgz "https://registry.npmjs.org/npm/-/npm-$version.tgz"
python3 -c 'import base64,hashlib,sys; d=base64.b64encode(hashlib.sha512(open("/tmp/npm.tgz","rb").read()).digest()).decode(); sys.exit(0 if "sha512-"+d==sys.argv[1] else "npm tarball integrity mismatch")' "$integrity"
mkdir -p /usr/local/lib/node_modules/npm /usr/local/bin
tar -xzf /tmp/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 --no-same-owner
chmod 0755 /usr/local/lib/node_modules/npm/bin/npm-cli.js /usr/local/lib/node_modules/npm/bin/npx-cli.js
ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm
ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx
rm -f /tmp/npm.tgz
