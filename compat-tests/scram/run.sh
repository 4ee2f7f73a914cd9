#!/usr/bin/env bash
# scram/run.sh: SCRAM credentials managed with Apache Kafka 4.4.0's kafka-configs.sh (issue #23):
# AlterUserScramCredentials, DescribeUserScramCredentials and DescribeClientQuotas (which --describe
# --entity-type users also sends) against a broker on a free loopback port. Each answer is the one Kafka
# 4.4.0 gives for the same command (checked by hand against compat-tests/kafka-dist/start-kafka.sh on
# 2026-12-03): both mechanisms in one --add-config is DuplicateResourceException there too (its controller
# allows one change per user and request), so they are added one command each. The credentials file holds
# the keys RFC 5802 derives from the password (recomputed here with Python's hashlib), never the password;
# the credentials survive a restart; raw.py checks Kafka's per-user answers on the wire first; a damaged file stops the start with a message.
# Needs compat-tests/.cache/kafka-4.4.0 (compat-tests/kafka-dist/get-kafka.sh) and java.
# Prints "scram: N passed, N failed" last and exits non-zero on failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/broker.sh"
KAFKA_BIN=${KAFKA_HOME:-$REPO/compat-tests/.cache/kafka-4.4.0}/bin
trap broker_cleanup EXIT
if [ ! -x "$KAFKA_BIN/kafka-configs.sh" ] || ! command -v java >/dev/null; then
    fail "needs Kafka 4.4.0's tools (compat-tests/kafka-dist/get-kafka.sh) and java"
    summary scram
    exit 1
fi
broker_start || { fail "broker starts"; summary scram; exit 1; }
cfg() { timeout 60 "$KAFKA_BIN/kafka-configs.sh" --bootstrap-server "$BROKER" "$@" --entity-type users 2>&1 | grep -v '^[[:space:]]at '; }
has() { grep -qF -- "$1" <<<"$2"; }

run_py "scram/raw.py" "$here/raw.py"
out=$(cfg --describe)
check_eq "--describe with no users: nothing listed, no error" "" "$out"
out=$(cfg --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]' --entity-name alice)
check "both mechanisms in one --add-config: DuplicateResourceException, as Kafka 4.4.0" \
    has "DuplicateResourceException: A user credential cannot be altered twice in the same request" "$out"
out=$(cfg --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]' --entity-name alice)
check "--add-config SCRAM-SHA-256 iterations=8192" has "Completed updating config for user alice." "$out"
out=$(cfg --alter --add-config 'SCRAM-SHA-512=[password=alice-secret]' --entity-name alice)
check "--add-config SCRAM-SHA-512 (default iterations)" has "Completed updating config for user alice." "$out"
out=$(cfg --alter --add-config 'SCRAM-SHA-256=[iterations=20000,password=x]' --entity-name bob)
check "iterations 20000: UnacceptableCredentialException Too many iterations" \
    has "UnacceptableCredentialException: Too many iterations" "$out"
all=$(cfg --describe)
check "--describe lists alice's SCRAM-SHA-256 with 8192 iterations" has "SCRAM-SHA-256=iterations=8192" "$all"
check "and her SCRAM-SHA-512 with 4096" has "SCRAM-SHA-512=iterations=4096" "$all"
check "and no bob (refused)" test "$(grep -c "user-principal 'bob'" <<<"$all")" -eq 0
out=$(cfg --describe --entity-name alice)
check "--describe --entity-name alice" has "SCRAM credential configs for user-principal 'alice' are" "$out"
out=$(cfg --describe --entity-name bob)
check_eq "--describe --entity-name bob (none): nothing listed" "" "$out"

f=$BROKER_DIR/data/gregor-scram-credentials
check "the credentials file is in the log directory" test -s "$f"
check "it does not hold the password" test "$(grep -c alice-secret "$f")" -eq 0
check "its keys are RFC 5802's for the password (Hi, HMAC 'Client Key' / 'Server Key', H)" python3 - "$f" <<'PY'
import base64, hashlib, hmac, sys
lines = open(sys.argv[1]).read().splitlines()
seen = 0
for l in lines[1:-1]:
    mech, name, it, salt, stored, server = l.split(' ')
    h = {'SCRAM-SHA-256': 'sha256', 'SCRAM-SHA-512': 'sha512'}[mech]
    assert base64.b64decode(name) == b'alice'
    salted = hashlib.pbkdf2_hmac(h, b'alice-secret', base64.b64decode(salt), int(it))
    ck = hmac.new(salted, b'Client Key', h).digest()
    assert hashlib.new(h, ck).digest() == base64.b64decode(stored), mech
    assert hmac.new(salted, b'Server Key', h).digest() == base64.b64decode(server), mech
    seen += 1
assert seen == 2, seen
PY

broker_restart || fail "restart"
out=$(cfg --describe --entity-name alice)
check "after a restart both credentials are still described" \
    test "$(grep -c 'SCRAM-SHA-256=iterations=8192' <<<"$out")$(grep -c 'SCRAM-SHA-512=iterations=4096' <<<"$out")" = 11
out=$(cfg --alter --delete-config SCRAM-SHA-512 --entity-name alice)
check "--delete-config SCRAM-SHA-512" has "Completed updating config for user alice." "$out"
out=$(cfg --describe --entity-name alice)
check "then only SCRAM-SHA-256 is described" \
    test "$(grep -c 'SCRAM-SHA-256=iterations=8192' <<<"$out")$(grep -c 'SCRAM-SHA-512' <<<"$out")" = 10
out=$(cfg --alter --delete-config SCRAM-SHA-512 --entity-name alice)
check "deleting it again: ResourceNotFoundException" \
    has "ResourceNotFoundException: Attempt to delete a user credential that does not exist" "$out"

broker_stop
cp "$f" "$f.good"
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[40]^=1; open(p,'wb').write(b)" "$f"
out=$(timeout 30 "$GREGOR_BIN" --override listeners=PLAINTEXT://127.0.0.1:0 --override gregor.admin.listeners=http://127.0.0.1:0 \
    --override "log.dirs=$BROKER_DIR/data" 2>&1)
rc=$?
check_eq "a damaged credentials file stops the start (exit 2)" 2 "$rc"
check "with a message naming the file" has "gregor-scram-credentials is damaged" "$out"
mv "$f.good" "$f"
broker_restart || fail "restart with the file restored"
out=$(cfg --describe --entity-name alice)
check "restored: served again" has "SCRAM-SHA-256=iterations=8192" "$out"
# SCRAM logins (SASL_PLAINTEXT listener SC beside PLAINTEXT PT, both mechanisms enabled): users added with
# kafka-configs.sh log in at once with kcat (librdkafka), confluent-kafka and Kafka's console producer.
broker_stop
BROKER_ARGS=(--override "listeners=PT://127.0.0.1:0,SC://127.0.0.1:0"
    --override "listener.security.protocol.map=PT:PLAINTEXT,SC:SASL_PLAINTEXT"
    --override "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512")
_broker_launch || fail "start with a SCRAM listener"
SC=$(grep '^SC ' "$BROKER_DIR/listener" | cut -d' ' -f2)
out=$(cfg --alter --add-config 'SCRAM-SHA-512=[password=alice-512]' --entity-name alice)
check "--add-config SCRAM-SHA-512 on the running broker" has "Completed updating config for user alice." "$out"
K256=(-X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=alice -X sasl.password=alice-secret)
K512=(-X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=alice -X sasl.password=alice-512)
seq 1 500 | sed 's/^/scram-/' >"$BROKER_DIR/records"
timeout 30 kcat -P -b "$SC" "${K256[@]}" -t scram-login -l "$BROKER_DIR/records" 2>"$BROKER_DIR/kcat.err"
check_eq "kcat produces 500 records with SCRAM-SHA-256 (exit 0)" 0 "$?"
got=$(timeout 30 kcat -C -b "$SC" "${K512[@]}" -t scram-login -o beginning -e -q 2>>"$BROKER_DIR/kcat.err" | md5sum)
check_eq "kcat consumes the same 500 with SCRAM-SHA-512" "$(md5sum <"$BROKER_DIR/records")" "$got"
for bad in "SCRAM-SHA-256 alice wrong" "SCRAM-SHA-512 alice alice-secret" "SCRAM-SHA-256 nobody x"; do
    read -r m u pw <<<"$bad"
    out=$(timeout 20 kcat -L -b "$SC" -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=$m -X sasl.username=$u \
        -X sasl.password=$pw -m 3 2>&1)
    n_ok=$(grep -c 'broker 1 at' <<<"$out"); n_fail=$(grep -ci 'authentication failed' <<<"$out")
    check "kcat $m as $u with a wrong password or no such user: authentication failed, no metadata" \
        test "$n_ok:$((n_fail > 0))" = "0:1"
done
SC=$SC python3 - <<'PY' >"$BROKER_DIR/ck.out" 2>&1
import os, sys
from confluent_kafka import Producer, Consumer
conf = {'bootstrap.servers': os.environ['SC'], 'security.protocol': 'SASL_PLAINTEXT',
        'sasl.mechanisms': 'SCRAM-SHA-512', 'sasl.username': 'alice', 'sasl.password': 'alice-512'}
p = Producer(conf)
for i in range(100): p.produce('scram-ck', b'ck-%d' % i)
assert p.flush(30) == 0
c = Consumer(dict(conf, **{'group.id': 'scram-g', 'auto.offset.reset': 'earliest'}))
c.subscribe(['scram-ck'])
got = []
import time
end = time.time() + 30
while len(got) < 100 and time.time() < end:
    m = c.poll(1)
    if m is not None and not m.error(): got.append(m.value())
c.close()
assert got == [b'ck-%d' % i for i in range(100)], len(got)
print('ok')
PY
check "confluent-kafka produces and consumes (group) 100 records with SCRAM-SHA-512" grep -qx ok "$BROKER_DIR/ck.out"
if [ -x "$KAFKA_BIN/kafka-console-producer.sh" ]; then
    printf '%s\n' 'security.protocol=SASL_PLAINTEXT' 'sasl.mechanism=SCRAM-SHA-256' \
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";' \
        >"$BROKER_DIR/client.properties"
    seq 1 20 | timeout 60 "$KAFKA_BIN/kafka-console-producer.sh" --bootstrap-server "$SC" --topic scram-java \
        --producer.config "$BROKER_DIR/client.properties" >"$BROKER_DIR/java.out" 2>&1
    got=$(timeout 30 kcat -C -b "$SC" "${K256[@]}" -t scram-java -o beginning -e -q 2>/dev/null | tr '\n' ' ')
    check_eq "Kafka's console producer (ScramLoginModule, SCRAM-SHA-256) writes 20 records" "$(seq 1 20 | tr '\n' ' ')" "$got"
fi
check "no password in the broker's log" test "$(grep -c 'alice-secret\|alice-512' "$BROKER_DIR/broker.log")" -eq 0
summary scram
