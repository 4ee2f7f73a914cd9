#!/usr/bin/env bash
# run.sh: the differential suite. Starts Gregor (compat-tests/lib/broker.sh) and Apache Kafka 4.4.0 from Maven
# Central (kafka-dist/get-kafka.sh + start-kafka.sh, KRaft, one node), both on free loopback ports, sends
# both the same raw requests (cases.py), compares the normalised answers field by field (diff.py) and fails
# on any difference that allow.txt does not list. Writes compat-tests/.cache/differential-results.md (or
# $RESULTS: make compat-full writes the tracked results.md); the last line is
# `differential: N passed, N failed`. Both brokers are stopped by the EXIT trap; every wait is bounded.
# Env: REPO, GREGOR_BIN (as broker.sh), DIFF_KAFKA_VERSION (default 4.4.0), KAFKA (host:port of a fresh Kafka
#      already running, with none of the suite's topics or groups: used instead of starting one), DIFF_VERBOSE=1 (print every allowed difference),
#      ALLOW (another allow-list file), RESULTS (where the results table goes), DIFF_GREGOR_ARGS (more Gregor
#      arguments, e.g. "--override auto.create.topics.enable=false" to see the suite catch a change).
# Read next: diff.py, cases.py, allow.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
REPO=${REPO:-$(cd "$here/../.." && pwd)}
export REPO
source "$REPO/compat-tests/lib/broker.sh"
export KAFKA_VERSION=${DIFF_KAFKA_VERSION:-4.4.0}
t0=$(date +%s)

# Kafka 4.x needs Java >= 17; take the newest JDK under /usr/lib/jvm when the default java is older.
jmajor=$(java -version 2>&1 | sed -nE '1s/.*version "([0-9]+).*/\1/p')
if [ -z "$jmajor" ] || [ "$jmajor" -lt 17 ]; then
    for j in $(ls -d /usr/lib/jvm/*/ 2>/dev/null | sort -V -r); do
        [ -x "$j/bin/java" ] && { export JAVA_HOME=${j%/} PATH=${j%/}/bin:$PATH; break; }
    done
fi

KDIR=
cleanup() {
    broker_cleanup
    [ -n "$KDIR" ] && "$REPO/compat-tests/kafka-dist/stop-kafka.sh" "$KDIR" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 143' TERM INT # a killed run (make test's timeout) still stops both brokers through the EXIT trap

if [ -z "${KAFKA:-}" ]; then
    # get-kafka.sh also checks every tool wrapper; the broker needs only the jars and the server and storage
    # wrappers, so a tool whose class moved in this version does not stop the suite.
    khome=$("$REPO/compat-tests/kafka-dist/get-kafka.sh" 2>/tmp/diff-getkafka.$$ | tail -1)
    [ -n "$khome" ] || khome=$REPO/compat-tests/.cache/kafka-$KAFKA_VERSION
    if [ ! -x "$khome/bin/kafka-server-start.sh" ] || ! ls "$khome/libs/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null 2>&1; then
        cat /tmp/diff-getkafka.$$; rm -f /tmp/diff-getkafka.$$
        echo "differential: 0 passed, 1 failed (no Kafka $KAFKA_VERSION distribution)"; exit 1
    fi
    rm -f /tmp/diff-getkafka.$$
    KDIR=$(mktemp -d "/tmp/diff-kafka-$KAFKA_VERSION.XXXXXX")
    KAFKA=$(KAFKA_HOME=$khome START_TIMEOUT_S=120 "$REPO/compat-tests/kafka-dist/start-kafka.sh" --dir "$KDIR" \
        --override num.partitions=1 | tail -1)
    [ -n "$KAFKA" ] || { echo "differential: 0 passed, 1 failed (Kafka did not start)"; exit 1; }
fi
# The static settings start-kafka.sh gives Kafka (those Gregor has), so both report the same values and sources.
broker_start --override group.initial.rebalance.delay.ms=0 --override group.min.session.timeout.ms=1000 \
    --override offsets.topic.num.partitions=10 --override num.partitions=1 --override auto.create.topics.enable=true \
    --override message.max.bytes=10000000 --override socket.request.max.bytes=104857600 \
    --override transaction.state.log.num.partitions=10 ${DIFF_GREGOR_ARGS:-} ||
    { echo "differential: 0 passed, 1 failed (Gregor did not start)"; exit 1; }
echo "differential: gregor at $BROKER, kafka $KAFKA_VERSION at $KAFKA (started in $(( $(date +%s) - t0 ))s)"
GREGOR=$BROKER KAFKA=$KAFKA PYTHONPATH=$REPO/compat-tests/lib python3 "$here/diff.py" | tee /tmp/diff-out.$$
rc=${PIPESTATUS[0]}
last=$(tail -1 /tmp/diff-out.$$); rm -f /tmp/diff-out.$$
echo "differential: done in $(( $(date +%s) - t0 ))s"
case "$last" in "differential: "*" passed, "*" failed") ;; *) last="differential: 0 passed, 1 failed (the driver crashed)"; rc=1 ;; esac
echo "$last"
exit "$rc"
