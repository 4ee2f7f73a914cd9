#!/usr/bin/env bash
# acl/run.sh: ACLs (issue #23) over mutual TLS. Certificates are made here with openssl (a CA, the broker's
# certificate for 127.0.0.1, clients CN=admin, CN=alice,OU=eng,O=example and CN=bob,OU=ops,O=example); no
# key is checked in. One broker with authorizer.class.name=StandardAuthorizer, super.users=User:CN=admin and
# ssl.principal.mapping.rules mapping alice's subject to "alice" (bob keeps his RFC 2253 subject); acl_checks.py
# runs the matrix (each checked API: Kafka's error and nothing done without an ACL, success with it) around
# kafka-acls.sh --add/--list/--remove (Kafka 4.4.0's tool, KAFKA_HOME), then a restart (the ACL file), a
# damaged ACL file and bad settings refused at start (exit 2 naming the key), and a broker without an
# authorizer (SECURITY_DISABLED, nothing else changes). Last, acl_matrix.py over SASL_PLAINTEXT with PLAIN
# users: every API key of server/apis.def, refused without the ACL (nothing done) and served with it.
set -u
. "$(dirname "$0")/../lib/broker.sh"
. "$(dirname "$0")/../lib/certs.sh"
CERTS=$(mktemp -d /tmp/gregor-acl.XXXXXX)
trap 'broker_cleanup; rm -rf "$CERTS"' EXIT
T0=$(date +%s)
KAFKA_HOME=${KAFKA_HOME:-$REPO/compat-tests/.cache/kafka-4.4.0}

mkcerts() {
    certs_ca "$CERTS" ca "/CN=Gregor ACL test CA" && certs_server "$CERTS" || return 1
    certs_leaf "$CERTS" ca admin "/CN=admin" &&
        certs_leaf "$CERTS" ca alice "/O=example/OU=eng/CN=alice" &&
        certs_leaf "$CERTS" ca bob "/O=example/OU=ops/CN=bob"
}
mkcerts >"$CERTS/openssl.log" 2>&1 || { fail "certificates" "$(tail -3 "$CERTS/openssl.log")"; summary acl; exit 1; }
cd "$REPO" || exit 1

AUTHZ=org.apache.kafka.metadata.authorizer.StandardAuthorizer
ACL_ARGS=(--override "listeners=MTLS://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"
    --override "listener.security.protocol.map=MTLS:SSL,PLAINTEXT:PLAINTEXT"
    --override ssl.keystore.type=PEM --override "ssl.keystore.location=$CERTS/server-keystore.pem"
    --override ssl.client.auth=required --override ssl.truststore.type=PEM
    --override "ssl.truststore.location=$CERTS/ca.pem"
    --override "ssl.principal.mapping.rules=RULE:^CN=([a-z]+),OU=eng,O=example\$/\$1/,DEFAULT"
    --override "authorizer.class.name=$AUTHZ" --override "super.users=User:CN=admin")
broker_start "${ACL_ARGS[@]}" || { fail "start"; summary acl; exit 1; }
addrs() {
    MTLS=$BROKER # the first listener
    PLAIN=$(grep '^PLAINTEXT ' "$BROKER_DIR/listener" | cut -d' ' -f2)
}
addrs
phase() { MTLS=$MTLS PLAIN=$PLAIN CERTS=$CERTS PHASE=$1 run_py "acl_checks.py $1" "$REPO/compat-tests/acl/acl_checks.py"; }
phase before

# kafka-acls.sh (Java AdminClient) as the super user, over mutual TLS with a PEM keystore
printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\nssl.keystore.type=PEM\nssl.keystore.location=%s\n' \
    "$CERTS/ca.pem" "$CERTS/admin-keystore.pem" >"$CERTS/admin.properties"
acls() { timeout 90 "$KAFKA_HOME/bin/kafka-acls.sh" --bootstrap-server "$MTLS" --command-config "$CERTS/admin.properties" "$@" >>"$CERTS/acls.log" 2>&1; }
if [ -x "$KAFKA_HOME/bin/kafka-acls.sh" ]; then
    acls --add --allow-principal User:alice --operation Write --operation Read --topic acl-t
    check_eq "kafka-acls.sh --add WRITE and READ on acl-t for User:alice (exit 0)" "0" "$?"
    acls --add --allow-principal User:alice --operation Write --topic pre- --resource-pattern-type prefixed
    check_eq "kafka-acls.sh --add prefixed WRITE on pre- (exit 0)" "0" "$?"
    acls --add --allow-principal "User:CN=bob,OU=ops,O=example" --operation Describe --topic acl-t
    check_eq "kafka-acls.sh --add DESCRIBE for bob's subject (exit 0)" "0" "$?"
    acls --add --allow-principal User:alice --operation Read --group g-alice
    check_eq "kafka-acls.sh --add READ on group g-alice (exit 0)" "0" "$?"
    out=$(timeout 90 "$KAFKA_HOME/bin/kafka-acls.sh" --bootstrap-server "$MTLS" --command-config "$CERTS/admin.properties" --list --topic acl-t 2>&1)
    check_eq "kafka-acls.sh --list --topic acl-t shows the 3 literal ACLs" "3" "$(echo "$out" | grep -c 'principal=User:')"
    case "$out" in *"principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW"*) pass "--list shows alice's WRITE as Kafka prints it" ;;
        *) fail "--list shows alice's WRITE as Kafka prints it" "$(echo "$out" | head -5 | tr '\n' ' ')" ;; esac
    phase granted
    acls --remove --force --allow-principal User:alice --operation Write --topic acl-t
    check_eq "kafka-acls.sh --remove WRITE on acl-t for alice (exit 0)" "0" "$?"
    phase removed
    BOB_ACL=$(timeout 90 "$KAFKA_HOME/bin/kafka-acls.sh" --bootstrap-server "$MTLS" --command-config "$CERTS/admin.properties" --list --principal "User:CN=bob,OU=ops,O=example" 2>&1 | grep -c 'operation=DESCRIBE')
    check_eq "kafka-acls.sh --list --principal (bob's subject) finds his ACL" "1" "$BOB_ACL"
else
    xfail "kafka-acls.sh add/list/remove and the matrix after it" "KAFKA_HOME (compat-tests/kafka-dist/get-kafka.sh)"
fi

# persistence: the same ACLs after a restart (the ACL file in the log directory)
broker_restart && addrs
if [ -x "$KAFKA_HOME/bin/kafka-acls.sh" ]; then phase removed; fi
check "the ACL file is in the log directory" test -s "$BROKER_DIR/data/__gregor_acls"
broker_stop

# a damaged ACL file stops the broker at start, naming the file
cp "$BROKER_DIR/data/__gregor_acls" "$CERTS/acls.good" || fail "copy of the ACL file"
check "the ACL file holds more than 40 bytes" test "$(stat -c %s "$CERTS/acls.good")" -gt 40
head -c 40 "$CERTS/acls.good" >"$BROKER_DIR/data/__gregor_acls"
out=$(timeout 30 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override "log.dirs=$BROKER_DIR/data" "${ACL_ARGS[@]}" 2>&1)
rc=$?
case "$rc:$out" in "2:"*"__gregor_acls is damaged"*) pass "a truncated ACL file is refused at start (exit 2, names the file)" ;;
    *) fail "a truncated ACL file is refused at start" "exit $rc: $(echo "$out" | tail -2)" ;; esac
cp "$CERTS/acls.good" "$BROKER_DIR/data/__gregor_acls"

refused() { # NAME EXPECTED-TEXT overrides...
    local name=$1 want=$2 d out rc
    shift 2
    d=$(mktemp -d /tmp/gregor-test.XXXXXX)
    out=$(timeout 20 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override "log.dirs=$d/data" "$@" 2>&1)
    rc=$?
    rm -rf "$d"
    case "$rc:$out" in "2:"*"$want"*) pass "$name (exit 2, names $want)" ;; *) fail "$name" "exit $rc: $(echo "$out" | tail -2)" ;; esac
}
refused "the removed AclAuthorizer" "authorizer.class.name" --override "listeners=PLAINTEXT://127.0.0.1:0" \
    --override authorizer.class.name=kafka.security.authorizer.AclAuthorizer
refused "an unknown authorizer class" "authorizer.class.name" --override "listeners=PLAINTEXT://127.0.0.1:0" \
    --override authorizer.class.name=com.example.MyAuthorizer
refused "a super user without a type" "super.users" --override "listeners=PLAINTEXT://127.0.0.1:0" \
    --override "authorizer.class.name=$AUTHZ" --override "super.users=User:a;admin"
refused "a bad ssl.principal.mapping.rules" "ssl.principal.mapping.rules" "${ACL_ARGS[@]}" \
    --override "ssl.principal.mapping.rules=RULE:^CN=(.*\$/x/"

# no authorizer: the ACL APIs answer SECURITY_DISABLED, clients work as before
rm -rf "$BROKER_DIR"; BROKER_DIR=
broker_start || fail "a broker without an authorizer starts"
PLAIN=$BROKER MTLS= PHASE=disabled CERTS=$CERTS run_py "acl_checks.py disabled" "$REPO/compat-tests/acl/acl_checks.py"
broker_stop
# the ACL matrix (acl_matrix.py): every API key of server/apis.def over SASL_PLAINTEXT with PLAIN users,
# admin a super user, alice without ACLs, u<key> holding exactly the ACLs of that key's row
rm -rf "$BROKER_DIR"; BROKER_DIR=
JAAS='org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="pw-admin" user_admin="pw-admin" user_alice="pw-alice"'
for key in $(sed -n 's/^GR_API(\([0-9]*\),.*/\1/p' "$REPO/server/apis.def"); do JAAS="$JAAS user_u$key=\"pw-u$key\""; done
if broker_start --override "listeners=SP://127.0.0.1:0" --override "listener.security.protocol.map=SP:SASL_PLAINTEXT" \
    --override inter.broker.listener.name=SP --override sasl.enabled.mechanisms=PLAIN \
    --override "listener.name.sp.plain.sasl.jaas.config=$JAAS;" --override "authorizer.class.name=$AUTHZ" \
    --override "super.users=User:admin"; then
    SP=$BROKER run_py "acl_matrix.py" "$REPO/compat-tests/acl/acl_matrix.py"
    broker_stop
else
    fail "a SASL_PLAINTEXT broker with an authorizer starts (the ACL matrix)"
fi
echo "  ..   acl suite took $(( $(date +%s) - T0 )) s"
summary acl
