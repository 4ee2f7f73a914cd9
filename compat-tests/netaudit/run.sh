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
# Then the broker log must hold no audit line, and a restart finds every acknowledged offset.
# A second broker with gregor.open.files.max=4 (below __consumer_offsets' 50 partitions): 8 reads of a
# 20-partition topic (each Fetch needs several pool rounds per partition), then kcat produces to 6 topics
# and a kcat group consumes them, before and after a restart: no audit line either (the coordinator's
# active files stay open outside the cap; other partitions' files are reopened on the pool), and the
# segment files open besides __consumer_offsets' stay within the cap.
# Prints "netaudit: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap 'broker_cleanup' EXIT

export GREGOR_NET_THREAD_AUDIT=${GREGOR_NET_THREAD_AUDIT:-1} # compat-tests/run.sh sets a file
broker_start --override log.segment.bytes=4096 --override num.partitions=2 \
    --override log.retention.check.interval.ms=1000 || { fail "broker starts"; summary netaudit; exit 1; }
check "the audit is on" grep -q "network thread audit on" "$BROKER_DIR/broker.log"
run_py "netaudit/run.py" "$here/run.py" work
audit_none() { # NAME: no audit line in this broker's log
    local n
    n=$(grep -c "net-thread disk call" "$BROKER_DIR/broker.log")
    check_eq "$1" 0 "$n"
    [ "$n" -gt 0 ] && grep "net-thread disk call" "$BROKER_DIR/broker.log" | sed -E 's/^ts=[^ ]* level=[^ ]* component=[^ ]* //' | sort | uniq -c | sort -rn | head -10
}
audit_none "network-thread disk calls logged by the audit during create/produce/roll/DeleteRecords/InitProducerId"
broker_restart
run_py "netaudit/run.py after restart" "$here/run.py" after
broker_cleanup

# ---- an open-file cap below __consumer_offsets' partition count ----
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
CAP_ARGS=(--override gregor.open.files.max=4 --override group.initial.rebalance.delay.ms=0 --override num.partitions=20)
broker_start "${CAP_ARGS[@]}" || { fail "broker with gregor.open.files.max=4 starts"; summary netaudit; exit 1; }
# One Fetch over 20 partitions whose files the cap closed: each needs an open, then its index, then pages,
# in rounds on the pool; the work of earlier rounds must stay pinned for the request (it used to be undone
# by the cap between rounds until the round limit fell back to opening files on the network thread).
kcat -b "$BROKER" -P -t cap-wide -X acks=all 2>/dev/null < <(seq 1 40000)
ok_reads=0
for i in 1 2 3 4 5 6 7 8; do
    sleep 0.7 # the once-a-second cap pass closes the idle files again
    [ "$(kcat -b "$BROKER" -C -t cap-wide -o beginning -e -q 2>/dev/null | wc -l)" = 40000 ] && ok_reads=$((ok_reads + 1))
done
check_eq "cap 4: 8 reads of a 20-partition topic, each whole" 8 "$ok_reads"
for t in a b c d e f; do seq 1 100 | kcat -b "$BROKER" -P -t "cap-$t" -p 0 2>/dev/null; done
group_read() { timeout 30 kcat -b "$BROKER" -G "$1" cap-a cap-b cap-c cap-d cap-e cap-f -e -q "${@:2}" 2>/dev/null | wc -l; }
check_eq "cap 4: a new group reads 6 topics (first group use creates __consumer_offsets)" 600 "$(group_read capg -o beginning)"
broker_restart "${CAP_ARGS[@]}"
for t in a b c; do seq 101 200 | kcat -b "$BROKER" -P -t "cap-$t" -p 0 2>/dev/null; done
check_eq "cap 4, after a restart: the group resumes from its commits" 300 "$(group_read capg)"
check_eq "cap 4, after a restart: another group reads everything" 900 "$(group_read capg2 -o beginning)"
sleep 1.5 # one cap pass
open_logs=$(ls -l "/proc/$BROKER_PID/fd" 2>/dev/null | grep '/data/.*\.log$' | grep -vc '__consumer_offsets')
check "cap 4: at most 4 segment files open besides __consumer_offsets' active ones (got $open_logs)" test "$open_logs" -le 4
audit_none "cap 4: network-thread disk calls logged by the audit (fetch rounds, groups, produce, restart)"
unset GREGOR_NET_THREAD_AUDIT
summary netaudit
