#!/usr/bin/env bash
# sasl/clients.sh: every stock client family over SASL_SSL with each mechanism (issue #23's client list): one broker
# with a SASL_SSL listener SS enabling PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (PLAIN users from the
# listener's JAAS entry; SCRAM users added with Kafka's kafka-configs.sh on the PLAINTEXT listener PT), then for each
# mechanism: kcat (librdkafka 2.0.2), confluent-kafka, kafka-python 3, franz-go (compat-tests/clients/go, `gomatrix
# -client franz-sasl`) and Kafka 4.4's console producer and consumer (the Java client) each produce to their own
# topic and read the records back in order; then OAUTHBEARER (Kafka's unsecured validator on SS, each client making
# its own unsecured token for alice): kcat, confluent-kafka, kafka-python 3, franz-go and the console tools
# likewise; a wrong password is refused for each client family
# once. Runs after clients/run.sh in compat-tests/suites.txt, whose Go build it reuses (built here if absent).
# Prints "sasl-clients: N passed, N failed" last.
set -u
. "$(dirname "$0")/../lib/broker.sh"
. "$(dirname "$0")/../lib/certs.sh"
CERTS=$(mktemp -d /tmp/gregor-saslc.XXXXXX)
trap 'broker_cleanup; rm -rf "$CERTS"' EXIT
T0=$(date +%s)
KAFKA_BIN=${KAFKA_HOME:-$REPO/compat-tests/.cache/kafka-4.4.0}/bin

mkcerts() {
    certs_ca "$CERTS" ca "/CN=Gregor test CA" && certs_server "$CERTS"
}
mkcerts >"$CERTS/openssl.log" 2>&1 || { fail "certificates" "$(tail -3 "$CERTS/openssl.log")"; summary sasl-clients; exit 1; }
cd "$REPO" || exit 1
CA=$CERTS/ca.pem

OMOD=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule
JAAS='org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
broker_start --override "listeners=PT://127.0.0.1:0,SS://127.0.0.1:0" \
    --override "listener.security.protocol.map=PT:PLAINTEXT,SS:SASL_SSL" \
    --override "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER" \
    --override "listener.name.ss.plain.sasl.jaas.config=$JAAS" \
    --override "listener.name.ss.oauthbearer.sasl.jaas.config=$OMOD required;" \
    --override ssl.keystore.type=PEM --override "ssl.keystore.location=$CERTS/server-keystore.pem" ||
    { fail "start"; summary sasl-clients; exit 1; }
PT=$BROKER
SS=$(grep '^SS ' "$BROKER_DIR/listener" | cut -d' ' -f2)
for m in SCRAM-SHA-256 SCRAM-SHA-512; do
    out=$(timeout 60 "$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$PT" --alter --add-config "$m=[password=alice-secret]" \
        --entity-type users --entity-name alice 2>&1)
    check "kafka-configs.sh adds alice's $m credential" grep -q "Completed updating config for user alice" <<<"$out"
done

GOBIN=$(bash "$REPO/compat-tests/clients/go/run-client.sh" build 2>"$CERTS/go.err")
[ -x "$GOBIN" ] || fail "franz-go: build" "$(tail -2 "$CERTS/go.err")"

seq -f 'rec-%05g' 1 300 >"$CERTS/records"
want=$(md5sum <"$CERTS/records")
for m in PLAIN SCRAM-SHA-256 SCRAM-SHA-512; do
    l=$(tr 'A-Z-' 'a-z_' <<<"$m")
    K=(-X security.protocol=SASL_SSL -X "ssl.ca.location=$CA" -X sasl.mechanisms=$m -X sasl.username=alice -X sasl.password=alice-secret)
    timeout 30 kcat -P -b "$SS" "${K[@]}" -t "kcat-$l" -l "$CERTS/records" 2>"$CERTS/kcat.err"
    check_eq "kcat produces 300 records over SASL_SSL with $m (exit 0)" 0 "$?"
    got=$(timeout 30 kcat -C -b "$SS" "${K[@]}" -t "kcat-$l" -o beginning -e -q 2>>"$CERTS/kcat.err" | md5sum)
    check_eq "kcat reads them back with $m" "$want" "$got"

    out=$(SS=$SS CA=$CA M=$m TOPIC="py-$l" timeout 90 python3 "$REPO/compat-tests/sasl/py_clients.py" 2>&1)
    check "confluent-kafka produces and consumes (group) 100 records over SASL_SSL with $m" grep -qx 'confluent-kafka ok' <<<"$out"
    check "kafka-python 3 produces and consumes 50 records over SASL_SSL with $m" grep -qx 'kafka-python ok' <<<"$out"
    grep -qx 'kafka-python ok' <<<"$out" || echo "$out" | tail -3

    if [ -x "${GOBIN:-}" ]; then
        out=$(timeout 90 "$GOBIN" -client franz-sasl -bootstrap "$SS" -protocol SASL_SSL -mechanism $m -user alice \
            -password alice-secret -ca "$CA" -topic "fz-$l" -n 200 2>&1)
        check "franz-go produces (acks=all) and reads back 200 records over SASL_SSL with $m" grep -qx 'franz-sasl: ok' <<<"$out"
        grep -qx "franz-sasl: ok" <<<"$out" || echo "$out" | tail -3
    fi

    if [ -x "$KAFKA_BIN/kafka-console-producer.sh" ]; then
        case $m in PLAIN) mod=org.apache.kafka.common.security.plain.PlainLoginModule ;;
            *) mod=org.apache.kafka.common.security.scram.ScramLoginModule ;; esac
        printf '%s\n' security.protocol=SASL_SSL ssl.truststore.type=PEM "ssl.truststore.location=$CA" "sasl.mechanism=$m" \
            "sasl.jaas.config=$mod required username=\"alice\" password=\"alice-secret\";" >"$CERTS/java-$l.properties"
        seq -f 'java-%03g' 1 30 | timeout 60 "$KAFKA_BIN/kafka-console-producer.sh" --bootstrap-server "$SS" --topic "java-$l" \
            --producer.config "$CERTS/java-$l.properties" >"$CERTS/java.out" 2>&1
        got=$(timeout 60 "$KAFKA_BIN/kafka-console-consumer.sh" --bootstrap-server "$SS" --topic "java-$l" --from-beginning \
            --max-messages 30 --consumer.config "$CERTS/java-$l.properties" 2>/dev/null | grep "^java-" | tr '\n' ' ')
        check_eq "Kafka's console producer and consumer (Java client) over SASL_SSL with $m" "$(seq -f 'java-%03g' 1 30 | tr '\n' ' ')" "$got"
    fi
done

# OAUTHBEARER with Kafka's unsecured validator (no callback handler on the listener): each client makes its own
# unsecured token for principal alice
K=(-X security.protocol=SASL_SSL -X "ssl.ca.location=$CA" -X sasl.mechanisms=OAUTHBEARER
    -X enable.sasl.oauthbearer.unsecure.jwt=true -X sasl.oauthbearer.config=principal=alice)
timeout 30 kcat -P -b "$SS" "${K[@]}" -t kcat-oauthbearer -l "$CERTS/records" 2>"$CERTS/kcat.err"
check_eq "kcat produces 300 records over SASL_SSL with OAUTHBEARER (exit 0)" 0 "$?"
got=$(timeout 30 kcat -C -b "$SS" "${K[@]}" -t kcat-oauthbearer -o beginning -e -q 2>>"$CERTS/kcat.err" | md5sum)
check_eq "kcat reads them back with OAUTHBEARER" "$want" "$got"
out=$(SS=$SS CA=$CA M=OAUTHBEARER TOPIC=py-oauthbearer timeout 90 python3 "$REPO/compat-tests/sasl/py_clients.py" 2>&1)
check "confluent-kafka produces and consumes (group) 100 records over SASL_SSL with OAUTHBEARER" grep -qx 'confluent-kafka ok' <<<"$out"
check "kafka-python 3 produces and consumes 50 records over SASL_SSL with OAUTHBEARER" grep -qx 'kafka-python ok' <<<"$out"
grep -qx 'kafka-python ok' <<<"$out" || echo "$out" | tail -3
if [ -x "${GOBIN:-}" ]; then
    out=$(timeout 90 "$GOBIN" -client franz-sasl -bootstrap "$SS" -protocol SASL_SSL -mechanism OAUTHBEARER -user alice \
        -ca "$CA" -topic fz-oauthbearer -n 200 2>&1)
    check "franz-go produces (acks=all) and reads back 200 records over SASL_SSL with OAUTHBEARER" grep -qx 'franz-sasl: ok' <<<"$out"
    grep -qx "franz-sasl: ok" <<<"$out" || echo "$out" | tail -3
fi
if [ -x "$KAFKA_BIN/kafka-console-producer.sh" ]; then
    printf '%s\n' security.protocol=SASL_SSL ssl.truststore.type=PEM "ssl.truststore.location=$CA" sasl.mechanism=OAUTHBEARER \
        "sasl.jaas.config=$OMOD required unsecuredLoginStringClaim_sub=\"alice\";" >"$CERTS/java-oauthbearer.properties"
    seq -f 'java-%03g' 1 30 | timeout 60 "$KAFKA_BIN/kafka-console-producer.sh" --bootstrap-server "$SS" --topic java-oauthbearer \
        --producer.config "$CERTS/java-oauthbearer.properties" >"$CERTS/java.out" 2>&1
    got=$(timeout 60 "$KAFKA_BIN/kafka-console-consumer.sh" --bootstrap-server "$SS" --topic java-oauthbearer --from-beginning \
        --max-messages 30 --consumer.config "$CERTS/java-oauthbearer.properties" 2>/dev/null | grep "^java-" | tr '\n' ' ')
    check_eq "Kafka's console producer and consumer (Java client) over SASL_SSL with OAUTHBEARER" "$(seq -f 'java-%03g' 1 30 | tr '\n' ' ')" "$got"
fi

# a wrong password, once per family (SCRAM-SHA-512): nothing produced
out=$(timeout 20 kcat -L -b "$SS" -X security.protocol=SASL_SSL -X "ssl.ca.location=$CA" -X sasl.mechanisms=SCRAM-SHA-512 \
    -X sasl.username=alice -X sasl.password=wrong -m 3 2>&1)
check "kcat with a wrong SCRAM-SHA-512 password: authentication failed, no metadata" \
    test "$(grep -c 'broker 1 at' <<<"$out"):$(grep -ci 'authentication failed' <<<"$out" | sed 's/^[1-9][0-9]*$/1/')" = "0:1"
if [ -x "${GOBIN:-}" ]; then
    timeout 30 "$GOBIN" -client franz-sasl -bootstrap "$SS" -protocol SASL_SSL -mechanism SCRAM-SHA-512 -user alice \
        -password wrong -ca "$CA" -topic fz-wrong -n 1 >"$CERTS/fz-wrong.out" 2>&1
    rc=$?
    check "franz-go with a wrong SCRAM-SHA-512 password fails (exit 1, SASL_AUTHENTICATION_FAILED)" \
        test "$rc:$(grep -c SASL_AUTHENTICATION_FAILED "$CERTS/fz-wrong.out" | sed 's/^[1-9][0-9]*$/1/')" = "1:1"
fi
check "no password in the broker's log" test "$(grep -c 'alice-secret' "$BROKER_DIR/broker.log")" -eq 0
echo "  ..   sasl-clients took $(( $(date +%s) - T0 )) s"
summary sasl-clients
