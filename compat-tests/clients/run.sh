#!/usr/bin/env bash
# clients/run.sh: the stock client matrix (issue #9). For each client directory under compat-tests/clients/
# with an executable run.sh, starts a fresh Gregor (lib/broker.sh: port 0, fresh data dir,
# auto.create.topics.enable=false, group.initial.rebalance.delay.ms=0), runs
#     <client>/run.sh BOOTSTRAP quick|full RESULT_JSON
# under a per-client timeout, stops the broker, then renders matrix.md with matrix.py.
# The contract (step ids, result.json) is in README.md next to this file.
#
# Usage: run.sh [BUDGET_S] [--quick|--full] [--only a,b] [--bootstrap HOST:PORT] [BUILD]
#   BUDGET_S (optional, a bare number first) only caps the per-client timeout so the whole run fits.
#   --bootstrap: run against a running broker (e.g. Kafka 4.4.0 from kafka-dist/start-kafka.sh) instead.
# Writes results/<client>.json, .log (the client's output) and .broker.log; the matrix goes to matrix.md
# (a whole --full run against Gregor) or results/matrix.md (any other run).
# Last line: "clients: N passed, N failed" (steps); exits non-zero on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"

mode=quick
only=""
bootstrap=""
build=""
budget=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) mode=quick ;;
        --full) mode=full ;;
        --only) only=$2; shift ;;
        --only=*) only=${1#--only=} ;;
        --bootstrap) bootstrap=$2; shift ;;
        [0-9]*) [ -z "$budget" ] && [ ! -d "$1" ] && budget=$1 || build=$1 ;;
        *) build=$1 ;;
    esac
    shift
done
if [ -n "$build" ]; then
    case "$build" in /*) ;; *) build=$REPO/$build ;; esac
    GREGOR_BIN=$build/bin/gregor
fi
export GREGOR_BIN REPO

# Order: the table in README.md, then any other client directory alphabetically.
ORDER=(java java-latest kafka-python confluent-kafka kafka-python-debian confluent-kafka-debian kcat kafka-tools
       franz-go sarama kafkajs platformatic)
clients=()
for c in "${ORDER[@]}"; do [ -x "$here/$c/run.sh" ] && clients+=("$c"); done
for d in "$here"/*/; do
    c=$(basename "$d")
    [ -x "$d/run.sh" ] || continue
    [[ " ${ORDER[*]} " == *" $c "* ]] || clients+=("$c")
done
if [ -n "$only" ]; then
    sel=()
    IFS=, read -ra want <<<"$only"
    for w in "${want[@]}"; do
        if [ -x "$here/$w/run.sh" ]; then sel+=("$w"); else echo "clients: no client directory $w"; fi
    done
    clients=("${sel[@]+"${sel[@]}"}")
fi

# Step 7 (transactions) runs for every client in --full, and in --quick for the clients in QUICK_TXN (make
# test's budget); a client runs it when its env TXN is 1. With --bootstrap (Apache Kafka, or make
# test-cluster's brokers) step 7 runs only with env MATRIX_TXN=1.
QUICK_TXN=${QUICK_TXN:-java,confluent-kafka,franz-go,sarama,kafkajs}
results=$here/results
mkdir -p "$results"
if [ "$mode" = full ]; then per=${CLIENT_TIMEOUT_S:-900}; else per=${CLIENT_TIMEOUT_S:-150}; fi
start_all=$(date +%s)
harness_fail=0
for c in "${clients[@]+"${clients[@]}"}"; do
    res=$results/$c.json
    log=$results/$c.log
    rm -f "$res" "$log"
    t=$per
    if [ -n "$budget" ]; then # leave every remaining client at least a share of what is left
        left=$((budget - ($(date +%s) - start_all) - 15))
        [ "$left" -lt "$t" ] && t=$left
        [ "$t" -lt 20 ] && t=20
    fi
    echo "== clients: $c ($mode, timeout ${t}s)"
    BROKER_DIR=
    if [ -n "$bootstrap" ]; then
        B=$bootstrap
    else
        BROKER_DIR=$(mktemp -d /tmp/gregor-clients.XXXXXX)
        if ! broker_start --override auto.create.topics.enable=false --override group.initial.rebalance.delay.ms=0; then
            python3 "$here/matrix.py" --harness-error "$res" "$c" "Gregor did not start"
            broker_cleanup; continue
        fi
        B=$BROKER
        # The listener file appears before the group coordinator has loaded __consumer_offsets; requests
        # wait until then (about 1 s on a fresh data dir). Start the client once the broker says it started,
        # so a client's start-up timeout (kafka-python 2.0.2 probes the version for 2 s) measures the client.
        for _ in $(seq 1 300); do grep -q 'started in' "$BROKER_DIR/broker.log" && break; sleep 0.1; done
    fi
    TXN=0
    if [ "$mode" = full ] || [[ ",$QUICK_TXN," == *",$c,"* ]]; then TXN=1; fi
    [ -n "$bootstrap" ] && TXN=${MATRIX_TXN:-0} # a broker we did not start: step 7 only when asked (MATRIX_TXN=1)
    export TXN
    s=$(date +%s)
    timeout -k 10 "$t" "$here/$c/run.sh" "$B" "$mode" "$res" >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - s ))
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        python3 "$here/matrix.py" --harness-error "$res" "$c" "timed out after ${t}s: $(tail -3 "$log" | tr '\n' ' ' | cut -c1-300)" --keep
    elif [ $rc -ne 0 ] || ! python3 "$here/matrix.py" --check "$res" 2>/dev/null; then
        python3 "$here/matrix.py" --harness-error "$res" "$c" "run.sh exit $rc, no valid result.json: $(tail -3 "$log" | tr '\n' ' ' | cut -c1-300)" --keep
    fi
    if [ -n "$BROKER_DIR" ]; then
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            python3 "$here/matrix.py" --add-step "$res" broker "broker-alive" "Gregor exited during the run: $(tail -3 "$BROKER_DIR/broker.log" | tr '\n' ' ' | cut -c1-300)"
        elif grep -Eiq 'assert|abort|sanitizer' "$BROKER_DIR/broker.log"; then
            python3 "$here/matrix.py" --add-step "$res" broker "broker-log" "$(grep -Ei -m2 'assert|abort|sanitizer' "$BROKER_DIR/broker.log" | tr '\n' ' ' | cut -c1-300)"
        fi
        cp "$BROKER_DIR/broker.log" "$results/$c.broker.log" 2>/dev/null
        broker_cleanup
    fi
    python3 "$here/matrix.py" --line "$res" "$took"
done
# The committed matrix (the one the README shows) is written by a whole --full run against Gregor; other runs
# (--quick, --only, --bootstrap) write results/matrix.md so that `make test` leaves the tree clean.
matrix=$results/matrix.md
[ "$mode" = full ] && [ -z "$only" ] && [ -z "$bootstrap" ] && matrix=$here/matrix.md
echo "clients: matrix in ${matrix#$REPO/}"
python3 "$here/matrix.py" --render "$results" "$matrix" --mode "$mode" \
    ${bootstrap:+--broker "$bootstrap"} ${only:+--partial} -- "${clients[@]+"${clients[@]}"}"
