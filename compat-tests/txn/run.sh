#!/usr/bin/env bash
# txn/run.sh: the transaction coordinator's server binding on one node (issue #21, server/txns.c), always on
# (the removed gregor.transaction.coordinator.test.enable, given false, is ignored with one line saying so):
# transactions work end to end (transactions.py on), and the first one creates __transaction_state with Kafka's
# settings and configs and names this broker, the coordinator loads every partition on the I/O pool at a
# coordinator epoch saved in the log directory and raised at every start; transaction.state.log.replication.factor
# or transaction.state.log.min.isr set above 1 stops a single-node broker. The group side (offsets.py):
# TxnOffsetCommit, its per-partition errors, OffsetFetch require_stable answering
# UNSTABLE_OFFSET_COMMIT while a transactional commit is pending, also after a restart. KIP-890 part 1's
# verification of Produce and TxnOffsetCommit, transaction.partition.verification.enable (off, and on again
# dynamically), a non-transactional batch during an open transaction, producer.id.expiration.ms keeping a
# producer with an open transaction, compaction of committed and aborted transactions (verify.py). Transaction
# version 2 by raw requests, and KIP-890's hanging transaction (txv2.py). The admin APIs (admin.py):
# WriteTxnMarkers as a partition leader, DescribeTransactions, ListTransactions, kafka-transactions.sh. The failure runs
# (GREGOR_FAILPOINT): failpoints.py and a short eos.py, each with its own broker. Read next:
# coordinator.py, offsets.py, verify.py, admin.py, failpoints.py, eos.py.
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

broker_start --override gregor.transaction.coordinator.test.enable=false || { fail "start"; summary txn; exit 1; }
check "the removed gregor.transaction.coordinator.test.enable is ignored, saying so" \
    wait_log "gregor.transaction.coordinator.test.enable was removed and is ignored: transactions are always on"
txn_step on
txn_step on offsets.py
check "every partition loaded at coordinator epoch 1" \
    wait_log "50 partitions of __transaction_state loaded at coordinator epoch 1"
check_eq "the epoch file holds 1" "00000001" "$(od -An -tx1 "$BROKER_DIR/data/transaction-coordinator-epoch" | tr -d ' \n')"
broker_restart
txn_step present
txn_step pending offsets.py
check "the restart loaded every partition at coordinator epoch 2" \
    wait_log "50 partitions of __transaction_state loaded at coordinator epoch 2"
check_eq "the epoch file holds 2" "00000002" "$(od -An -tx1 "$BROKER_DIR/data/transaction-coordinator-epoch" | tr -d ' \n')"
broker_stop
check_eq "no ERROR or WARN logged" "" "$(grep -E ' level=(error|warn) ' "$BROKER_DIR/broker.log")"
rm -rf "$BROKER_DIR"

# Transactions end to end (transactions.py on): a fresh broker.
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start || { fail "start"; summary txn; exit 1; }
run_py "transactions on" "$(dirname "$0")/transactions.py" on
if command -v kcat >/dev/null; then # kcat's transactional producer: init, begin, produce, commit
    out=$(printf 'k1\nk2\n' | timeout 30 kcat -b "$BROKER" -X transactional.id=kc-1 -P -t kcat-txn -p 0 2>&1)
    case "$out" in *"Transaction successfully committed"*) pass "kcat -X transactional.id commits" ;;
        *) fail "kcat -X transactional.id commits" "$out" ;; esac
    check_eq "kcat read_committed reads both records" "k1 k2" "$(timeout 20 kcat -b "$BROKER" -C -t kcat-txn -p 0 \
        -o beginning -e -q -X isolation.level=read_committed 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
fi
broker_stop
check_eq "no ERROR logged" "" "$(grep -E ' level=error ' "$BROKER_DIR/broker.log")"
rm -rf "$BROKER_DIR"

# KIP-890 part 1's verification and the refusal rules (verify.py): each step on a fresh broker.
for step_args in "verify --override log.cleaner.backoff.ms=100" \
    "noverify --override transaction.partition.verification.enable=false" \
    "expire --override producer.id.expiration.ms=1500 --override producer.id.expiration.check.interval.ms=100"; do
    read -r step args <<<"$step_args"
    BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
    # one __transaction_state partition: a quicker first FindCoordinator on a loaded machine
    # shellcheck disable=SC2086 # the overrides are words
    broker_start --override transaction.state.log.num.partitions=1 $args ||
        { fail "start ($step)"; summary txn; exit 1; }
    run_py "verify.py $step" "$(dirname "$0")/verify.py" "$step"
    [ "$step" = verify ] && run_py "verify.py compact" "$(dirname "$0")/verify.py" compact
    broker_stop
    check_eq "no ERROR logged ($step)" "" "$(grep -E ' level=error ' "$BROKER_DIR/broker.log")"
    rm -rf "$BROKER_DIR"
done

# Transaction version 2 (txv2.py, raw requests): EndTxn v5's epoch bump, Produce v12 and TxnOffsetCommit v5
# adding their partitions, the zombie fenced; with verification at its default and off (the adds do not
# depend on it). Each on a fresh broker.
for args in "" "--override transaction.partition.verification.enable=false"; do
    BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
    # shellcheck disable=SC2086 # the overrides are words
    broker_start --override transaction.state.log.num.partitions=1 $args || { fail "start (txv2)"; summary txn; exit 1; }
    run_py "txv2.py v2 ${args:-(verification on)}" "$(dirname "$0")/txv2.py" v2
    broker_stop
    check_eq "no ERROR logged (txv2 ${args:-verification on})" "" "$(grep -E ' level=error ' "$BROKER_DIR/broker.log")"
    rm -rf "$BROKER_DIR"
done

# KIP-890's hanging transaction (txv2.py hang): a Produce arriving after its transaction's abort (EndTxn v5,
# the coordinator's timeout, EndTxn v4 with verification) is refused and leaves the LSO at the HW.
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start --override transaction.state.log.num.partitions=1 \
    --override transaction.abort.timed.out.transaction.cleanup.interval.ms=200 || {
    fail "start (txv2 hang)"
    summary txn
    exit 1
}
run_py "txv2.py hang" "$(dirname "$0")/txv2.py" hang
broker_stop
check_eq "no ERROR logged (txv2 hang)" "" "$(grep -E ' level=error ' "$BROKER_DIR/broker.log")"
rm -rf "$BROKER_DIR"

# Kafka's Java client 4.4 and franz-go (when Go is there) at level 2 (gregor.transaction.version=2), then
# confluent-kafka, sarama and kafkajs (when installed), which stay on version 1, on the same broker: the client
# scenario's step 7 (commit, abort, consume-transform-produce) through transaction version 2, asserted from the
# broker's request counts: EndTxn v5 and TxnOffsetCommit v5 only, no AddPartitionsToTxn or AddOffsetsToTxn (the
# broker adds them), and no CONCURRENT_TRANSACTIONS reaching a Produce (the broker asks again for 100 ms while the
# previous transaction completes; franz-go starts its next transaction at once and took 15 s instead of 5 without).
# Skipped without Maven and Java (compat-tests/clients/java builds on first use). About 90 s in all (each client
# runs the whole quick scenario); env TXN_V1_CLIENTS lists the version 1 clients to run (empty: none; default
# confluent-kafka: sarama and kafkajs run step 7 in the client matrix, at the default level 2, to keep make test
# within 45 minutes; TXN_V1_CLIENTS="confluent-kafka sarama kafkajs" runs all three here).
if command -v mvn >/dev/null && command -v java >/dev/null; then
    BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
    broker_start --override gregor.transaction.version=2 --override auto.create.topics.enable=false \
        --override group.initial.rebalance.delay.ms=0 || { fail "start (java at level 2)"; summary txn; exit 1; }
    jout=$(TXN=1 KAFKA_CLIENTS_VERSION=4.4.0 CLIENT_NAME=java-latest timeout 300 \
        bash "$(dirname "$0")/../clients/java/run.sh" "$BROKER" quick "$BROKER_DIR/java.json" 2>&1)
    case "$jout" in *"step 7 transactions: ok"*) pass "Java 4.4 client at transaction.version 2: step 7 ok" ;;
        *) fail "Java 4.4 client at transaction.version 2: step 7 ok" "$(grep -m3 'step 7\|not installed\|FAIL' <<<"$jout")" ;; esac
    if command -v go >/dev/null; then
        gout=$(TXN=1 timeout 300 bash "$(dirname "$0")/../clients/franz-go/run.sh" "$BROKER" quick "$BROKER_DIR/franz.json" 2>&1)
        case "$gout" in *"ok   7 transactions"*) pass "franz-go at transaction.version 2: step 7 ok" ;;
            *) fail "franz-go at transaction.version 2: step 7 ok" "$(grep -m3 ' 7 \|not installed\|FAIL' <<<"$gout")" ;; esac
    fi
    check_eq "no Produce answered CONCURRENT_TRANSACTIONS" "" \
        "$(curl -s "http://$ADMIN/metrics" | grep 'errors_total{request="Produce",error="CONCURRENT_TRANSACTIONS"}')"
    m=$(curl -s "http://$ADMIN/metrics" | grep '^kafka_network_requestmetrics_requests_total{request="\(EndTxn\|TxnOffsetCommit\|AddPartitionsToTxn\|AddOffsetsToTxn\)"')
    check "the Java client used EndTxn v5" grep -q 'request="EndTxn",version="5"' <<<"$m"
    check "the Java client used TxnOffsetCommit v5" grep -q 'request="TxnOffsetCommit",version="5"' <<<"$m"
    check_eq "no EndTxn below v5, no AddPartitionsToTxn or AddOffsetsToTxn (the broker added the partitions)" \
        "" "$(grep -v 'request="EndTxn",version="5"\|request="TxnOffsetCommit",version="5"' <<<"$m")"
    # clients that stay on transaction version 1 (librdkafka, sarama, kafkajs) on the same broker at level 2
    for cl in ${TXN_V1_CLIENTS-confluent-kafka}; do
        cout=$(TXN=1 timeout 300 bash "$(dirname "$0")/../clients/$cl/run.sh" "$BROKER" quick "$BROKER_DIR/$cl.json" 2>&1)
        case "$cout" in *"7 transactions: ok"* | *"ok   7 transactions"*) pass "$cl (transaction version 1) at transaction.version 2: step 7 ok" ;;
            *"not installed"*) echo "  skip $cl at transaction.version 2: not installed" ;;
            *) fail "$cl (transaction version 1) at transaction.version 2: step 7 ok" "$(grep -m3 '7 trans\|FAIL' <<<"$cout")" ;; esac
    done
    check "version 1's EndTxn (below v5) served beside version 2's" \
        grep -q 'requests_total{request="EndTxn",version="[0-4]"}' <<<"$(curl -s "http://$ADMIN/metrics")"
    broker_stop
    check_eq "no ERROR or WARN logged (java at level 2)" "" "$(grep -E ' level=(error|warn) ' "$BROKER_DIR/broker.log")"
    rm -rf "$BROKER_DIR"
else
    echo "  skip Kafka's Java client at transaction.version 2: needs mvn and java"
fi

# The admin APIs (admin.py, raw requests): WriteTxnMarkers as a partition leader, DescribeTransactions,
# ListTransactions, DescribeProducers; then Kafka's kafka-transactions.sh when compat-tests/.cache/kafka-4.4.0
# holds it (compat-tests/kafka-dist/get-kafka.sh): list, describe, describe-producers, find-hanging (an open
# transaction the coordinator knows is not hanging; once __transaction_state is lost (its topic file removed
# while the broker is down: the coordinator was told nothing of the transaction) it is), abort by start offset.
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start || { fail "start"; summary txn; exit 1; }
run_py "admin markers" "$(dirname "$0")/admin.py" markers
run_py "admin describe" "$(dirname "$0")/admin.py" describe
KTX=$REPO/compat-tests/.cache/kafka-4.4.0/bin/kafka-transactions.sh
if [ -x "$KTX" ] && command -v java >/dev/null; then
    ktx() { timeout 60 "$KTX" --bootstrap-server "$BROKER" "$@" 2>&1; }
    # the tools print tab-separated tables padded with spaces, a header first
    out=$(ktx list)
    check "kafka-transactions.sh list: tx-hang Ongoing, tx-empty Empty, coordinator 1" \
        bash -c 'tail -n +2 <<<"$1" | tr -d " " | awk -F"\t" "\$1 == \"tx-hang\" && \$2 == 1 && \$4 == \"Ongoing\" { a = 1 }
            \$1 == \"tx-empty\" && \$4 == \"Empty\" { b = 1 } END { exit !(a && b) }"' _ "$out"
    out=$(ktx describe --transactional-id tx-hang)
    check "kafka-transactions.sh describe: tx-hang Ongoing, timeout 60000, over wth-0" \
        bash -c 'tail -1 <<<"$1" | tr -d " " | awk -F"\t" "\$2 == \"tx-hang\" && \$5 == \"Ongoing\" && \$6 == 60000 && \$9 == \"wth-0\" { ok = 1 } END { exit !ok }"' _ "$out"
    out=$(ktx describe-producers --topic wth --partition 0)
    check "kafka-transactions.sh describe-producers: one producer, its open transaction at offset 0" \
        bash -c 'tail -n +2 <<<"$1" | tr -d " " | awk -F"\t" "\$6 == 0 { n++ } END { exit !(n == 1 && NR == 1) }"' _ "$out"
    out=$(ktx find-hanging --topic wth)
    check_eq "kafka-transactions.sh find-hanging: an open transaction its coordinator holds is not hanging" 1 \
        "$(grep -c . <<<"$out")"
    broker_stop
    rm -f "$(grep -l '^name=__transaction_state$' "$BROKER_DIR"/data/__gregor_topics/*.topic)"
    broker_restart || { fail "restart"; summary txn; exit 1; }
    out=$(ktx find-hanging --topic wth)
    check "kafka-transactions.sh find-hanging once __transaction_state is lost: wth-0 from offset 0, an hour old" \
        bash -c 'tail -n +2 <<<"$1" | tr -d " " | awk -F"\t" "\$1 == \"wth\" && \$2 == 0 && \$6 == 0 && \$8 >= 59 { n++ } END { exit !(n == 1 && NR == 1) }"' _ "$out"
    out=$(ktx abort --topic wth --partition 0 --start-offset 0)
    check_eq "kafka-transactions.sh abort --topic wth --partition 0 --start-offset 0: no output" "" "$out"
    run_py "admin stable" "$(dirname "$0")/admin.py" stable
else
    echo "  skip kafka-transactions.sh: run compat-tests/kafka-dist/get-kafka.sh to include it"
fi
broker_stop
check_eq "no ERROR logged (admin)" "" "$(grep -E ' level=error ' "$BROKER_DIR/broker.log")"
rm -rf "$BROKER_DIR"

# GREGOR_FAILPOINT: the broker killed at each transaction failpoint under a confluent-kafka transaction and
# restarted on its data directory (failpoints.py, its own broker on its own port; about 25 s).
run_py "failpoints" "$(dirname "$0")/failpoints.py"
# The read-process-write pipeline under kill -9 of itself and of the broker and the failpoints (eos.py, its own
# broker): seed 1, 600 records, 15 s of faults (about 30 s); `make test-txn-faults` runs five seeds at length.
run_py "eos" "$(dirname "$0")/eos.py" --seed "${EOS_SEED:-1}"

# The coordinator's settings (admin.py settings): transaction.max.timeout.ms, transactional.id.expiration.ms and
# transaction.remove.expired.transaction.cleanup.interval.ms lowered.
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start --override transaction.state.log.num.partitions=1 --override transaction.max.timeout.ms=60000 \
    --override transactional.id.expiration.ms=1500 \
    --override transaction.remove.expired.transaction.cleanup.interval.ms=200 || { fail "start"; summary txn; exit 1; }
run_py "admin settings" "$(dirname "$0")/admin.py" settings
broker_stop
rm -rf "$BROKER_DIR"

# Page-cache mode (markers_fsync.py): a transaction's marker asks no fdatasync of the data partition.
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start --override gregor.acks.all.fsync=false || { fail "start"; summary txn; exit 1; }
BROKER_PID=$BROKER_PID run_py "markers in page-cache mode" "$(dirname "$0")/markers_fsync.py"
broker_stop
rm -rf "$BROKER_DIR"

# Kafka's defaults 3 and 2 need a cluster: unset they are 1 on one node, set above 1 they stop the broker.
tmp=$(mktemp -d /tmp/gregor-test.XXXXXX)
for kv in transaction.state.log.replication.factor=3 transaction.state.log.min.isr=2; do
    out=$(timeout 10 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override listeners=PLAINTEXT://127.0.0.1:0 --override "$kv" \
        --override "log.dirs=$tmp/d" 2>&1)
    check_eq "$kv stops a single-node broker (exit 2)" "2" "$?"
    case "$out" in *"${kv%=*} must be 1 on a single-node broker"*) pass "naming ${kv%=*}" ;;
        *) fail "naming ${kv%=*}" "$out" ;; esac
done
rm -rf "$tmp"

# A coordinator's topic is made in its coordinator's shape whoever asks (internal_topics.py): CreateTopics, then
# a Metadata auto-creation, each on a fresh broker without __transaction_state.
for step in create auto; do
    BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
    broker_start --override transaction.state.log.num.partitions=7 ||
        { fail "start ($step)"; summary txn; exit 1; }
    txn_step "$step" internal_topics.py
    broker_stop
    rm -rf "$BROKER_DIR"
done
summary txn
