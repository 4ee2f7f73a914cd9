# broker.sh: sourced by compat-test scripts. Starts a Gregor broker on a free loopback port with a fresh
# data directory, and counts assertions.
#   GREGOR_BIN   path of the gregor binary (default: build/bin/gregor under the repo)
#   broker_start [--override k=v ...]  -> sets BROKER (host:port), ADMIN (admin HTTP host:port), BROKER_DIR, BROKER_PID
#   broker_stop [signal]               -> stops it (default TERM) and waits
#   broker_restart [--override ...]    -> stops with TERM and starts again on the same data dir
#   check NAME CMD...                  -> runs CMD, counts a pass or a failure
#   check_eq NAME EXPECTED ACTUAL
#   xfail NAME FEATURE                 -> records a case whose feature is not built (never counted as passed)
#   run_py NAME SCRIPT.py [ARGS]       -> runs a Python part (compat-tests/lib/testkit.py) with BROKER and
#                                         BROKER_DIR exported, and adds its RESULT line to the counts
#   summary                            -> prints "N passed, N failed[, N expected-fail]" and returns non-zero
#                                         on failures
REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
GREGOR_BIN=${GREGOR_BIN:-$REPO/build/bin/gregor}
PASSED=0
FAILED=0
XFAILED=0
FAILED_NAMES=()
BROKER_ARGS=()

broker_start() {
    BROKER_DIR=${BROKER_DIR:-$(mktemp -d /tmp/gregor-test.XXXXXX)}
    BROKER_ARGS=("$@")
    _broker_launch
}

_broker_launch() {
    rm -f "$BROKER_DIR/listener" "$BROKER_DIR/admin"
    # the admin HTTP listener on a free port (its default 9644 would collide between brokers): its address in
    # $BROKER_DIR/admin (ADMIN= below); BROKER_ARGS may override both
    "$GREGOR_BIN" --override listeners=PLAINTEXT://127.0.0.1:0 --override "gregor.listener.file=$BROKER_DIR/listener" \
        --override gregor.admin.listeners=http://127.0.0.1:0 --override "gregor.admin.listener.file=$BROKER_DIR/admin" \
        --override "log.dirs=$BROKER_DIR/data" "${BROKER_ARGS[@]}" >>"$BROKER_DIR/broker.log" 2>&1 &
    BROKER_PID=$!
    # The listener file is written once the broker serves, after its log directory is loaded (recovery after
    # kill -9, thousands of partitions): up to 60 s on a loaded machine.
    for _ in $(seq 1 1200); do
        [ -s "$BROKER_DIR/listener" ] && break
        kill -0 "$BROKER_PID" 2>/dev/null || { echo "broker exited at start:"; tail -20 "$BROKER_DIR/broker.log"; return 1; }
        sleep 0.05
    done
    BROKER=$(head -1 "$BROKER_DIR/listener")
    ADMIN=$(head -1 "$BROKER_DIR/admin" 2>/dev/null)
    [ -n "$BROKER" ] || { echo "broker did not start"; tail -20 "$BROKER_DIR/broker.log"; return 1; }
}

broker_stop() {
    local sig=${1:-TERM}
    [ -n "${BROKER_PID:-}" ] || return 0
    { # stderr off: bash reports a job killed by a signal when it reaps it
        kill -"$sig" "$BROKER_PID"
        for _ in $(seq 1 200); do kill -0 "$BROKER_PID" || break; sleep 0.05; done
        kill -9 "$BROKER_PID"
        wait "$BROKER_PID"
    } 2>/dev/null
    BROKER_PID=
}

broker_restart() {
    broker_stop TERM
    [ $# -gt 0 ] && BROKER_ARGS=("$@")
    _broker_launch
}

broker_cleanup() {
    broker_stop KILL
    [ -n "${BROKER_DIR:-}" ] && [ -z "${KEEP_DATA:-}" ] && rm -rf "$BROKER_DIR"
}

pass() { PASSED=$((PASSED + 1)); echo "  ok   $1"; }
fail() { FAILED=$((FAILED + 1)); FAILED_NAMES+=("$1"); echo "  FAIL $1${2:+: $2}"; }

check() {
    local name=$1
    shift
    if "$@" >/tmp/gregor-check.$$ 2>&1; then pass "$name"; else fail "$name" "$(tail -3 /tmp/gregor-check.$$ | tr '\n' ' ')"; fi
    rm -f /tmp/gregor-check.$$
}

check_eq() {
    if [ "$2" == "$3" ]; then pass "$1"; else fail "$1" "expected [$2] got [$3]"; fi
}

xfail() { XFAILED=$((XFAILED + 1)); echo "  XFAIL $1: waits for $2"; }

run_py() {
    local name=$1 out res p f x
    shift
    out=$(mktemp)
    BROKER=$BROKER BROKER_DIR=$BROKER_DIR REPO=$REPO PYTHONPATH=$REPO/compat-tests/lib python3 "$@" 2>&1 | tee "$out" | grep -v '^RESULT '
    res=$(grep '^RESULT ' "$out" | tail -1)
    if [ -z "$res" ]; then
        fail "$name" "python part ended without a RESULT line: $(tail -3 "$out" | tr '\n' ' ')"
    else
        read -r _ p f x <<<"$res"
        PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); XFAILED=$((XFAILED + x))
    fi
    rm -f "$out"
}

summary() {
    local suite=${1:-compat}
    echo "$suite: $PASSED passed, $FAILED failed$([ "$XFAILED" -gt 0 ] && echo ", $XFAILED expected-fail")"
    [ "$FAILED" -eq 0 ]
}
