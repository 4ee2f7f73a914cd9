#!/usr/bin/env bash
# js/run-client.sh: installs and runs the JavaScript row of the client matrix (issue #9) for one client.
#   run-client.sh <kafkajs|platformatic> BOOTSTRAP quick|full RESULT_JSON
# Install: `npm ci` from the committed package-lock.json (kafkajs 2.2.4, @platformatic/kafka 1.35.0, exact
# versions) into compat-tests/.cache/clients/js/node_modules, linked as js/node_modules (gitignored); redone
# only when the lock file changes. Node.js: kafkajs runs on Node 14+ (Debian bookworm's nodejs 18 included);
# @platformatic/kafka 1.35.0 needs Node >= 20.19.4 (its 2.x needs >= 22.22), so on an older Node its row is
# one install_error with that reason. If the install fails the result has install_error and no steps; the
# script exits 0 whenever it wrote a result (the contract in ../README.md).
set -uo pipefail
client=$1 bootstrap=$2 mode=$3 result=$4
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cache=$repo/compat-tests/.cache/clients/js
mkdir -p "$cache"

install_error() {
    python3 - "$result" "$client" "$1" <<'PY'
import json, sys
json.dump({"client": sys.argv[2], "version": "unknown", "language": "JavaScript", "install_error": sys.argv[3], "steps": []},
          open(sys.argv[1], "w"), indent=2)
PY
    echo "$client: install failed: $1"
    exit 0
}

command -v node >/dev/null && command -v npm >/dev/null ||
    install_error "no node/npm on PATH (Debian: apt-get install nodejs npm)"
nodever=$(node -p 'process.versions.node')
if [ "$client" = platformatic ]; then
    node -e 'const [a,b,c]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&(b>19||(b===19&&c>=4)))?0:1)' ||
        install_error "@platformatic/kafka 1.35.0 needs Node.js >= 20.19.4, this is $nodever (Debian bookworm's nodejs is 18)"
fi
if ! cmp -s "$here/package-lock.json" "$cache/package-lock.json" || [ ! -d "$cache/node_modules" ]; then
    cp "$here/package.json" "$here/package-lock.json" "$cache/"
    (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error) >"$cache/npm.log" 2>&1 ||
        { rm -f "$cache/package-lock.json"; install_error "npm ci failed: $(tail -3 "$cache/npm.log" | tr '\n' ' ')"; }
fi
ln -sfn "$cache/node_modules" "$here/node_modules"
node "$here/main.mjs" "$client" "$bootstrap" "$mode" "$result"
[ -s "$result" ] && exit 0 || exit 1
