#!/usr/bin/env bash
# go/run-client.sh: installs and runs the Go row of the client matrix (issue #9) for one client.
#   run-client.sh <franz-go|sarama> BOOTSTRAP quick|full RESULT_JSON
#   run-client.sh build    (installs and builds only, then prints the binary's path: compat-tests/sasl/clients.sh
#                           runs it as `gomatrix -client franz-sasl ...`, see sasl.go)
# The module here (go.mod/go.sum pin franz-go, kadm and sarama) needs Go >= 1.26 (its dependencies' go
# lines). Install path, all through the Go module proxy, into compat-tests/.cache/clients/go:
#   - go >= 1.26 on PATH: used as it is;
#   - go 1.21..1.25: GOTOOLCHAIN=go1.27.3, the go command fetches that toolchain from the proxy itself;
#   - go < 1.21 (Debian bookworm's golang-go is 1.19, which has no GOTOOLCHAIN): the same toolchain module
#     golang.org/toolchain@v0.0.1-go1.27.3.linux-<arch> is fetched with `go mod download` and its bin/go used;
#   - no go at all: result.json with install_error (apt-get install golang-go, then this path).
# If the install fails the result has install_error and no steps; the script exits 0 in every case where
# it wrote a result (the contract in ../README.md).
set -uo pipefail
client=$1 bootstrap=${2:-} mode=${3:-} result=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cache=$repo/compat-tests/.cache/clients/go
mkdir -p "$cache"
export GOMODCACHE=$cache/mod GOPATH=$cache/gopath GOCACHE=${GOCACHE:-$cache/build} GOFLAGS=-buildvcs=false
TOOLCHAIN=go1.27.3

install_error() {
    [ "$client" = build ] && { echo "go: install failed: $1" >&2; exit 1; }
    python3 - "$result" "$client" "$1" <<'PY'
import json, sys
json.dump({"client": sys.argv[2], "version": "unknown", "language": "Go", "install_error": sys.argv[3], "steps": []},
          open(sys.argv[1], "w"), indent=2)
PY
    echo "$client: install failed: $1"
    exit 0
}

GO=$(command -v go || true)
[ -n "$GO" ] || install_error "no go command on PATH (Debian: apt-get install golang-go; Go >= 1.26 or any Go with the module proxy reachable)"
minor=$("$GO" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
[ -n "$minor" ] || minor=$("$GO" version | sed -n 's/.*go1\.\([0-9]*\).*/\1/p')
if [ "${minor:-0}" -ge 26 ]; then
    :
elif [ "${minor:-0}" -ge 21 ]; then
    export GOTOOLCHAIN=$TOOLCHAIN
else
    arch=$("$GO" env GOARCH)
    mod=golang.org/toolchain@v0.0.1-$TOOLCHAIN.linux-$arch
    dir=$(cd "$cache" && GO111MODULE=on "$GO" mod download -json "$mod" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
    [ -n "$dir" ] && [ -d "$dir/bin" ] || install_error "go 1.$minor is older than 1.21 and fetching $mod from the module proxy failed"
    chmod -R u+w "$dir" && chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/* 2>/dev/null # module zips keep no exec bits
    GO=$dir/bin/go
    export GOTOOLCHAIN=local
fi
bin=$cache/gomatrix
if ! (cd "$here" && "$GO" build -o "$bin" .) >"$cache/build.log" 2>&1; then
    install_error "go build of compat-tests/clients/go failed: $(tail -3 "$cache/build.log" | tr '\n' ' ')"
fi
[ "$client" = build ] && { echo "$bin"; exit 0; }
"$bin" -client "$client" -bootstrap "$bootstrap" -mode "$mode" -out "$result"
[ -s "$result" ] && exit 0 || exit 1
