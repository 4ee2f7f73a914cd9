#!/usr/bin/env bash
# netaudit/run.sh: the write path never waits for the disk on the network thread (issue #4). The broker runs
# with GREGOR_NET_THREAD_AUDIT=1 (one "net-thread disk call" WARN per call that may wait for the disk made on
# the network thread after start) and log.segment.bytes=4096; netaudit/run.py then
#   - produces 2 x 150 batches of ~1 KB with acks=-1 (about 40 rolls per partition, each from a spare file),
#   - DeleteRecords twice (half-way, then the high watermark): answered after the checkpoint is durable,
#   - retention (run every second) of a topic whose records are long expired: every segment deleted, the
#     active one after its roll,
#   - DeleteRecords while log-start-offset-checkpoint.tmp is a directory (the write fails): KAFKA_STORAGE_ERROR
#     and the log start offset unchanged; answered normally again once it is gone,
#   - 2,100 InitProducerIds (three producer id blocks, each saved on the I/O pool): ids unique, increasing,
#   - InitProducerIds while producer-id-block.tmp is a directory (the block save fails): Kafka's
#     COORDINATOR_LOAD_IN_PROGRESS once the block in use is spent, ids again (higher) once it is gone.
# Then the broker log must hold no audit line from the topic's creation on, and a restart finds every
# acknowledged offset.
# Prints "netaudit: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap 'broker_cleanup' EXIT

export GREGOR_NET_THREAD_AUDIT=1
broker_start --override log.segment.bytes=4096 --override num.partitions=2 \
    --override log.retention.check.interval.ms=1000 || { fail "broker starts"; summary netaudit; exit 1; }
check "the audit is on" grep -q "network thread audit on" "$BROKER_DIR/broker.log"
run_py "netaudit/run.py" "$here/run.py" work
# Counted from the moment the topic exists (its creation makes files: not a write-path call).
mark=$(cat "$BROKER_DIR/netaudit.mark" 2>/dev/null || echo 0)
tail -c +$((mark + 1)) "$BROKER_DIR/broker.log" >"$BROKER_DIR/audited.log"
audit=$(grep -c "net-thread disk call" "$BROKER_DIR/audited.log")
check_eq "network-thread disk calls logged by the audit during produce/roll/DeleteRecords/InitProducerId" 0 "$audit"
[ "$audit" -gt 0 ] && grep "net-thread disk call" "$BROKER_DIR/audited.log" | cut -d' ' -f3- | sort | uniq -c | sort -rn | head -10
broker_restart
run_py "netaudit/run.py after restart" "$here/run.py" after
unset GREGOR_NET_THREAD_AUDIT
summary netaudit
