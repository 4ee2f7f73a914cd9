#!/usr/bin/env bash
# fetchsess/clients.sh: stock clients that use KIP-227 fetch sessions consume correctly from Gregor, and the
# broker saw their incremental fetches (gregor_fetch_session_requests_total{kind="incremental"} grows):
# Kafka's console consumer (Java client, KAFKA_HOME: compat-tests/kafka-dist/get-kafka.sh) and franz-go (the
# client matrix's Go tool, GOMATRIX or compat-tests/clients/go/run-client.sh build). librdkafka 2.0.2 sends
# no sessions (session 0, epoch -1: its rdkafka_fetcher.c), so it is not here. A client whose install is
# missing is reported as expected-fail, never as passed. Prints "fetchsess-clients: N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap broker_cleanup EXIT
broker_start || { fail "broker starts"; summary fetchsess-clients; exit 1; }
incremental() {
    curl -s "http://$ADMIN/metrics" | sed -n 's/^gregor_fetch_session_requests_total{kind="incremental"} //p'
}
KAFKA_BIN=${KAFKA_HOME:-$REPO/compat-tests/.cache/kafka-4.4.0}/bin
if [ -x "$KAFKA_BIN/kafka-console-consumer.sh" ]; then
    before=$(incremental)
    seq -f 'j-%04g' 1 500 | timeout 90 "$KAFKA_BIN/kafka-console-producer.sh" --bootstrap-server "$BROKER" \
        --topic java-fs >"$BROKER_DIR/java-producer.out" 2>&1
    # 500 records, then fetches until 6 s without a record: the first fetch is full, the others incremental
    got=$(timeout 90 "$KAFKA_BIN/kafka-console-consumer.sh" --bootstrap-server "$BROKER" --topic java-fs \
        --from-beginning --timeout-ms 6000 2>/dev/null | grep '^j-' | sort | tr '\n' ' ')
    check_eq "Java console consumer reads the 500 records" "$(seq -f 'j-%04g' 1 500 | tr '\n' ' ')" "$got"
    after=$(incremental)
    check "the broker answered the Java consumer's incremental fetches ($before -> $after)" \
        test "${after%.*}" -gt "$((${before%.*} + 3))"
else
    xfail "Java console consumer" "KAFKA_HOME (compat-tests/kafka-dist/get-kafka.sh)"
fi
GOMATRIX=${GOMATRIX:-$("$REPO/compat-tests/clients/go/run-client.sh" build 2>/dev/null | tail -1)}
if [ -x "$GOMATRIX" ]; then
    before=$(incremental)
    timeout 300 "$GOMATRIX" -client franz-go -bootstrap "$BROKER" -mode quick -out "$BROKER_DIR/franz.json" \
        >"$BROKER_DIR/franz.out" 2>&1
    check "franz-go's matrix scenario passes every step" python3 - "$BROKER_DIR/franz.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [s for s in r.get('steps', []) if s.get('ok') is not True]
print('franz-go steps:', len(r.get('steps', [])), 'not passed:', [(s.get('id'), s.get('error')) for s in bad])
sys.exit(0 if r.get('steps') and not bad and not r.get('install_error') else 1)
PY
    after=$(incremental)
    check "the broker answered franz-go's incremental fetches ($before -> $after)" \
        test "${after%.*}" -gt "$((${before%.*} + 3))"
else
    xfail "franz-go" "the Go matrix tool (compat-tests/clients/go/run-client.sh build)"
fi
check "broker process still running" kill -0 "$BROKER_PID"
summary fetchsess-clients
