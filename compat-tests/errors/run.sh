#!/usr/bin/env bash
# errors/run.sh: raw-socket error paths (errors/run.py) against a fresh broker started with
# socket.request.max.bytes=1048576 and log.retention.check.interval.ms=500; the broker process must still be
# running at the end. Then the idempotent
# producer's broker rules (errors/idempotence.py), before and after a SIGTERM restart.
# Prints "errors: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap broker_cleanup EXIT
broker_start --override socket.request.max.bytes=1048576 --override log.retention.check.interval.ms=500 ||
    { fail "broker starts"; summary errors; exit 1; }
run_py "errors/run.py" "$here/run.py"
# The idempotent producer's broker rules, then the same producer after a SIGTERM restart.
idem_state=$(mktemp)
run_py "errors/idempotence.py" "$here/idempotence.py" before "$idem_state"
broker_restart || fail "broker restarts after SIGTERM"
# The rate-limited per-frame warning (log_flood in run.py) reported how many it suppressed (by SIGTERM at the latest).
check "the broker log counts the suppressed frame warnings" \
    grep -Eq 'msg="similar messages suppressed" site=server/net\.c:[0-9]+ suppressed=[1-9][0-9]* ' "$BROKER_DIR/broker.log"
run_py "errors/idempotence.py after restart" "$here/idempotence.py" after "$idem_state"
broker_restart --override producer.id.expiration.ms=3000 --override producer.id.expiration.check.interval.ms=200 ||
    fail "broker restarts with producer.id.expiration.ms=3000"
run_py "errors/idempotence.py expire" "$here/idempotence.py" expire "$idem_state"
rm -f "$idem_state"
check "broker process still running after every error case" kill -0 "$BROKER_PID"
check "broker logged no assertion or crash" bash -c "! grep -Eiq 'assert|abort|sanitizer' '$BROKER_DIR/broker.log'"
summary errors
