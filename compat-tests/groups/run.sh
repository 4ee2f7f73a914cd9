#!/usr/bin/env bash
# groups/run.sh: consumer groups end to end (issue #6) with kcat (librdkafka 2.0.2), confluent-kafka and
# kafka-python against a fresh Gregor broker started with group.initial.rebalance.delay.ms=0: assignment
# across members (range, cooperative-sticky), a killed member's partitions moving within the session
# timeout, static membership, two groups on one topic, the admin APIs, and committed offsets surviving a
# SIGKILL of the broker (see groups/run.py for every check).
# Prints "groups: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap broker_cleanup EXIT
broker_start --override group.initial.rebalance.delay.ms=0 || { fail "broker starts"; summary groups; exit 1; }
run_py "groups/run.py phase1" "$here/run.py" phase1
check "broker process still running after phase 1" kill -0 "$BROKER_PID"
# a crash, not a clean stop: commits acknowledged before the crash must be on disk
broker_stop KILL
_broker_launch || { fail "broker restarts on the same data"; summary groups; exit 1; }
run_py "groups/run.py phase2" "$here/run.py" phase2
check "broker process still running after phase 2" kill -0 "$BROKER_PID"
summary groups
