#!/usr/bin/env bash
# errors/run.sh: raw-socket error paths (errors/run.py) against a fresh broker started with
# socket.request.max.bytes=1048576; the broker process must still be running at the end.
# Prints "errors: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap broker_cleanup EXIT
broker_start --override socket.request.max.bytes=1048576 || { fail "broker starts"; summary errors; exit 1; }
run_py "errors/run.py" "$here/run.py"
check "broker process still running after every error case" kill -0 "$BROKER_PID"
check "broker logged no assertion or crash" bash -c "! grep -Eiq 'assert|abort|sanitizer' '$BROKER_DIR/broker.log'"
summary errors
