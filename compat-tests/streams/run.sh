#!/usr/bin/env bash
# streams/run.sh: exactly-once runs with kill -9 against Gregor (issue #21), `make compat-eos`.
#   run.sh [--seed N] [--only streams|pipeline] [--txn-versions 2,1] [BUILD]
# Builds EosTest (build.sh: Maven, kafka-streams 4.4.0 and its kafka-clients from Maven Central; target/ gitignored),
# starts one Gregor per run (compat-tests/lib/broker.sh: free port, fresh data dir, auto.create.topics off,
# transactions always on) and runs
#   streams   Kafka Streams exactly_once_v2 word count, its instance kill -9ed at a seeded time, restarted
#   pipeline  a Java read-process-write pipeline (sendOffsetsToTransaction), kill -9ed twice, restarted
# (EosTest.java says what each checks), the brokers under the network-thread audit. Seed: --seed or env SEED (default: the date's day of year), printed.
# Each run at every level of --txn-versions (default 2,1: gregor.transaction.version, issue #25), the Java
# clients' EndTxn versions read from the broker's /metrics: only v5 at level 2 (the epoch bump per transaction),
# none at level 1.
# Last line: "eos: N passed, N failed"; the work dirs (app logs, broker log) are kept on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
seed=${SEED:-$(date +%j | sed 's/^0*//')}
only=""
build=""
levels=2,1
keep=${KEEP_DATA:-} # env KEEP_DATA=1 keeps every run's broker dir (as broker.sh does); a failed run's is kept anyway
while [ $# -gt 0 ]; do
    case "$1" in
        --seed) seed=$2; shift ;;
        --only) only=$2; shift ;;
        --txn-versions) levels=$2; shift ;;
        *) build=$1 ;;
    esac
    shift
done
if [ -n "$build" ]; then
    case "$build" in /*) ;; *) build=$REPO/$build ;; esac
    GREGOR_BIN=$build/bin/gregor
fi
if ! classpath=$("$here/build.sh" 2>&1); then
    echo "eos: $classpath"
    echo "eos: 0 passed, 1 failed"
    exit 1
fi
echo "eos: seed $seed"
# the network-thread audit (as compat-tests/run.sh runs make test's suites): a call that may wait for the disk
# on the broker's network thread fails the run
own_audit=""
if [ -z "${GREGOR_NET_THREAD_AUDIT:-}" ]; then own_audit=$(mktemp); export GREGOR_NET_THREAD_AUDIT=$own_audit; fi
# endtxn_versions: the EndTxn request versions the broker counted, as "v:count" words
endtxn_versions() {
    curl -s "http://$ADMIN/metrics" | sed -n 's/^kafka_network_requestmetrics_requests_total{request="EndTxn",version="\([0-9]*\)"} \([0-9]*\).*/\1:\2/p' | tr '\n' ' '
}
for tv in ${levels//,/ }; do
for run0 in streams pipeline; do
    [ -n "$only" ] && [ "$only" != "$run0" ] && continue
    run="$run0 (transaction.version $tv)"
    BROKER_DIR=$(mktemp -d /tmp/gregor-eos.XXXXXX)
    if ! broker_start --override auto.create.topics.enable=false --override group.initial.rebalance.delay.ms=0 \
        --override "gregor.transaction.version=$tv"; then
        fail "$run" "Gregor did not start"; broker_cleanup; continue
    fi
    for _ in $(seq 1 300); do grep -q 'started in' "$BROKER_DIR/broker.log" && break; sleep 0.1; done
    work=$BROKER_DIR/work
    mkdir -p "$work"
    # the driver and the app JVMs it starts run in a process group of their own, ended by its id afterwards
    setsid timeout -k 10 400 java -Xmx256m -XX:+UseSerialGC -cp "$classpath" dev.gregor.streams.EosTest \
        "$run0" "$BROKER" "$seed" "$work" >"$work/driver.log" 2>&1 &
    pg=$!
    wait $pg
    rc=$?
    kill -9 -- "-$pg" 2>/dev/null
    grep -E '^(driver|streams-eos|java-pipeline-eos):' "$work/driver.log" | grep -v ' passed, '
    ev=$(endtxn_versions)
    echo "  $run: EndTxn versions served (version:count): ${ev:-none}"
    if [ "$tv" -ge 2 ]; then
        case " $ev" in *" 5:"*) pass "$run: the Java clients used EndTxn v5" ;; *) fail "$run: the Java clients used EndTxn v5" "$ev" ;; esac
        check_eq "$run: no EndTxn below v5" "" "$(tr ' ' '\n' <<<"$ev" | grep -v '^5:' | grep .)"
    else
        check_eq "$run: no EndTxn v5 at level 1" "" "$(tr ' ' '\n' <<<"$ev" | grep '^5:')"
    fi
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
        fail "$run" "Gregor exited during the run: $(tail -3 "$BROKER_DIR/broker.log" | tr '\n' ' ')"
    elif grep -Eiq 'assert|abort\(|sanitizer' "$BROKER_DIR/broker.log"; then
        fail "$run" "broker log: $(grep -Ei -m2 'assert|abort\(|sanitizer' "$BROKER_DIR/broker.log" | tr '\n' ' ')"
    elif [ -n "$own_audit" ] && [ -s "$own_audit" ]; then
        fail "$run" "the network thread made $(wc -l <"$own_audit") calls that may wait for the disk: $(head -3 "$own_audit" | tr '\n' ' ')"
        : >"$own_audit"
    elif [ $rc -eq 0 ]; then
        pass "$run"
    else
        fail "$run" "exit $rc: $(grep -E 'FAIL' "$work/driver.log" | tail -1 | cut -c1-600) (kept: $BROKER_DIR)"
        KEEP_DATA=1
    fi
    broker_cleanup
    KEEP_DATA=$keep
done
done
[ -n "$own_audit" ] && rm -f "$own_audit"
summary eos
