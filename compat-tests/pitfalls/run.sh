#!/usr/bin/env bash
# pitfalls/run.sh: the broker pitfall cases of issue #11 (pitfalls/CASES.md, tests in pitfalls/run.py)
# against a fresh broker started with num.partitions=3 (case C17) and group.initial.rebalance.delay.ms=0
# (group cases: the first join of an empty group completes at once) and log.cleaner.backoff.ms=500 (C25's
# compacted topic is cleaned within the case). Cases whose feature is not built are
# counted as expected-fail, never as passed. PITFALLS_ONLY=C05,C07 runs a subset.
# Prints "pitfalls: N passed, N failed, N expected-fail" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap broker_cleanup EXIT
broker_start --override num.partitions=3 --override group.initial.rebalance.delay.ms=0 \
    --override log.cleaner.backoff.ms=500 || { fail "broker starts"; summary pitfalls; exit 1; }
run_py "pitfalls/run.py" "$here/run.py"
check "broker process still running after every case" kill -0 "$BROKER_PID"
summary pitfalls
