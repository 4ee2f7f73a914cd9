#!/usr/bin/env bash
# oauth/run.sh: SASL/OAUTHBEARER (issue #23, RFC 7628, KIP-255, KIP-768). Keys are made here with openssl (RSA
# 2048 and EC P-256 for the JWKS, another RSA key not in it); the JWKS file is written from them. One broker
# serves UN (SASL_PLAINTEXT, unsecured JWS as Kafka's default broker handler) and SG (SASL_PLAINTEXT, signed
# JWTs as Kafka's OAuthBearerValidatorCallbackHandler: file: JWKS URL listed in
# org.apache.kafka.sasl.oauthbearer.allowed.urls, audience kafka, an issuer), connections.max.reauth.ms=60000
# so that a token's exp is what bounds the session: oauth_checks.py (raw protocol, confluent-kafka with its
# unsecured token and with RS256/ES256 tokens signed here), librdkafka's in-band re-authentications counted in
# the broker's DEBUG log, Kafka's console producer with OAuthBearerLoginModule unsecuredLoginStringClaim_sub=alice
# when KAFKA_HOME is set, no token in the broker's log, then start-up refusals (exit 2, the message naming the
# key); then jwks_checks.py: an https:// JWKS endpoint (a Python HTTPS server with a private CA) fetched at
# start and refreshed on demand and on failure kept, with its own broker. Prints "oauth: N passed, N failed"
# last.
set -u
. "$(dirname "$0")/../lib/broker.sh"
DIR=$(mktemp -d /tmp/gregor-oauth.XXXXXX)
trap 'broker_cleanup; rm -rf "$DIR"' EXIT
T0=$(date +%s)
ISS=https://issuer.gregor.test

mkkeys() {
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$DIR/rsa.pem" &&
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$DIR/other.pem" &&
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DIR/ec.pem" &&
    python3 - "$DIR" <<'PY'
import base64, json, sys
from cryptography.hazmat.primitives import serialization
d = sys.argv[1]
b = lambda i, n=None: base64.urlsafe_b64encode(i.to_bytes(n or (i.bit_length() + 7) // 8, 'big')).rstrip(b'=').decode()
load = lambda f: serialization.load_pem_private_key(open(f'{d}/{f}', 'rb').read(), None).public_key().public_numbers()
r, e = load('rsa.pem'), load('ec.pem')
keys = [{'kty': 'RSA', 'kid': 'rsa1', 'use': 'sig', 'alg': 'RS256', 'n': b(r.n), 'e': b(r.e)},
        {'kty': 'EC', 'kid': 'ec1', 'use': 'sig', 'crv': 'P-256', 'x': b(e.x, 32), 'y': b(e.y, 32)}]
json.dump({'keys': keys}, open(f'{d}/jwks.json', 'w'))
PY
}
mkkeys >"$DIR/keys.log" 2>&1 || { fail "keys" "$(tail -3 "$DIR/keys.log")"; summary oauth; exit 1; }
cd "$REPO" || exit 1

MOD=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule
HANDLER=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
JWKS=file://$DIR/jwks.json
REAUTH_MS=60000
broker_start --override "listeners=UN://127.0.0.1:0,SG://127.0.0.1:0" \
    --override "listener.security.protocol.map=UN:SASL_PLAINTEXT,SG:SASL_PLAINTEXT" \
    --override sasl.enabled.mechanisms=OAUTHBEARER \
    --override "listener.name.un.oauthbearer.sasl.jaas.config=$MOD required;" \
    --override "listener.name.sg.oauthbearer.sasl.jaas.config=$MOD required;" \
    --override "listener.name.sg.oauthbearer.sasl.server.callback.handler.class=$HANDLER" \
    --override "sasl.oauthbearer.jwks.endpoint.url=$JWKS" --override "org.apache.kafka.sasl.oauthbearer.allowed.urls=$JWKS" \
    --override sasl.oauthbearer.expected.audience=kafka --override "sasl.oauthbearer.expected.issuer=$ISS" \
    --override connections.max.reauth.ms=$REAUTH_MS --override gregor.log.level=DEBUG || { fail "start"; summary oauth; exit 1; }
UN=$BROKER
SG=$(grep '^SG ' "$BROKER_DIR/listener" | cut -d' ' -f2)

UN=$UN SG=$SG DIR=$DIR ISS=$ISS REAUTH_MS=$REAUTH_MS run_py "oauth_checks.py" "$REPO/compat-tests/oauth/oauth_checks.py"

KUN=(-X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=OAUTHBEARER -X enable.sasl.oauthbearer.unsecure.jwt=true
    -X sasl.oauthbearer.config=principal=alice)
KAFKA_HOME=${KAFKA_HOME:-$REPO/compat-tests/.cache/kafka-4.4.0}
if [ -x "$KAFKA_HOME/bin/kafka-console-producer.sh" ]; then
    {
        printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n'
        printf 'sasl.jaas.config=%s required unsecuredLoginStringClaim_sub="alice";\n' "$MOD"
    } >"$DIR/java.properties"
    seq 1 5 | sed 's/^/java-/' | timeout 60 "$KAFKA_HOME/bin/kafka-console-producer.sh" --bootstrap-server "$UN" \
        --topic oauth-java --command-config "$DIR/java.properties" >"$DIR/java.log" 2>&1
    check_eq "Kafka's console producer (Java) with OAuthBearerLoginModule unsecuredLoginStringClaim_sub=alice" \
        "java-1 java-2 java-3 java-4 java-5" \
        "$(timeout 30 kcat -C -b "$UN" "${KUN[@]}" -t oauth-java -o beginning -e -q 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
else
    xfail "Kafka's console producer with OAuthBearerLoginModule" "KAFKA_HOME (compat-tests/kafka-dist/get-kafka.sh)"
fi
# the broker logs each in-band re-authentication at DEBUG: librdkafka's (oauth_checks.py's 4 s tokens over
# 10 s) must have happened on the live connection, not by reconnecting
for a in rs256 es256; do
    n=$(grep -c "SASL OAUTHBEARER re-authenticated as User:svc-$a" "$BROKER_DIR/broker.log")
    check "confluent-kafka with $a tokens re-authenticated in band as each token neared exp ($n times, at least 2)" test "$n" -ge 2
done
kill -0 "$BROKER_PID" 2>/dev/null
check_eq "the broker is still running after all of the above" "0" "$?"
check_eq "no token in the broker's log (a JWS starts with eyJ, base64url of '{\"')" "0" "$(grep -c 'eyJ' "$BROKER_DIR/broker.log")"
grep -q "OAUTHBEARER token refused (invalid_token): Audience (aud) claim does not hold an expected audience" "$BROKER_DIR/broker.log"
check_eq "a refused token's reason is logged on the broker" "0" "$?"
broker_stop

refused() { # NAME EXPECTED-TEXT overrides...
    local name=$1 want=$2 d out rc
    shift 2
    d=$(mktemp -d /tmp/gregor-test.XXXXXX)
    out=$(timeout 20 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override "log.dirs=$d/data" \
        --override "listeners=SG://127.0.0.1:0" --override "listener.security.protocol.map=SG:SASL_PLAINTEXT" \
        --override sasl.enabled.mechanisms=OAUTHBEARER "$@" 2>&1)
    rc=$?
    rm -rf "$d"
    case "$rc:$out" in "2:"*"$want"*) pass "$name (exit 2, names $want)" ;; *) fail "$name" "exit $rc: $(echo "$out" | tail -2)" ;; esac
}
refused "OAUTHBEARER without a JAAS config" "listener.name.sg.oauthbearer.sasl.jaas.config is not set"
refused "a JWKS URL not in org.apache.kafka.sasl.oauthbearer.allowed.urls (Kafka 4.x's default allows none)" \
    "org.apache.kafka.sasl.oauthbearer.allowed.urls" --override "listener.name.sg.oauthbearer.sasl.jaas.config=$MOD required;" \
    --override "listener.name.sg.oauthbearer.sasl.server.callback.handler.class=$HANDLER" --override "sasl.oauthbearer.jwks.endpoint.url=$JWKS"
refused "an unknown server callback handler" "is not a handler Gregor knows" \
    --override "listener.name.sg.oauthbearer.sasl.jaas.config=$MOD required;" \
    --override "listener.name.sg.oauthbearer.sasl.server.callback.handler.class=com.example.Mine"
refused "a negative unsecuredValidatorAllowableClockSkewMs" "unsecuredValidatorAllowableClockSkewMs must be a non-negative integer" \
    --override "listener.name.sg.oauthbearer.sasl.jaas.config=$MOD required unsecuredValidatorAllowableClockSkewMs=\"-5\";"
GREGOR_BIN=$GREGOR_BIN run_py "jwks_checks.py" "$REPO/compat-tests/oauth/jwks_checks.py"
echo "  ..   oauth suite took $(( $(date +%s) - T0 )) s"
summary oauth
