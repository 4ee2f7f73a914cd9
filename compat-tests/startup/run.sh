#!/usr/bin/env bash
# startup/run.sh: how the broker starts and refuses to start. A second broker on a log directory in use is
# refused (Kafka's .lock), bad values stop it with a message naming the key, a bad listener stops it before
# the data directory is touched, and --healthcheck / --version answer.
set -u
. "$(dirname "$0")/../lib/broker.sh"
trap broker_cleanup EXIT

broker_start || { fail "start"; summary startup; exit 1; }
check "healthcheck answers" "$GREGOR_BIN" --healthcheck --override "gregor.listener.file=$BROKER_DIR/listener" \
    --override "listeners=PLAINTEXT://127.0.0.1:0"
out=$("$GREGOR_BIN" --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$BROKER_DIR/data" 2>&1)
rc=$?
check_eq "a second broker on the same log.dirs exits 1" "1" "$rc"
case "$out" in *"is in use by another process"*) pass "and says the directory is in use" ;; *) fail "and says the directory is in use" "$out" ;; esac
check "the first broker still serves" kcat -L -b "$BROKER" -m 5
broker_stop

tmp=$(mktemp -d /tmp/gregor-test.XXXXXX)
out=$("$GREGOR_BIN" --override gregor.log.level=TRACE --override "log.dirs=$tmp/d" 2>&1)
check_eq "gregor.log.level=TRACE stops the broker (exit 2)" "2" "$?"
case "$out" in *"gregor.log.level must be"*) pass "naming the key" ;; *) fail "naming the key" "$out" ;; esac
out=$("$GREGOR_BIN" --override listeners=foo --override "log.dirs=$tmp/d" 2>&1)
check_eq "a bad listeners value stops the broker (exit 1)" "1" "$?"
check_eq "before the log directory is created" "no" "$([ -e "$tmp/d" ] && echo yes || echo no)"
check_eq "--version" "gregor" "$("$GREGOR_BIN" --version | cut -d' ' -f1)"
rm -rf "$tmp"
summary startup
