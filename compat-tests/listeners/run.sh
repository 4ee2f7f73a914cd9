#!/usr/bin/env bash
# listeners/run.sh: several named listeners (listeners + advertised.listeners + listener.security.protocol.map,
# Kafka's names): each listener advertises its own address in Metadata and FindCoordinator, and a listener
# mapped to a protocol Gregor does not serve (none of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; those are
# compat-tests/tls/ and compat-tests/sasl/) stops the broker with a message naming it.
set -u
. "$(dirname "$0")/../lib/broker.sh"
trap broker_cleanup EXIT

broker_start --override "listeners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.2:0" \
    --override "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT" \
    --override "advertised.listeners=INTERNAL://broker:19092,EXTERNAL://localhost:29092" || { fail "start"; summary listeners; exit 1; }
EXT=$(sed -n 2p "$BROKER_DIR/listener" | cut -d' ' -f2)
check_eq "listener file names the second listener" "EXTERNAL" "$(sed -n 2p "$BROKER_DIR/listener" | cut -d' ' -f1)"
check_eq "INTERNAL clients are told broker:19092" "broker 1 at broker:19092 (controller)" \
    "$(kcat -L -b "$BROKER" 2>/dev/null | grep 'broker 1 at' | sed 's/^ *//')"
check_eq "EXTERNAL clients are told localhost:29092" "broker 1 at localhost:29092 (controller)" \
    "$(kcat -L -b "$EXT" 2>/dev/null | grep 'broker 1 at' | sed 's/^ *//')"
coord=$(REPO=$REPO PYTHONPATH=$REPO/compat-tests/lib python3 - "$EXT" <<'PY'
import sys, kafka_raw as k
c = k.Conn(sys.argv[1])
r = c.request("FindCoordinator", 1, {"key": "g", "key_type": 0})
print(f"{r['host']}:{r['port']}")
PY
)
check_eq "FindCoordinator on EXTERNAL answers localhost:29092" "localhost:29092" "$coord"
broker_stop

BROKER_DIR2=$(mktemp -d /tmp/gregor-test.XXXXXX)
out=$("$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override "listeners=WEIRD://127.0.0.1:0" \
    --override "listener.security.protocol.map=WEIRD:KERBEROS" --override "log.dirs=$BROKER_DIR2/data" 2>&1)
rc=$?
rm -rf "$BROKER_DIR2"
check_eq "a listener mapped to an unknown protocol stops the broker (exit 1)" "1" "$rc"
case "$out" in *"WEIRD is mapped to a protocol Gregor does not serve"*) pass "the message names the listener" ;; *) fail "the message names the listener" "$out" ;; esac
summary listeners
