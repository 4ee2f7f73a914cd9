# tls/stores.sh: JKS and PKCS12 key and trust stores (issue #23), sourced by tls/run.sh after its refusals
# (it uses run.sh's CERTS, KSSL, KMTLS and refused). The stores are made here from run.sh's certificates:
# openssl writes PKCS12 files (AES, and -legacy RC2/3DES), Java's keytool (from the JDK Kafka runs on) turns
# them into a JKS keystore with its own key password, a Java 17 PKCS12 keystore, and JKS and PKCS12
# truststores holding the CA as a trusted-certificate entry. One broker serves four SSL listeners with them;
# kcat and the Java client connect; then wrong passwords and damaged stores are refused at start.
KEYTOOL=$(command -v keytool || true)
[ -z "$KEYTOOL" ] && command -v java >/dev/null && KEYTOOL=$(dirname "$(readlink -f "$(command -v java)")")/keytool
if [ ! -x "${KEYTOOL:-}" ]; then
    xfail "JKS and PKCS12 stores" "keytool (a JDK: apt-get install openjdk-17-jdk-headless)"
    return 0
fi
mkstores() {
    cd "$CERTS" || return 1
    local kt="$KEYTOOL -noprompt"
    openssl pkcs12 -export -inkey server.key -in server.pem -certfile ca.pem -name server -passout pass:storepw -out server-openssl.p12 &&
    openssl pkcs12 -export -legacy -inkey server.key -in server.pem -certfile ca.pem -name server -passout pass:storepw -out server-legacy.p12 &&
    openssl pkcs12 -export -inkey client.key -in client.pem -name client -passout pass:clientpw -out client.p12 || return 1
    # four JVMs at once: the suite's time is their start-up
    $kt -importkeystore -srckeystore server-openssl.p12 -srcstoretype PKCS12 -srcstorepass storepw -srcalias server \
        -destkeystore server.jks -deststoretype JKS -deststorepass storepw -destkeypass keypw1 -destalias server &
    $kt -importkeystore -srckeystore server-openssl.p12 -srcstoretype PKCS12 -srcstorepass storepw \
        -destkeystore server-java.p12 -deststoretype PKCS12 -deststorepass storepw &
    $kt -importcert -alias ca -file ca.pem -keystore trust.jks -storetype JKS -storepass trustpw &
    $kt -importcert -alias ca -file ca.pem -keystore trust.p12 -storetype PKCS12 -storepass trustpw &
    wait
    test -s server.jks && test -s server-java.p12 && test -s trust.jks && test -s trust.p12
}
T1=$(date +%s)
if ! (mkstores >"$CERTS/keytool.log" 2>&1); then
    fail "stores made with openssl and keytool" "$(tail -3 "$CERTS/keytool.log")"
    return 0
fi
cd "$REPO" || return 0
rm -rf "$BROKER_DIR"; BROKER_DIR=
# SSL: a JKS keystore, ssl.keystore.type unset (Kafka's default JKS), a key password of its own.
# MTLS: Java 17's PKCS12 keystore (AES-256, HmacSHA256) and a JKS truststore with its password.
# MTLSP: openssl -legacy PKCS12 (RC2/3DES, the legacy provider), type in lower case, a keytool PKCS12 truststore.
# MTLSN: a JKS truststore without its password (read without the integrity check, as Java).
broker_start --override "listeners=SSL://127.0.0.1:0,MTLS://127.0.0.1:0,MTLSP://127.0.0.1:0,MTLSN://127.0.0.1:0" \
    --override "listener.security.protocol.map=SSL:SSL,MTLS:SSL,MTLSP:SSL,MTLSN:SSL" \
    --override "ssl.keystore.location=$CERTS/server.jks" --override ssl.keystore.password=storepw \
    --override ssl.key.password=keypw1 \
    --override listener.name.mtls.ssl.keystore.type=PKCS12 --override "listener.name.mtls.ssl.keystore.location=$CERTS/server-java.p12" \
    --override listener.name.mtls.ssl.key.password=storepw --override listener.name.mtls.ssl.client.auth=required \
    --override "listener.name.mtls.ssl.truststore.location=$CERTS/trust.jks" --override listener.name.mtls.ssl.truststore.password=trustpw \
    --override listener.name.mtlsp.ssl.keystore.type=pkcs12 --override "listener.name.mtlsp.ssl.keystore.location=$CERTS/server-legacy.p12" \
    --override listener.name.mtlsp.ssl.key.password=storepw --override listener.name.mtlsp.ssl.client.auth=required \
    --override listener.name.mtlsp.ssl.truststore.type=PKCS12 --override "listener.name.mtlsp.ssl.truststore.location=$CERTS/trust.p12" \
    --override listener.name.mtlsp.ssl.truststore.password=trustpw \
    --override listener.name.mtlsn.ssl.client.auth=required --override "listener.name.mtlsn.ssl.truststore.location=$CERTS/trust.jks" ||
    { fail "broker with JKS and PKCS12 stores starts" "$(tail -1 "$BROKER_DIR/broker.log" 2>/dev/null)"; return 0; }
S_SSL=$BROKER
S_MTLS=$(grep '^MTLS ' "$BROKER_DIR/listener" | cut -d' ' -f2)
S_MTLSP=$(grep '^MTLSP ' "$BROKER_DIR/listener" | cut -d' ' -f2)
S_MTLSN=$(grep '^MTLSN ' "$BROKER_DIR/listener" | cut -d' ' -f2)
seq 1 50 | sed 's/^/jks-/' >"$CERTS/jks-records"
timeout 30 kcat -P -b "$S_SSL" "${KSSL[@]}" -t stores1 -l "$CERTS/jks-records" 2>>"$CERTS/kcat.err"
check_eq "JKS keystore (type unset = JKS, own key password): kcat produces over SSL" "0" "$?"
check_eq "JKS keystore: kcat consumes the same 50 records" "$(cat "$CERTS/jks-records")" \
    "$(timeout 30 kcat -C -b "$S_SSL" "${KSSL[@]}" -t stores1 -o beginning -e -q 2>>"$CERTS/kcat.err")"
for l in "MTLS:keytool PKCS12 keystore + JKS truststore" "MTLSP:legacy openssl PKCS12 keystore + keytool PKCS12 truststore" \
    "MTLSN:JKS truststore without its password"; do
    eval "addr=\$S_${l%%:*}"
    check_eq "${l#*:}: kcat with a client certificate reads Metadata (mutual TLS)" "1" \
        "$(timeout 20 kcat -L -b "$addr" "${KMTLS[@]}" 2>/dev/null | grep -c 'broker 1 at')"
done
timeout 20 kcat -L -b "$S_MTLS" -X security.protocol=ssl -X "ssl.ca.location=$CERTS/ca.pem" \
    -X "ssl.certificate.location=$CERTS/rogue.pem" -X "ssl.key.location=$CERTS/rogue.key" -m 3 >/dev/null 2>&1
check "JKS truststore: a client certificate from another CA is refused" test $? -ne 0
timeout 20 kcat -L -b "$S_MTLS" "${KSSL[@]}" -m 3 >/dev/null 2>&1
check "JKS truststore, client auth required: a client without a certificate is refused" test $? -ne 0
KAFKA_HOME=${KAFKA_HOME:-$REPO/compat-tests/.cache/kafka-4.4.0}
if [ -x "$KAFKA_HOME/bin/kafka-console-producer.sh" ]; then
    # the Java client with the same kind of stores: a JKS truststore and a PKCS12 keystore, mutual TLS
    printf 'security.protocol=SSL\nssl.truststore.location=%s\nssl.truststore.password=trustpw\nssl.keystore.type=PKCS12\nssl.keystore.location=%s\nssl.keystore.password=clientpw\n' \
        "$CERTS/trust.jks" "$CERTS/client.p12" >"$CERTS/java-stores.properties"
    seq 1 3 | sed 's/^/java-jks-/' | timeout 60 "$KAFKA_HOME/bin/kafka-console-producer.sh" --bootstrap-server "$S_MTLS" \
        --topic stores2 --command-config "$CERTS/java-stores.properties" >"$CERTS/java-stores.log" 2>&1
    check_eq "Java producer (JKS truststore, PKCS12 keystore) writes over mutual TLS to the PKCS12/JKS listener" \
        "java-jks-1 java-jks-2 java-jks-3" \
        "$(timeout 30 kcat -C -b "$S_MTLS" "${KMTLS[@]}" -t stores2 -o beginning -e -q 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
else
    xfail "the Java client with JKS/PKCS12 stores" "KAFKA_HOME (compat-tests/kafka-dist/get-kafka.sh)"
fi
broker_stop

J=(--override "ssl.keystore.location=$CERTS/server.jks")
refused "JKS keystore, wrong store password" "ssl.keystore.password: wrong password or damaged store" \
    "${J[@]}" --override ssl.keystore.password=nope --override ssl.key.password=keypw1
refused "JKS keystore, wrong key password" "ssl.key.password: wrong password for the private key 'server'" \
    "${J[@]}" --override ssl.keystore.password=storepw --override ssl.key.password=nope
refused "JKS keystore, key password unset (the store's is tried)" "ssl.key.password is unset: the store's password was tried" \
    "${J[@]}" --override ssl.keystore.password=storepw
refused "JKS keystore without ssl.keystore.password" "ssl.keystore.password: unset, but '$CERTS/server.jks' is a JKS keystore" "${J[@]}"
head -c 900 "$CERTS/server.jks" >"$CERTS/truncated.jks"
refused "truncated JKS keystore" "ssl.keystore.password: wrong password or damaged store" \
    --override "ssl.keystore.location=$CERTS/truncated.jks" --override ssl.keystore.password=storepw
refused "PKCS12 keystore, wrong password" "ssl.keystore.password: wrong password or damaged store" \
    --override ssl.keystore.type=PKCS12 --override "ssl.keystore.location=$CERTS/server-java.p12" --override ssl.keystore.password=nope
refused "PKCS12 keystore, another key password" "ssl.key.password: differs from ssl.keystore.password" \
    --override ssl.keystore.type=PKCS12 --override "ssl.keystore.location=$CERTS/server-java.p12" \
    --override ssl.keystore.password=storepw --override ssl.key.password=other
OPENSSL_MODULES=/nonexistent refused "legacy PKCS12 without OpenSSL's legacy provider" "OpenSSL's legacy provider is not available" \
    --override ssl.keystore.type=PKCS12 --override "ssl.keystore.location=$CERTS/server-legacy.p12" --override ssl.keystore.password=storepw
P12=(--override ssl.keystore.type=PKCS12 --override "ssl.keystore.location=$CERTS/server-java.p12" --override ssl.keystore.password=storepw)
refused "JKS truststore, wrong password" "ssl.truststore.password: wrong password or damaged store" "${P12[@]}" \
    --override ssl.client.auth=required --override "ssl.truststore.location=$CERTS/trust.jks" --override ssl.truststore.password=nope
refused "PKCS12 truststore without its password" "ssl.truststore.password: unset, but this PKCS12 store's certificates are encrypted" \
    "${P12[@]}" --override ssl.truststore.type=PKCS12 --override "ssl.truststore.location=$CERTS/trust.p12"
refused "ssl.truststore.password with PEM" "ssl.truststore.password cannot be specified for PEM format" "${P12[@]}" \
    --override ssl.truststore.type=PEM --override "ssl.truststore.location=$CERTS/ca.pem" --override ssl.truststore.password=x
refused "JCEKS keystore type" "ssl.keystore.type is 'JCEKS'" --override ssl.keystore.type=JCEKS \
    --override "ssl.keystore.location=$CERTS/server.jks" --override ssl.keystore.password=storepw
echo "  ..   stores part took $(( $(date +%s) - T1 )) s"
