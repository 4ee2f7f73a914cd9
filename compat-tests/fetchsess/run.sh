#!/usr/bin/env bash
# fetchsess/run.sh: KIP-227 fetch sessions (fetchsess/run.py, raw requests): the protocol's rules and errors
# against a broker with the default cache, then Kafka's eviction rules against one with 2 slots and
# min.incremental.fetch.session.eviction.ms=3000. Prints "fetchsess: N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap broker_cleanup EXIT
broker_start || { fail "broker starts"; summary fetchsess; exit 1; }
export ADMIN
run_py "fetchsess/run.py main" "$here/run.py" main
broker_restart --override max.incremental.fetch.session.cache.slots=2 \
    --override min.incremental.fetch.session.eviction.ms=3000 || fail "broker restarts with 2 slots"
export ADMIN
run_py "fetchsess/run.py evict" "$here/run.py" evict
check "broker process still running" kill -0 "$BROKER_PID"
check "broker logged no assertion or crash" bash -c "! grep -Eiq 'assert|abort|sanitizer' '$BROKER_DIR/broker.log'"
summary fetchsess
