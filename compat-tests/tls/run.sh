#!/usr/bin/env bash
# tls/run.sh: SSL listeners (issue #23, first slice). Certificates are made here with openssl (a CA, a
# server certificate for 127.0.0.1 in its SAN with an encrypted key, a client certificate, and a second CA
# that trusts nothing of ours); no key is checked in. One broker serves SSL (PEM keystore file, key
# password), MTLS (an SSL listener with listener.name.mtls.ssl.client.auth=required and its own truststore),
# REQ (ssl.client.auth=requested) and PLAINTEXT; kcat, confluent-kafka, kafka-python and (when KAFKA_HOME is
# set) Kafka's console tools use them. tls_checks.py adds a plaintext request on the SSL port, half-open and trickling handshakes,
# 8 MiB fetched across 1 MiB segments and the kTLS send path of each connection (gregor_tls_connections_total:
# userspace where the kernel has no tls ULP; the ktls check runs only where it has one, else a SKIP line). The
# TLSv1.2-only broker has gregor.ssl.ktls.enable=false (the off switch).
# reload.py reloads SSL's certificate and MTLS's truststore at runtime (kafka-configs.sh too), then a restart.
# Then a broker with the inline PEM form (KIP-651) read from a properties file, and start-up refusals
# (exit 2, the message naming the key); stores.sh: JKS and PKCS12 stores made with keytool.
set -u
. "$(dirname "$0")/../lib/broker.sh"
CERTS=$(mktemp -d /tmp/gregor-tls.XXXXXX)
trap 'broker_cleanup; rm -rf "$CERTS"' EXIT
T0=$(date +%s)

mkcerts() {
    cd "$CERTS" || return 1
    local o="-days 2 -sha256"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem $o -subj "/CN=Gregor test CA" &&
    openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem $o -subj "/CN=Other CA" &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext &&
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1" &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem $o -extfile san.ext &&
    openssl pkcs8 -topk8 -v2 aes-256-cbc -in server.key -out server-enc.key -passout pass:s3cret &&
    cat server-enc.key server.pem >server-keystore.pem &&
    cat server.key server.pem >server-plainkey.pem &&
    openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj "/CN=client" &&
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem $o &&
    openssl req -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.csr -subj "/CN=rogue" &&
    openssl x509 -req -in rogue.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial -out rogue.pem $o &&
    # certificate reload (reload.py): B and B2 (new keys, A's DN and SAN; B's key under another password),
    # C (another DN), D (fewer SubjectAltNames), a truststore with both CAs
    for n in B B2 C D; do
        local subj="/CN=127.0.0.1" ext=san.ext
        [ $n = C ] && subj="/CN=someone-else"
        [ $n = D ] && { printf 'subjectAltName=DNS:localhost\n' >san-d.ext; ext=san-d.ext; }
        openssl req -newkey rsa:2048 -nodes -keyout "server$n.key" -out "server$n.csr" -subj "$subj" &&
        openssl x509 -req -in "server$n.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "server$n.pem" $o -extfile $ext &&
        cat "server$n.key" "server$n.pem" >"server$n-keystore.pem" || return 1
    done &&
    openssl pkcs8 -topk8 -v2 aes-256-cbc -in serverB.key -out serverB-enc.key -passout pass:n3w &&
    cat serverB-enc.key serverB.pem >serverB-keystore.pem &&
    cat ca.pem other-ca.pem >trust-both.pem
}
mkcerts >"$CERTS/openssl.log" 2>&1 || { fail "certificates" "$(tail -3 "$CERTS/openssl.log")"; summary tls; exit 1; }
cd "$REPO" || exit 1

broker_start --override "listeners=SSL://127.0.0.1:0,MTLS://127.0.0.1:0,REQ://127.0.0.1:0,PLAINTEXT://127.0.0.1:0" \
    --override "listener.security.protocol.map=SSL:SSL,MTLS:SSL,REQ:SSL,PLAINTEXT:PLAINTEXT" \
    --override listener.name.req.ssl.client.auth=requested --override listener.name.req.ssl.truststore.type=PEM \
    --override "listener.name.req.ssl.truststore.location=$CERTS/ca.pem" \
    --override ssl.keystore.type=PEM --override "ssl.keystore.location=$CERTS/server-keystore.pem" \
    --override ssl.key.password=s3cret \
    --override listener.name.mtls.ssl.client.auth=required --override listener.name.mtls.ssl.truststore.type=PEM \
    --override "listener.name.mtls.ssl.truststore.location=$CERTS/ca.pem" \
    --override connections.max.idle.ms=4000 || { fail "start"; summary tls; exit 1; }
SSL=$BROKER
MTLS=$(grep '^MTLS ' "$BROKER_DIR/listener" | cut -d' ' -f2)
PLAIN=$(grep '^PLAINTEXT ' "$BROKER_DIR/listener" | cut -d' ' -f2)
REQ=$(grep '^REQ ' "$BROKER_DIR/listener" | cut -d' ' -f2)
KSSL=(-X security.protocol=ssl -X "ssl.ca.location=$CERTS/ca.pem")
KMTLS=(-X security.protocol=ssl -X "ssl.ca.location=$CERTS/ca.pem" -X "ssl.certificate.location=$CERTS/client.pem" -X "ssl.key.location=$CERTS/client.key")

# kcat: 3000 records of ~1 KB over SSL (fetch responses are larger than one 16 KiB TLS buffer)
python3 -c 'import sys
for i in range(3000): sys.stdout.write("r%05d-" % i + "x" * 1000 + "\n")' >"$CERTS/records"
timeout 30 kcat -P -b "$SSL" "${KSSL[@]}" -t tls1 -l "$CERTS/records" 2>"$CERTS/kcat.err"
check_eq "kcat produces 3000 records over SSL (exit 0)" "0" "$?"
got=$(timeout 30 kcat -C -b "$SSL" "${KSSL[@]}" -t tls1 -o beginning -e -q 2>>"$CERTS/kcat.err" | md5sum)
check_eq "kcat consumes the same 3000 records over SSL" "$(md5sum <"$CERTS/records")" "$got"
got=$(timeout 30 kcat -C -b "$PLAIN" -t tls1 -o beginning -e -q 2>>"$CERTS/kcat.err" | wc -l)
check_eq "the PLAINTEXT listener of the same broker serves them too" "3000" "$got"

# a client trusting another CA fails the handshake; the broker keeps serving
out=$(timeout 20 kcat -L -b "$SSL" -X security.protocol=ssl -X "ssl.ca.location=$CERTS/other-ca.pem" -m 3 2>&1)
rc=$?
check "kcat trusting another CA fails (exit $rc)" test "$rc" -ne 0
case "$out" in *"certificate verify failed"*|*"SSL handshake failed"*) pass "its error is the certificate check" ;; *) fail "its error is the certificate check" "$(echo "$out" | tail -2)" ;; esac
check_eq "and the broker keeps serving SSL clients" "1" "$(timeout 20 kcat -L -b "$SSL" "${KSSL[@]}" 2>/dev/null | grep -c 'broker 1 at')"

# ssl.client.auth=required on MTLS (listener.name.mtls.*): no certificate or a foreign one is refused
out=$(timeout 20 kcat -L -b "$MTLS" "${KSSL[@]}" -m 3 2>&1)
check "MTLS: a client without a certificate is refused" test $? -ne 0
out=$(timeout 20 kcat -L -b "$MTLS" -X security.protocol=ssl -X "ssl.ca.location=$CERTS/ca.pem" \
    -X "ssl.certificate.location=$CERTS/rogue.pem" -X "ssl.key.location=$CERTS/rogue.key" -m 3 2>&1)
check "MTLS: a client certificate from another CA is refused" test $? -ne 0
echo mtls-record | timeout 20 kcat -P -b "$MTLS" "${KMTLS[@]}" -t tls2 2>>"$CERTS/kcat.err"
check_eq "MTLS: a client with a certificate of the truststore's CA produces" "0" "$?"
check_eq "MTLS: and consumes what it produced" "mtls-record" \
    "$(timeout 20 kcat -C -b "$MTLS" "${KMTLS[@]}" -t tls2 -o beginning -e -q 2>>"$CERTS/kcat.err")"
check_eq "SSL (no client auth) still takes a client without a certificate" "mtls-record" \
    "$(timeout 20 kcat -C -b "$SSL" "${KSSL[@]}" -t tls2 -o beginning -e -q 2>>"$CERTS/kcat.err")"

# ssl.client.auth=requested (REQ): with or without a certificate, but not with one the truststore refuses
check_eq "REQ (requested): a client without a certificate is served" "1" \
    "$(timeout 20 kcat -L -b "$REQ" "${KSSL[@]}" 2>/dev/null | grep -c 'broker 1 at')"
check_eq "REQ (requested): a client with a trusted certificate is served" "1" \
    "$(timeout 20 kcat -L -b "$REQ" "${KMTLS[@]}" 2>/dev/null | grep -c 'broker 1 at')"
timeout 20 kcat -L -b "$REQ" -X security.protocol=ssl -X "ssl.ca.location=$CERTS/ca.pem" \
    -X "ssl.certificate.location=$CERTS/rogue.pem" -X "ssl.key.location=$CERTS/rogue.key" -m 3 >/dev/null 2>&1
check "REQ (requested): a client certificate from another CA is refused" test $? -ne 0

# kTLS (gregor.ssl.ktls.enable, default true): one line per SSL listener at start says which way Fetch's file
# ranges go out; where the kernel has no tls ULP it must say so, with the reason
if grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null; then
    check_eq "kTLS: each of the 3 SSL listeners logs 'kTLS send: available'" "3" \
        "$(grep -c 'listener [A-Z]*: kTLS send: available' "$BROKER_DIR/broker.log")"
else
    check_eq "kTLS: each of the 3 SSL listeners logs 'kTLS send: unavailable: the kernel has no tls ULP'" "3" \
        "$(grep -c 'listener [A-Z]*: kTLS send: unavailable: the kernel has no tls ULP' "$BROKER_DIR/broker.log")"
fi
check_eq "the PLAINTEXT listener logs no kTLS line" "0" "$(grep -c 'listener PLAINTEXT: kTLS' "$BROKER_DIR/broker.log")"

SSL=$SSL MTLS=$MTLS PLAIN=$PLAIN CERTS=$CERTS ADMIN=$ADMIN run_py "tls_checks.py" "$REPO/compat-tests/tls/tls_checks.py"

# Kafka's console tools over SSL with a PEM truststore (the Java client), when Kafka is there
KAFKA_HOME=${KAFKA_HOME:-$REPO/compat-tests/.cache/kafka-4.4.0}
if [ -x "$KAFKA_HOME/bin/kafka-console-producer.sh" ]; then
    printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$CERTS/ca.pem" >"$CERTS/java.properties"
    seq 1 5 | sed 's/^/java-/' | timeout 60 "$KAFKA_HOME/bin/kafka-console-producer.sh" --bootstrap-server "$SSL" \
        --topic tls3 --command-config "$CERTS/java.properties" >"$CERTS/java.log" 2>&1 ||
    seq 1 5 | sed 's/^/java-/' | timeout 60 "$KAFKA_HOME/bin/kafka-console-producer.sh" --bootstrap-server "$SSL" \
        --topic tls3 --producer.config "$CERTS/java.properties" >>"$CERTS/java.log" 2>&1
    check_eq "Kafka's console producer (Java) writes over SSL" "java-1 java-2 java-3 java-4 java-5" \
        "$(timeout 30 kcat -C -b "$SSL" "${KSSL[@]}" -t tls3 -o beginning -e -q 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
else
    xfail "Kafka's console tools over SSL" "KAFKA_HOME (compat-tests/kafka-dist/get-kafka.sh)"
fi
kill -0 "$BROKER_PID" 2>/dev/null
check_eq "the broker is still running after all of the above" "0" "$?"

# Certificate reload without restart (IncrementalAlterConfigs on this broker's BROKER resource), then a restart
# serves the reloaded certificate and truststore (the dynamic config file)
SSL=$BROKER MTLS=$MTLS PLAIN=$PLAIN CERTS=$CERTS run_py "reload.py" "$REPO/compat-tests/tls/reload.py"
if [ -n "${KAFKA_HOME:-}" ] && [ -x "$KAFKA_HOME/bin/kafka-configs.sh" ]; then
    cp "$CERTS/serverB-keystore.pem" "$CERTS/reload.pem" # a changed file at the same location is read again
    out=$(timeout 60 "$KAFKA_HOME/bin/kafka-configs.sh" --bootstrap-server "$PLAIN" --entity-type brokers --entity-name 1 \
        --alter --add-config "listener.name.ssl.ssl.keystore.location=$CERTS/reload.pem" 2>&1)
    check_eq "kafka-configs.sh --alter --add-config listener.name.ssl.ssl.keystore.location (exit 0)" "0" "$?"
    SSL=$BROKER CERTS=$CERTS run_py "reload.py serves B" "$REPO/compat-tests/tls/reload.py" serves
else
    xfail "kafka-configs.sh reloads the certificate" "KAFKA_HOME"
fi
broker_restart
SSL=$BROKER MTLS=$(grep '^MTLS ' "$BROKER_DIR/listener" | cut -d' ' -f2) PLAIN=$(grep '^PLAINTEXT ' "$BROKER_DIR/listener" | cut -d' ' -f2) \
    CERTS=$CERTS run_py "reload.py after restart" "$REPO/compat-tests/tls/reload.py" restart
broker_stop

# the kTLS path's bookkeeping (the TLS buffer stopping at a file range, partial sends, a full socket) on a machine
# whose kernel cannot encrypt: GREGOR_TEST_KTLS_EMULATE=1 sends file ranges through its calls with a user-space
# copy; 8 MiB across segments and 40 pipelined Fetches read slowly must come back exact
rm -rf "$BROKER_DIR"; BROKER_DIR=
GREGOR_TEST_KTLS_EMULATE=1 broker_start --override "listeners=SSL://127.0.0.1:0" --override ssl.keystore.type=PEM \
    --override "ssl.keystore.location=$CERTS/server-plainkey.pem" || fail "the broker with the kTLS path emulated starts"
check_eq "GREGOR_TEST_KTLS_EMULATE=1 is said at start" "1" "$(grep -c 'kTLS send: .*GREGOR_TEST_KTLS_EMULATE=1' "$BROKER_DIR/broker.log")"
SSL=$BROKER MTLS=$BROKER PLAIN= CERTS=$CERTS ADMIN=$ADMIN MODE=emulate run_py "tls_checks.py (emulated kTLS path)" \
    "$REPO/compat-tests/tls/tls_checks.py"
broker_stop

# the inline PEM form (KIP-651) from a properties file, values continued over lines as Kafka's docs show
{
    printf 'ssl.keystore.type=PEM\nssl.keystore.key=%s\n' "$(sed 's/$/ \\/' "$CERTS/server.key" | sed '$ s/ \\$//')"
    printf 'ssl.keystore.certificate.chain=%s\n' "$(sed 's/$/ \\/' "$CERTS/server.pem" | sed '$ s/ \\$//')"
    printf 'listeners=SSL://127.0.0.1:0\n'
} >"$CERTS/inline.properties"
rm -rf "$BROKER_DIR"; BROKER_DIR=
broker_start "$CERTS/inline.properties" --override "listeners=SSL://127.0.0.1:0" || fail "inline PEM broker starts"
check_eq "inline ssl.keystore.key + ssl.keystore.certificate.chain: kcat reads Metadata over SSL" "1" \
    "$(timeout 20 kcat -L -b "$BROKER" "${KSSL[@]}" 2>/dev/null | grep -c 'broker 1 at')"
out=$(timeout 20 "$GREGOR_BIN" --healthcheck --override "listeners=SSL://127.0.0.1:0" \
    --override "gregor.listener.file=$BROKER_DIR/listener" 2>&1)
check_eq "gregor --healthcheck speaks TLS to an SSL first listener" "0:healthcheck: ok" "$?:$out"
broker_stop

# ssl.enabled.protocols and ssl.cipher.suites (a Java/IANA name) as openssl s_client sees them
rm -rf "$BROKER_DIR"; BROKER_DIR=
broker_start --override "listeners=SSL://127.0.0.1:0" --override ssl.keystore.type=PEM \
    --override "ssl.keystore.location=$CERTS/server-plainkey.pem" --override ssl.enabled.protocols=TLSv1.2 \
    --override ssl.cipher.suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 --override gregor.ssl.ktls.enable=false ||
    fail "TLSv1.2-only broker starts"
# the kTLS off switch: said at start, and every connection then takes pread + SSL_write
check_eq "gregor.ssl.ktls.enable=false: the listener logs 'kTLS send: off'" "1" \
    "$(grep -c 'listener SSL: kTLS send: off (gregor.ssl.ktls.enable=false)' "$BROKER_DIR/broker.log")"
timeout 20 kcat -L -b "$BROKER" "${KSSL[@]}" >/dev/null 2>&1
check_eq "gregor.ssl.ktls.enable=false: kcat's connections count as userspace, none as ktls" "userspace>0 ktls=0" \
    "$(curl -s "http://$ADMIN/metrics" | awk '/^gregor_tls_connections_total\{listener="SSL",send="userspace"\}/ {u=$2}
        /^gregor_tls_connections_total\{listener="SSL",send="ktls"\}/ {k=$2}
        END {printf "userspace%s ktls=%s", (u > 0 ? ">0" : "=" u), k}')"
sc() { timeout 10 openssl s_client -connect "$BROKER" -CAfile "$CERTS/ca.pem" "$@" </dev/null >/dev/null 2>&1; }
sc -tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256
check_eq "TLSv1.2 with the one listed suite: handshake" "0" "$?"
sc -tls1_3
check "ssl.enabled.protocols=TLSv1.2: a TLSv1.3-only client is refused" test $? -ne 0
sc -tls1_2 -cipher ECDHE-RSA-AES256-GCM-SHA384
check "ssl.cipher.suites: a suite not listed is refused" test $? -ne 0
broker_stop

# start-up refusals: exit 2 and a message naming the key, before the broker serves
refused() { # NAME EXPECTED-TEXT overrides...
    local name=$1 want=$2 d out rc
    shift 2
    d=$(mktemp -d /tmp/gregor-test.XXXXXX)
    out=$(timeout 20 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override "log.dirs=$d/data" \
        --override "listeners=SSL://127.0.0.1:0" "$@" 2>&1)
    rc=$?
    rm -rf "$d"
    case "$rc:$out" in "2:"*"$want"*) pass "$name (exit 2, names $want)" ;; *) fail "$name" "exit $rc: $(echo "$out" | tail -2)" ;; esac
}
P=(--override ssl.keystore.type=PEM)
refused "no keystore" "ssl.keystore.location" "${P[@]}"
refused "PEM file, type unset (Kafka's default JKS)" "ssl.keystore.type is JKS but '$CERTS/server-plainkey.pem' is PEM text: set ssl.keystore.type=PEM" --override "ssl.keystore.location=$CERTS/server-plainkey.pem"
refused "PEM file as a PKCS12 keystore" "ssl.keystore.type is PKCS12 but" --override ssl.keystore.type=PKCS12 --override "ssl.keystore.location=$CERTS/server-plainkey.pem" --override ssl.keystore.password=x
refused "missing keystore file" "ssl.keystore.location: cannot read" "${P[@]}" --override "ssl.keystore.location=$CERTS/nope.pem"
refused "encrypted key without ssl.key.password" "set ssl.key.password" "${P[@]}" --override "ssl.keystore.location=$CERTS/server-keystore.pem"
refused "wrong ssl.key.password" "is ssl.key.password right" "${P[@]}" --override "ssl.keystore.location=$CERTS/server-keystore.pem" --override ssl.key.password=wrong
refused "key of another certificate" "does not match" "${P[@]}" --override "ssl.keystore.key=$(cat "$CERTS/client.key")" --override "ssl.keystore.certificate.chain=$(cat "$CERTS/server.pem")"
refused "keystore without a certificate" "no certificate found" "${P[@]}" --override "ssl.keystore.location=$CERTS/server.key"
refused "unknown protocol" "ssl.enabled.protocols: unknown protocol 'SSLv3'" "${P[@]}" --override "ssl.keystore.location=$CERTS/server-plainkey.pem" --override ssl.enabled.protocols=SSLv3
refused "bad ssl.client.auth" "ssl.client.auth must be none, requested or required" --override ssl.client.auth=maybe
refused "ssl.keystore.password with PEM" "ssl.keystore.password cannot be specified with PEM format" "${P[@]}" --override "ssl.keystore.location=$CERTS/server-plainkey.pem" --override ssl.keystore.password=x
refused "PEM file as a JKS truststore (type unset)" "ssl.truststore.type is JKS but" "${P[@]}" --override "ssl.keystore.location=$CERTS/server-plainkey.pem" --override "ssl.truststore.location=$CERTS/ca.pem"
refused "per-listener key wins over broker-wide" "listener SSL: ssl.keystore.location: cannot read" "${P[@]}" \
    --override "ssl.keystore.location=$CERTS/server-plainkey.pem" --override "listener.name.ssl.ssl.keystore.location=$CERTS/nope.pem"
refused "unknown cipher suite" "ssl.cipher.suites: no usable TLS 1.2 suite" "${P[@]}" --override "ssl.keystore.location=$CERTS/server-plainkey.pem" --override ssl.cipher.suites=TLS_NOPE_WITH_NOTHING
. "$REPO/compat-tests/tls/stores.sh" # JKS and PKCS12 stores
# Hostile connections before authentication: 10,000 waiting on an SSL and a SASL_PLAINTEXT listener of a broker
# with the default connections.max.idle.ms (halfopen.py: bounded memory, other clients served)
broker_stop
JAAS='org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
broker_start --override "listeners=SSL://127.0.0.1:0,SP://127.0.0.1:0" \
    --override "listener.security.protocol.map=SSL:SSL,SP:SASL_PLAINTEXT" --override sasl.enabled.mechanisms=PLAIN \
    --override "listener.name.sp.plain.sasl.jaas.config=$JAAS" \
    --override ssl.keystore.type=PEM --override "ssl.keystore.location=$CERTS/server-keystore.pem" \
    --override ssl.key.password=s3cret || fail "broker for the hostile connections starts"
SASLP=$(grep '^SP ' "$BROKER_DIR/listener" | cut -d' ' -f2)
SSL=$BROKER SASLP=$SASLP CA=$CERTS/ca.pem PID=$BROKER_PID run_py "halfopen.py" "$REPO/compat-tests/tls/halfopen.py"
echo "  ..   tls suite took $(( $(date +%s) - T0 )) s"
summary tls
