#!/usr/bin/env bash
# txn/run.sh: the transaction coordinator's server binding on one node (issue #21, server/txns.c), behind the
# test-only setting gregor.transaction.coordinator.test.enable: off (the default), FindCoordinator key type 1
# keeps answering COORDINATOR_NOT_AVAILABLE and makes no topic, and the transaction APIs are not served
# (transactions.py off); on, transactions work end to end (transactions.py on), and the first one creates __transaction_state with Kafka's
# settings and configs and names this broker, the coordinator loads every partition on the I/O pool at a
# coordinator epoch saved in the log directory and raised at every start; transaction.state.log.replication.factor
# or transaction.state.log.min.isr set above 1 stops a single-node broker. The group side (offsets.py):
# TxnOffsetCommit served only when on, its per-partition errors, OffsetFetch require_stable answering
# UNSTABLE_OFFSET_COMMIT while a transactional commit is pending, also after a restart. Read next:
# coordinator.py, offsets.py.
set -u
. "$(dirname "$0")/../lib/broker.sh"
trap broker_cleanup EXIT
export GREGOR_NET_THREAD_AUDIT=${GREGOR_NET_THREAD_AUDIT:-1} # compat-tests/run.sh sets a file

txn_step() { # txn_step STEP [SCRIPT]: one pass/fail per line that coordinator.py (or SCRIPT) prints
    local line
    while IFS= read -r line; do
        case "$line" in "ok   "*) pass "${line#ok   }" ;; "FAIL "*) fail "${line#FAIL }" ;; *) echo "$line" ;; esac
    done < <(timeout 60 python3 "$(dirname "$0")/${2:-coordinator.py}" "$BROKER" "$1" 2>&1)
}
# wait_log TEXT: up to 30 s for TEXT in the broker's log
wait_log() {
    for _ in $(seq 1 600); do grep -q "$1" "$BROKER_DIR/broker.log" && return 0; sleep 0.05; done
    return 1
}

broker_start || { fail "start"; summary txn; exit 1; }
txn_step off
txn_step off offsets.py
run_py "transactions off" "$(dirname "$0")/transactions.py" off
broker_stop
rm -rf "$BROKER_DIR"

BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
ON=(--override gregor.transaction.coordinator.test.enable=true)
broker_start "${ON[@]}" || { fail "start"; summary txn; exit 1; }
txn_step on
txn_step on offsets.py
check "every partition loaded at coordinator epoch 1" \
    wait_log "50 partitions of __transaction_state loaded at coordinator epoch 1"
check_eq "the epoch file holds 1" "00000001" "$(od -An -tx1 "$BROKER_DIR/data/transaction-coordinator-epoch" | tr -d ' \n')"
broker_restart "${ON[@]}"
txn_step present
txn_step pending offsets.py
check "the restart loaded every partition at coordinator epoch 2" \
    wait_log "50 partitions of __transaction_state loaded at coordinator epoch 2"
check_eq "the epoch file holds 2" "00000002" "$(od -An -tx1 "$BROKER_DIR/data/transaction-coordinator-epoch" | tr -d ' \n')"
broker_stop
check_eq "no ERROR or WARN logged" "" "$(grep -E ' (ERROR|WARN) ' "$BROKER_DIR/broker.log")"
rm -rf "$BROKER_DIR"

# Transactions end to end (transactions.py on): a fresh broker with the setting on.
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start "${ON[@]}" || { fail "start"; summary txn; exit 1; }
run_py "transactions on" "$(dirname "$0")/transactions.py" on
if command -v kcat >/dev/null; then # kcat's transactional producer: init, begin, produce, commit
    out=$(printf 'k1\nk2\n' | timeout 30 kcat -b "$BROKER" -X transactional.id=kc-1 -P -t kcat-txn -p 0 2>&1)
    case "$out" in *"Transaction successfully committed"*) pass "kcat -X transactional.id commits" ;;
        *) fail "kcat -X transactional.id commits" "$out" ;; esac
    check_eq "kcat read_committed reads both records" "k1 k2" "$(timeout 20 kcat -b "$BROKER" -C -t kcat-txn -p 0 \
        -o beginning -e -q -X isolation.level=read_committed 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
fi
broker_stop
check_eq "no ERROR logged" "" "$(grep -E ' ERROR ' "$BROKER_DIR/broker.log")"
rm -rf "$BROKER_DIR"

# Page-cache mode (markers_fsync.py): a transaction's marker asks no fdatasync of the data partition.
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start "${ON[@]}" --override gregor.acks.all.fsync=false || { fail "start"; summary txn; exit 1; }
BROKER_PID=$BROKER_PID run_py "markers in page-cache mode" "$(dirname "$0")/markers_fsync.py"
broker_stop
rm -rf "$BROKER_DIR"

# Kafka's defaults 3 and 2 need a cluster: unset they are 1 on one node, set above 1 they stop the broker.
tmp=$(mktemp -d /tmp/gregor-test.XXXXXX)
for kv in transaction.state.log.replication.factor=3 transaction.state.log.min.isr=2; do
    out=$(timeout 10 "$GREGOR_BIN" --override listeners=PLAINTEXT://127.0.0.1:0 --override "$kv" \
        --override "log.dirs=$tmp/d" 2>&1)
    check_eq "$kv stops a single-node broker (exit 2)" "2" "$?"
    case "$out" in *"${kv%=*} must be 1 on a single-node broker"*) pass "naming ${kv%=*}" ;;
        *) fail "naming ${kv%=*}" "$out" ;; esac
done
rm -rf "$tmp"
summary txn
