#!/usr/bin/env bash
# metrics/run.sh: the admin HTTP listener and /metrics (issue #22, first slice). A broker with
# gregor.admin.listeners on port 0 (compat-tests/lib/broker.sh) and its listener file; metrics/run.py
# produces and fetches known records and checks the scrape's exact values and the HTTP rules; metrics/promtool.py
# runs `promtool check metrics` on scrapes taken under a produce/consume load; metrics/admin_limits.py the
# admin listener's 431, 16 stalled clients, 17th connection and idle close (idle timeout lowered to 4 s); then two brokers
# started at once with port 0 both serve, a broker whose admin port is taken exits 2 naming the key, and an
# empty gregor.admin.listeners serves no admin listener.
# Prints "metrics: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
tmp=$(mktemp -d /tmp/gregor-test.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    broker_cleanup
    rm -rf "$tmp"
}
trap cleanup EXIT

broker_start --override gregor.admin.connections.max.idle.ms=4000 || { fail "broker starts"; summary metrics; exit 1; }
check "the admin listener file names host:port" grep -qE '^127\.0\.0\.1:[0-9]+$' "$BROKER_DIR/admin"
export ADMIN
run_py "metrics/run.py" "$here/run.py"
run_py "metrics/grouplag" "$here/grouplag.py"
run_py "metrics/counts" "$here/counts.py"
run_py "metrics/lagtime" "$here/lagtime.py"
run_py "metrics/cluster" "$here/cluster.py"
run_py "metrics/status" "$here/status.py"
run_py "metrics/reqtime" "$here/reqtime.py"
run_py "metrics/promtool" "$here/promtool.py"
run_py "metrics/cap" "$here/cap.py"
run_py "metrics/caughtup" "$here/caughtup.py"
GREGOR_BIN=$GREGOR_BIN IDLE_MS=4000 run_py "metrics/admin_limits" "$here/admin_limits.py"

# start_one NAME [--override ...]: a broker in $tmp/NAME, admin and Kafka listeners on port 0, in background
start_one() {
    local n=$1
    shift
    mkdir -p "$tmp/$n"
    "$GREGOR_BIN" --override listeners=PLAINTEXT://127.0.0.1:0 --override "gregor.listener.file=$tmp/$n/listener" \
        --override "log.dirs=$tmp/$n/data" --override gregor.admin.listeners=http://127.0.0.1:0 \
        --override "gregor.admin.listener.file=$tmp/$n/admin" "$@" >"$tmp/$n/log" 2>&1 &
    pids+=($!)
}
start_one a
start_one b
for _ in $(seq 1 400); do [ -s "$tmp/a/listener" ] && [ -s "$tmp/b/listener" ] && break; sleep 0.05; done
for n in a b; do
    check_eq "broker $n (started together with the other, admin port 0) is ready" "200" \
        "$(curl -s -o /dev/null -w '%{http_code}' "http://$(cat "$tmp/$n/admin" 2>/dev/null)/v1/status/ready")"
done
check "the two admin ports differ" test "$(cat "$tmp/a/admin")" != "$(cat "$tmp/b/admin")"

out=$(timeout 20 "$GREGOR_BIN" --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$tmp/c/data" \
    --override "gregor.admin.listeners=http://$ADMIN" 2>&1)
check_eq "a broker whose admin port is taken exits 2" "2" "$?"
case "$out" in *"gregor.admin.listeners"*) pass "naming gregor.admin.listeners" ;; *) fail "naming gregor.admin.listeners" "$out" ;; esac
check_eq "and its log directory was not touched" "no" "$([ -e "$tmp/c/data" ] && echo yes || echo no)"
out=$(timeout 20 "$GREGOR_BIN" --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$tmp/d/data" \
    --override "gregor.admin.listeners=ftp://127.0.0.1:0" 2>&1)
check_eq "a malformed gregor.admin.listeners exits 2" "2" "$?"

start_one e --override gregor.admin.listeners=
for _ in $(seq 1 400); do [ -s "$tmp/e/listener" ] && break; sleep 0.05; done
check "an empty gregor.admin.listeners starts the broker" test -s "$tmp/e/listener"
check_eq "and serves no admin listener (no file, no log line)" "no 0" \
    "$([ -e "$tmp/e/admin" ] && echo yes || echo no) $(grep -c 'admin listener on' "$tmp/e/log")"
summary metrics
