#!/bin/sh
# exit_codes.sh GREGOR: a refused configuration or command line stops the broker with exit status 2 (README
# "Configuration"), in whatever build GREGOR is (the release build in `make unit`, the ASan + UBSan build in
# make sanitize / sanitize-check, whose leak check would turn an exit that leaks into status 1), and --version
# exits 0. Each case
# binds nothing (port 0 on loopback) and never gets as far as the log directory's lock.
gregor=$1
tmp=$(mktemp -d /tmp/gregor-exit.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
expect2() { # expect2 WHAT ARGS...: the broker exits 2 within 20 s
    what=$1
    shift
    timeout 20 "$gregor" --override gregor.admin.listeners=http://127.0.0.1:0 --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$tmp/d" "$@" \
        >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $what: exit $rc, want 2"
        tail -5 "$tmp/out"
    fi
}
expect2 "a bad value" --override gregor.log.level=TRACE
expect2 "a rule between keys" --override transaction.state.log.min.isr=2
expect2 "an unknown argument" --no-such-flag
expect2 "two log directories" --override "log.dirs=$tmp/a,$tmp/b"
GREGOR_FAILPOINT='no such point' expect2 "a bad failpoint"
expect2 "a malformed admin listener (refused after the metadata image is made)" \
    --override gregor.admin.listeners=ftp://127.0.0.1:0
if timeout 20 "$gregor" --version >"$tmp/out" 2>&1; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL --version: exit $?, want 0"
fi
echo "exit codes: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
