#!/usr/bin/env bash
# idempotence/run.sh: the idempotent producer (issue #7) under cut connections and a broker kill -9.
#   The broker is started with listeners on port 0 and advertised.listeners naming cutproxy.py's port, so
#   every client connection (bootstrap and after the Metadata redirect) passes through the proxy, which
#   cuts connections at random Produce requests: after the broker appended the batch and before its response
#   reached the client (the retry must be recognised as a duplicate), mid-request, before the request,
#   mid-response. The seed is printed (IDEM_SEED reproduces the draws).
#   idem_client.c (librdkafka, enable.idempotence=true, acks=all, message.timeout.ms 1 h) sends numbered
#   records to a 4-partition topic and logs every delivery report; check.py then asserts, on a dump of the
#   topic: every acknowledged record stored exactly once at its reported offset, no duplicate, nothing
#   stored that was not sent, per-partition order.
#   0. self-check: the same with enable.idempotence=false must show duplicates (the check can fail).
#   1. IDEM_RECORDS (default 200,000, the issue's figure) records through the cutting proxy.
#   2. The same with IDEM_KILL_ROUNDS (default 1) kill -9 and restarts of the broker during the produce;
#      just before each kill the proxy holds back every Produce response (until at least one was), so batches the
#      broker appended just before it died are retried against the restarted broker (which must know them
#      from the producer state it rebuilt, answering with their original offsets).
# Env: IDEM_RECORDS, IDEM_KILL_ROUNDS, IDEM_SEED, IDEM_CUT_RATE (per Produce request, default 0.05),
#   IDEM_BROKER=gregor|kafka (kafka: Apache Kafka 4.4.0 from compat-tests/kafka-dist, the reference),
#   IDEM_PRODUCE_TIMEOUT_S (default 240). Prints "idempotence: N passed, N failed"; exits non-zero on failure.
# Read next: cutproxy.py, idem_client.c, check.py; full.sh is the long form for `make compat-full`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
N=${IDEM_RECORDS:-200000}
ROUNDS=${IDEM_KILL_ROUNDS:-1}
SEED=${IDEM_SEED:-$(( $(od -An -N4 -tu4 /dev/urandom) ))}
RATE=${IDEM_CUT_RATE:-0.05}
KIND=${IDEM_BROKER:-gregor}
PTIMEOUT=${IDEM_PRODUCE_TIMEOUT_S:-240}
PARTS=4
T=$(mktemp -d /tmp/gregor-idem.XXXXXX)
PROXY_PID=
CLIENT_PID=
KAFKA_DIR=
cleanup() {
    [ -n "$CLIENT_PID" ] && kill -9 "$CLIENT_PID" 2>/dev/null
    [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
    if [ "$KIND" = kafka ]; then kafka_kill; [ -z "${KEEP_DATA:-}" ] && rm -rf "$KAFKA_DIR"; else broker_cleanup; fi
    [ -z "${KEEP_DATA:-}" ] && rm -rf "$T"
}
trap cleanup EXIT
echo "  ..   seed $SEED (IDEM_SEED=$SEED reproduces the proxy's draws), $N records, $ROUNDS kill round(s), broker $KIND"

# ---- the broker, behind the proxy ----------------------------------------------------------------------
# One proxy for the whole run (the broker advertises its port); its cut rate is read from $T/proxy.rate
# (set_rate) and its counters are read as differences between snapshots.
set_rate() { echo "$1" >"$T/proxy.rate"; sleep 1.1; }
start_proxy() {  # sets PROXY, PROXY_PID; the upstream is the broker's listener (or bootstrap) file
    local upfile
    upfile=$([ "$KIND" = kafka ] && echo "$KAFKA_DIR/bootstrap" || echo "$BROKER_DIR/listener")
    echo "$RATE" >"$T/proxy.rate"
    python3 "$here/cutproxy.py" --upstream-file "$upfile" --port-file "$T/proxy.port" --seed "$SEED" \
        --rate "$RATE" --rate-file "$T/proxy.rate" --warmup-s 1 --stats "$T/proxy.stats" >>"$T/proxy.log" 2>&1 &
    PROXY_PID=$!
    for _ in $(seq 1 100); do [ -s "$T/proxy.port" ] && break; sleep 0.05; done
    PROXY=$(cat "$T/proxy.port" 2>/dev/null)
    [ -n "$PROXY" ]
}
kafka_kill() {
    [ -n "$KAFKA_DIR" ] && [ -f "$KAFKA_DIR/kafka.pid" ] && kill -9 -- "-$(cat "$KAFKA_DIR/kafka.pid")" 2>/dev/null
    sleep 0.5
}
kafka_launch() {
    local home
    home=$("$REPO/compat-tests/kafka-dist/get-kafka.sh" | tail -1)
    setsid "$home/bin/kafka-server-start.sh" "$KAFKA_DIR/server.properties" >>"$KAFKA_DIR/server.log" 2>&1 </dev/null &
    echo $! >"$KAFKA_DIR/kafka.pid"
    disown $!  # no "Killed" line from bash when the kill -9 comes
    for _ in $(seq 1 180); do
        grep -q 'Kafka Server started' "$KAFKA_DIR/server.log" 2>/dev/null && return 0
        sleep 0.5
    done
    return 1
}
broker_up() {  # first start, advertising the proxy
    if [ "$KIND" = kafka ]; then
        KAFKA_DIR=$T/kafka
        mkdir -p "$KAFKA_DIR"
        start_proxy || return 1
        "$REPO/compat-tests/kafka-dist/start-kafka.sh" --dir "$KAFKA_DIR" \
            --override "advertised.listeners=PLAINTEXT://$PROXY" >/dev/null 2>"$T/start-kafka.err" || { cat "$T/start-kafka.err"; return 1; }
        BROKER=$(cat "$KAFKA_DIR/bootstrap")
    else
        BROKER_DIR=$T/broker
        mkdir -p "$BROKER_DIR"
        start_proxy || return 1
        broker_start --override "advertised.listeners=PLAINTEXT://$PROXY" || return 1
    fi
}
broker_kill_restart() {
    if [ "$KIND" = kafka ]; then
        kafka_kill
        # same ports, same data: clean the ready marker by moving the log aside
        mv "$KAFKA_DIR/server.log" "$KAFKA_DIR/server.log.$(date +%s%N)"
        kafka_launch
    else
        broker_stop KILL
        sleep 0.3
        _broker_launch
    fi
}

check "compile idem_client.c against librdkafka" cc -O2 -Wall -Wextra -o "$T/idem_client" "$here/idem_client.c" -lrdkafka
[ -x "$T/idem_client" ] || { summary idempotence; exit 1; }
C=$T/idem_client
broker_up || { fail "broker starts behind the proxy"; summary idempotence; exit 1; }
echo "  ..   broker at $BROKER, advertised as the proxy at $PROXY"

stat_of() { local v; v=$(awk -v k="$2" '$1 == k { print $2 }' "$1" 2>/dev/null); echo "${v:-0}"; }
proxy_snapshot() { sleep 1.1; cp "$T/proxy.stats" "$1" 2>/dev/null || : >"$1"; }
proxy_delta() { echo $(( $(stat_of "$2" "$3") - $(stat_of "$1" "$3") )); }

# run_part NAME TOPIC RECORDS KILLS [--no-idempotence]: produce through the proxy, killing the broker KILLS
# times at evenly spaced points of the delivery count; then dump the topic (bootstrapped at the broker, but
# the broker advertises only the proxy, so this goes through it too: Fetch is never cut) and run check.py.
# Sets PRODUCE_RC (the producer's exit), PART_RC (check.py's exit), RESENT, HELD_KILLS (kills preceded by
# at least one held-back Produce response), and prints the counters.
run_part() {
    local name=$1 topic=$2 n=$3 kills=$4 flag=${5:-} k target done_n t0 rc held
    HELD_KILLS=0
    check "$name: create $topic with $PARTS partitions" "$C" create "$BROKER" "$topic" "$PARTS"
    proxy_snapshot "$T/$name.before"
    t0=$(date +%s)
    timeout -k 5 "$PTIMEOUT" "$C" produce "$PROXY" "$topic" "$PARTS" "$n" "$T/$name.log" $flag >"$T/$name.out" 2>&1 &
    CLIENT_PID=$!
    for k in $(seq 1 "$kills"); do
        target=$(( n * k / (kills + 1) ))
        while kill -0 "$CLIENT_PID" 2>/dev/null; do
            done_n=$(grep -c ' ok ' "$T/$name.log" 2>/dev/null)
            done_n=${done_n:-0}
            [ "$done_n" -ge "$target" ] && break
            sleep 0.1
        done
        if kill -0 "$CLIENT_PID" 2>/dev/null; then
            # The proxy holds back Produce responses for a moment before the kill: the batches the broker
            # appends meanwhile are retried by the client against the restarted broker.
            held=$(stat_of "$T/proxy.stats" held_responses)
            kill -USR1 "$PROXY_PID"
            sleep 0.3
            for _ in $(seq 1 50); do  # until a response was held back (the stats file is written every second)
                [ "$(stat_of "$T/proxy.stats" held_responses)" -gt "$held" ] && { HELD_KILLS=$((HELD_KILLS + 1)); break; }
                sleep 0.1
            done
            echo "  ..   $name: kill -9 of the broker after $done_n deliveries"
            broker_kill_restart || fail "$name: broker restarts after kill -9 $k"
            kill -USR2 "$PROXY_PID"
        else
            fail "$name: producer still running at kill $k" "it ended before $target deliveries"
        fi
    done
    wait "$CLIENT_PID"
    rc=$?
    CLIENT_PID=
    proxy_snapshot "$T/$name.after"
    # librdkafka's own log lines about the cut connections (…|FAIL|…) are expected: left out
    grep -v -e '^idem_client: error' -e '^%[0-9]|[0-9.]*|FAIL|' "$T/$name.out" | sed 's/^/  ..   /' | head -20
    echo "  ..   $name: proxy: $(proxy_delta "$T/$name.before" "$T/$name.after" produce_requests) Produce requests," \
        "$(proxy_delta "$T/$name.before" "$T/$name.after" connections) connections," \
        "cuts: $(proxy_delta "$T/$name.before" "$T/$name.after" cuts_after_append) after append," \
        "$(proxy_delta "$T/$name.before" "$T/$name.after" cuts_mid_request) mid-request," \
        "$(proxy_delta "$T/$name.before" "$T/$name.after" cuts_before_send) before send," \
        "$(proxy_delta "$T/$name.before" "$T/$name.after" cuts_mid_response) mid-response;" \
        "$(proxy_delta "$T/$name.before" "$T/$name.after" held_responses) responses held back before a kill; $(( $(date +%s) - t0 ))s"
    RESENT=$(sed -n 's/^produce: .* resent \([0-9]*\) .*/\1/p' "$T/$name.out")
    RESENT=${RESENT:-0}
    PRODUCE_RC=$rc
    check "$name: dump $topic" "$C" dump "$BROKER" "$topic" "$PARTS" "$T/$name.dump"
    python3 "$here/check.py" "$T/$name.log" "$T/$name.dump" "$n" "$PARTS" >"$T/$name.check" 2>&1
    PART_RC=$?
    sed 's/^/  ..   /' "$T/$name.check"
}

# ---- 0. self-check: without idempotence the same cuts make duplicates, and check.py finds them ---------
# A higher cut rate makes at least one cut after an append (after-append or mid-response, hence a
# duplicate) all but certain.
set_rate 0.15
run_part control idem-control 5000 0 --no-idempotence
check_eq "self-check: without idempotence the proxy cut connections after the broker appended (after-append or mid-response cuts > 0)" yes \
    "$([ $(( $(proxy_delta "$T/control.before" "$T/control.after" cuts_after_append) + $(proxy_delta "$T/control.before" "$T/control.after" cuts_mid_response) )) -gt 0 ] && echo yes || echo no)"
check_eq "self-check: without idempotence check.py finds duplicates" yes \
    "$([ "$PART_RC" -ne 0 ] && grep -q 'duplicate' "$T/control.check" && echo yes || echo no)"

# ---- 1. cuts only ---------------------------------------------------------------------------------------
set_rate "$RATE"
run_part cuts idem-cuts "$N" 0
check_eq "cuts: the idempotent producer delivered all $N records (exit 0)" 0 "$PRODUCE_RC"
check_eq "cuts: the proxy cut connections after the broker appended a batch (> 0)" yes \
    "$([ "$(proxy_delta "$T/cuts.before" "$T/cuts.after" cuts_after_append)" -gt 0 ] && echo yes || echo no)"
check_eq "cuts: the client re-sent records the broker had already appended (resent > 0)" yes "$([ "$RESENT" -gt 0 ] && echo yes || echo no)"
check_eq "cuts: every acknowledged record exactly once at its offset, in order, nothing unsent" 0 "$PART_RC"

# ---- 2. cuts and kill -9 ------------------------------------------------------------------------------
run_part kill idem-kill "$N" "$ROUNDS"
check_eq "kill -9 x$ROUNDS: the idempotent producer delivered all $N records (exit 0)" 0 "$PRODUCE_RC"
check_eq "kill -9 x$ROUNDS: kills with Produce responses held back just before (batches the broker appended before it died)" \
    "$ROUNDS" "$HELD_KILLS"
check_eq "kill -9 x$ROUNDS: the client re-sent records (resent > 0)" yes "$([ "$RESENT" -gt 0 ] && echo yes || echo no)"
check_eq "kill -9 x$ROUNDS: every acknowledged record exactly once at its offset, in order, nothing unsent" 0 "$PART_RC"

summary idempotence
