#!/usr/bin/env bash
# io/run.sh: the network thread never waits for the disk, and parked requests are woken per partition.
#   1. cold reads (io/run.py cold): a broker whose segment reads of >= 64 KiB are slowed to model a slow
#      disk (io/slowread.c through LD_PRELOAD); a segment evicted from the page cache is fetched: the fetch
#      is answered only after the I/O pool read it in, other connections are answered meanwhile, the bytes
#      are right, and a second fetch of the same range is answered at once.
#   2. many parked fetches (io/run.py parked): 1,000 long-poll fetches parked on 10 idle partitions while
#      another partition takes 300 acks=-1 produces; an append to one idle partition answers exactly the
#      fetches parked on it; the broker's count of re-checks (logged at shutdown) stays near the number of
#      wakes, far below parked x appends.
#   3. the fd cap (io/run.py capped_setup, capped_check): 24 partitions with sealed segments, restarted with
#      gregor.open.files.max=8, one sealed segment's .index deleted, segment-file opens slowed once the
#      broker runs, and GREGOR_NET_THREAD_AUDIT writing to a file: Fetch, ListOffsets (timestamp, -3, -2,
#      -1), OffsetForLeaderEpoch, Produce to idle partitions and retention are right, a request needing a
#      slow reopen does not hold up another connection, and the audit file stays empty.
# Prints "io: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap 'broker_cleanup; rm -rf "$SHIM_DIR"' EXIT
SHIM_DIR=$(mktemp -d /tmp/gregor-io-shim.XXXXXX)
if ! cc -shared -fPIC -O2 -o "$SHIM_DIR/slowread.so" "$here/slowread.c" -ldl; then
    fail "build the slow-read shim"; summary io; exit 1
fi

export GREGOR_TEST_SLOW_PREAD_MS=1500 LD_PRELOAD="$SHIM_DIR/slowread.so"
broker_start || { fail "broker starts (slow reads)"; summary io; exit 1; }
unset GREGOR_TEST_SLOW_PREAD_MS LD_PRELOAD
run_py "io/run.py cold" "$here/run.py" cold
check "broker process still running after the cold reads" kill -0 "$BROKER_PID"
broker_cleanup
BROKER_DIR=

broker_start --override num.partitions=1 || { fail "broker starts"; summary io; exit 1; }
run_py "io/run.py parked" "$here/run.py" parked
broker_stop TERM
rechecks=$(sed -n 's/.*stopped cleanly (\([0-9]*\) parked-request re-checks.*/\1/p' "$BROKER_DIR/broker.log" | tail -1)
# 300 produces each wake their own waiter once, 1 append wakes 100 fetches (+ flush wakes): a few
# thousand at most. Re-checking every parked request per append would be >= 300 x 1,000.
check "re-checks after 300 appends with 1,000 fetches parked elsewhere: 100 <= ${rechecks:-none} < 5000" \
    test -n "$rechecks" -a "${rechecks:-0}" -ge 100 -a "${rechecks:-999999}" -lt 5000
broker_cleanup
BROKER_DIR=

broker_start || { fail "broker starts (capped setup)"; summary io; exit 1; }
run_py "io/run.py capped_setup" "$here/run.py" capped_setup
broker_stop TERM
rm -f "$BROKER_DIR/data/many-0/00000000000000000000.index"
export AUDIT_FILE="$SHIM_DIR/audit" SLOW_OPEN_FLAG="$SHIM_DIR/slow-open"
saved_audit=${GREGOR_NET_THREAD_AUDIT-}
export GREGOR_NET_THREAD_AUDIT=$AUDIT_FILE GREGOR_TEST_SLOW_OPEN_MS=400 GREGOR_TEST_SLOW_OPEN_FLAG=$SLOW_OPEN_FLAG \
    LD_PRELOAD="$SHIM_DIR/slowread.so"
broker_restart --override gregor.open.files.max=8 --override log.retention.check.interval.ms=1000 ||
    { fail "broker restarts (capped)"; summary io; exit 1; }
unset GREGOR_TEST_SLOW_OPEN_MS GREGOR_TEST_SLOW_OPEN_FLAG LD_PRELOAD
if [ -n "$saved_audit" ]; then export GREGOR_NET_THREAD_AUDIT=$saved_audit; else unset GREGOR_NET_THREAD_AUDIT; fi
run_py "io/run.py capped_check" "$here/run.py" capped_check
sleep 1.5 # the housekeeping timer closes files pinned by the last requests
check "the broker's open segment files are within gregor.open.files.max=8 (/proc/PID/fd)" \
    test "$(ls -l /proc/$BROKER_PID/fd 2>/dev/null | grep -c '/data/.*\.log$')" -le 8
check "the deleted .index of many-0's first segment was rebuilt (on the I/O pool: no audit line above)" \
    grep -q "many-0: rebuilt indexes of segment 0 " "$BROKER_DIR/broker.log"
test -s "$BROKER_DIR/data/many-0/00000000000000000000.index" && pass "the rebuilt .index was written back" ||
    fail "the rebuilt .index was written back"
broker_stop TERM
grep -q "stopped cleanly" "$BROKER_DIR/broker.log" || fail "broker stops cleanly after the capped run"
summary io
