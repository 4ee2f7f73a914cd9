#!/usr/bin/env bash
# compaction/run.sh: log compaction (cleanup.policy=compact and compact,delete) seen by stock clients,
# against a fresh broker whose cleaner looks for work every 100 ms (log.cleaner.backoff.ms=100):
#   - kcat produces a keyed stream with tombstones (-Z turns an empty value into null) into a compacted
#     topic with small segments; a re-read after the cleaner ran shows exactly the latest value per key,
#     deleted keys gone once delete.retention.ms (0 here) passed, offsets still increasing;
#   - a record without a key is refused (INVALID_RECORD, Kafka's message) on a compacted topic;
#   - changing cleanup.policy from delete to compact through IncrementalAlterConfigs takes effect;
#   - the cleaned segments are still RecordBatch v2 with valid CRCs (compat-tests/lib/segments.py), and
#     Apache Kafka 4.4.0's kafka-dump-log reads one when its jars are there (compat-tests/kafka-dist);
#   - a compacted topic and a 1 s retention topic that nobody reads are still cleaned and trimmed (the
#     high watermark, their bound, follows fsync without a reader);
#   - everything read again after a SIGTERM restart.
# Prints "compaction: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap broker_cleanup EXIT
ARGS=(--override log.cleaner.backoff.ms=100 --override log.retention.check.interval.ms=500)
broker_start "${ARGS[@]}" || { fail "broker starts"; summary compaction; exit 1; }
run_py "compaction/run.py" "$here/run.py"
broker_restart "${ARGS[@]}" || fail "broker restarts"
PHASE=after-restart run_py "compaction/run.py (after restart)" "$here/run.py"
check "broker process still running" kill -0 "$BROKER_PID"
summary compaction
