#!/usr/bin/env bash
# txn/faults.sh [SEEDS] [RECORDS] [DURATION] [JAVA_SEEDS] [CLUSTER_SEEDS] [CLUSTER_DURATION]: the exactly-once
# fault runs at length (`make test-txn-faults`, issue #21): failpoints.py at transaction.version 2 and 1 (every
# transaction failpoint under a confluent-kafka transaction; librdkafka stays on version 1 at either level), then
# eos.py (the read-process-write pipeline under kill -9 of itself and of the broker, and the failpoints) for each
# seed of SEEDS (default 1,2,3,4,5) with the confluent-kafka pipeline, then for each seed of JAVA_SEEDS (default
# 1,2,3; "none" for none) with the Java 4.4 client's (--pipeline java, built by compat-tests/streams/build.sh),
# and twice more with the Java pipeline, on the last of JAVA_SEEDS + 1 (level 2) and + 2 (level 1), with
# TXN_PIPELINE_ABORT_EVERY=5 (its abort-and-continue path, which the faults alone never reach). Odd seeds run
# the broker at transaction.version 2 (issue #25: the Java client then ends every transaction with EndTxn v5,
# which eos.py checks from the producer epochs of its output), even ones at 1. RECORDS records (default 3000)
# over DURATION seconds of faults (default 60) each. Then the confluent-kafka pipeline in a 3-broker cluster
# (compat-tests/cluster/txn_faults.py: kill -9 of the coordinator's broker and of data leaders, SIGSTOP, the
# failpoints on the next coordinator; needs root, etcd and nftables) for each seed of CLUSTER_SEEDS (default
# 1,2,3; "none" skips them), 3000 records over CLUSTER_DURATION seconds of faults (default 60). make test's txn
# suite runs failpoints.py and one short eos.py (compat-tests/txn/run.sh).
# Ends with "txn-faults: N passed, N failed". Read next: compat-tests/txn/eos.py, compat-tests/cluster/txn_faults.py.
set -u
. "$(dirname "$0")/../lib/broker.sh"
SEEDS=${1:-1,2,3,4,5}
RECORDS=${2:-3000}
DURATION=${3:-60}
JAVA_SEEDS=${4:-1,2,3}
CLUSTER_SEEDS=${5:-1,2,3}
CLUSTER_DURATION=${6:-60}
export GREGOR_NET_THREAD_AUDIT=${GREGOR_NET_THREAD_AUDIT:-1}
BROKER= BROKER_DIR= # each Python part starts its own broker (txnkit.Broker)
t0=$(date +%s)
level() { if [ $(($1 % 2)) -eq 1 ]; then echo 2; else echo 1; fi; } # odd seeds at transaction.version 2
for tv in 2 1; do
    TXN_VERSION=$tv run_py "failpoints (transaction.version $tv)" "$(dirname "$0")/failpoints.py"
done
for seed in ${SEEDS//,/ }; do
    tv=$(level "$seed")
    TXN_VERSION=$tv run_py "eos seed $seed (transaction.version $tv)" "$(dirname "$0")/eos.py" --seed "$seed" \
        --records "$RECORDS" --duration "$DURATION"
done
last=
if [ "$JAVA_SEEDS" != none ]; then
    for seed in ${JAVA_SEEDS//,/ }; do
        tv=$(level "$seed")
        TXN_VERSION=$tv run_py "eos seed $seed, java pipeline (transaction.version $tv)" "$(dirname "$0")/eos.py" \
            --pipeline java --seed "$seed" --records "$RECORDS" --duration "$DURATION"
        last=$seed
    done
    for tv in 2 1; do
        seed=$((last + 3 - tv))
        TXN_VERSION=$tv TXN_PIPELINE_ABORT_EVERY=5 run_py \
            "eos seed $seed, java pipeline, an abort every 5th transaction (transaction.version $tv)" \
            "$(dirname "$0")/eos.py" --pipeline java --seed "$seed" --records "$RECORDS" --duration "$DURATION"
    done
fi
echo "txn-faults: seeds $SEEDS (confluent-kafka), $JAVA_SEEDS${last:+ and $((last + 1)), $((last + 2)) with aborts} (Java), odd seeds at transaction.version 2, even ones at 1, $RECORDS records, $DURATION s of faults each: $(($(date +%s) - t0)) s"
t1=$(date +%s)
if [ "$CLUSTER_SEEDS" != none ]; then
    for seed in ${CLUSTER_SEEDS//,/ }; do
        run_py "cluster seed $seed" "$(dirname "$0")/../cluster/txn_faults.py" --seed "$seed" --records 3000 \
            --duration "$CLUSTER_DURATION"
    done
    echo "txn-faults: cluster seeds $CLUSTER_SEEDS, 3000 records, $CLUSTER_DURATION s of faults each: $(($(date +%s) - t1)) s"
fi
summary txn-faults
