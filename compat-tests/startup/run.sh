#!/usr/bin/env bash
# startup/run.sh: how the broker starts and refuses to start. A second broker on a log directory in use is
# refused (Kafka's .lock), bad values stop it with a message naming the key, a bad listener stops it before
# the data directory is touched, and --healthcheck / --version answer. A new broker does not create
# __consumer_offsets at start (Kafka creates it on first group use, and so start-up stays in milliseconds).
set -u
. "$(dirname "$0")/../lib/broker.sh"
trap broker_cleanup EXIT

broker_start || { fail "start"; summary startup; exit 1; }
check "healthcheck answers" "$GREGOR_BIN" --healthcheck --override "gregor.listener.file=$BROKER_DIR/listener" \
    --override "listeners=PLAINTEXT://127.0.0.1:0"
out=$(timeout 10 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$BROKER_DIR/data" 2>&1)
rc=$?
check_eq "a second broker on the same log.dirs exits 1" "1" "$rc"
case "$out" in *"is in use by another process"*) pass "and says the directory is in use" ;; *) fail "and says the directory is in use" "$out" ;; esac
check "the first broker still serves" kcat -L -b "$BROKER" -m 5
broker_stop
check_eq "a start with the defaults logs no warning (max.connections unlimited is not one)" "" \
    "$(grep ' level=warn ' "$BROKER_DIR/broker.log")"

tmp=$(mktemp -d /tmp/gregor-test.XXXXXX)
out=$("$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override gregor.log.level=TRACE --override "log.dirs=$tmp/d" 2>&1)
check_eq "gregor.log.level=TRACE stops the broker (exit 2)" "2" "$?"
case "$out" in *"gregor.log.level must be"*) pass "naming the key" ;; *) fail "naming the key" "$out" ;; esac
out=$("$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override listeners=foo --override "log.dirs=$tmp/d" 2>&1)
check_eq "a bad listeners value stops the broker (exit 1)" "1" "$?"
check_eq "before the log directory is created" "no" "$([ -e "$tmp/d" ] && echo yes || echo no)"
check_eq "--version" "gregor" "$("$GREGOR_BIN" --version | cut -d' ' -f1)"
rm -rf "$tmp"

# A log directory holding somebody else's directories is refused, never cleaned up.
tmp=$(mktemp -d /tmp/gregor-test.XXXXXX)
mkdir -p "$tmp/home/Documents" "$tmp/home/projects-2" && echo keep >"$tmp/home/Documents/a.txt" && echo keep >"$tmp/home/projects-2/b.txt"
out=$(timeout 10 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$tmp/home" 2>&1)
check_eq "log.dirs at a directory with other subdirectories and no meta.properties: exit 1" "1" "$?"
case "$out" in *"not a Gregor log directory"*) pass "saying it is not a Gregor log directory" ;; *) fail "saying it is not a Gregor log directory" "$out" ;; esac
check_eq "its subdirectories and files are untouched" "keep keep" "$(cat "$tmp/home/Documents/a.txt" "$tmp/home/projects-2/b.txt" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
check_eq "and nothing was written into it" "no" "$([ -e "$tmp/home/meta.properties" ] && echo yes || echo no)"
BROKER_DIR="$tmp/b" && mkdir -p "$BROKER_DIR"
broker_start || fail "start"
broker_stop
mkdir -p "$BROKER_DIR/data/backup" && echo keep >"$BROKER_DIR/data/backup/x"
out=$(timeout 10 "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override listeners=PLAINTEXT://127.0.0.1:0 --override "log.dirs=$BROKER_DIR/data" 2>&1)
check_eq "a Gregor log directory with a non-partition subdirectory added: exit 1" "1" "$?"
case "$out" in *"is not a partition directory"*) pass "naming the directory" ;; *) fail "naming the directory" "$out" ;; esac
check_eq "which is untouched" "keep" "$(cat "$BROKER_DIR/data/backup/x" 2>&1)"
rm -rf "$tmp"

# As a user other than root (the Docker image runs as one): a restart after segments rolled works (the
# segment files made ahead of a roll once had mode 0000, which only root could reopen).
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null; then
    tmp=$(mktemp -d /tmp/gregor-test.XXXXXX)
    chmod 755 "$tmp" && mkdir "$tmp/data" && chown nobody "$tmp/data"
    as_nobody() {
        runuser -u nobody -- "$GREGOR_BIN" --override gregor.admin.listeners=http://127.0.0.1:0 --override listeners=PLAINTEXT://127.0.0.1:0 \
            --override "gregor.listener.file=$tmp/data/listener" --override "log.dirs=$tmp/data/log" \
            --override log.segment.bytes=2000 >>"$tmp/broker.log" 2>&1 &
        NOBODY_PID=$!
        for _ in $(seq 1 100); do [ -s "$tmp/data/listener" ] && break; sleep 0.05; done
    }
    as_nobody
    seq -f "%0100g" 1 500 | kcat -P -b "$(cat "$tmp/data/listener")" -t rolled -X topic.request.required.acks=-1 \
        -X batch.num.messages=20 2>/dev/null
    kill -TERM "$NOBODY_PID"; wait "$NOBODY_PID" 2>/dev/null
    segs=$(ls "$tmp/data/log/rolled-0/" | grep -c '\.log$')
    check "as user nobody: 500 records rolled into several segments ($segs)" [ "$segs" -gt 1 ]
    rm -f "$tmp/data/listener"
    as_nobody
    got=$(timeout 20 kcat -C -b "$(cat "$tmp/data/listener" 2>/dev/null || echo 127.0.0.1:1)" -t rolled -o beginning -e -q 2>/dev/null | wc -l)
    check_eq "as user nobody: the restart after the rolls serves every record" "500" "$got"
    kill -TERM "$NOBODY_PID" 2>/dev/null; wait "$NOBODY_PID" 2>/dev/null
    rm -rf "$tmp"
fi

# __consumer_offsets: created on first group use, replayed at the next start.
offsets_step() { # offsets_step STEP: one pass/fail per line that offsets_topic.py prints
    local line
    while IFS= read -r line; do
        case "$line" in "ok   "*) pass "${line#ok   }" ;; "FAIL "*) fail "${line#FAIL }" ;; esac
    done < <(python3 "$(dirname "$0")/offsets_topic.py" "$BROKER" "$1" 2>&1)
}
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start || { fail "start"; summary startup; exit 1; }
ms=$(sed -n 's/.* started in \([0-9]*\) ms.*/\1/p' "$BROKER_DIR/broker.log" | head -1)
case "$ms" in [0-9]*) pass "a new broker reports its start-up time ($ms ms, no __consumer_offsets to create)" ;;
    *) fail "a new broker reports its start-up time" "$(tail -3 "$BROKER_DIR/broker.log")" ;; esac
offsets_step absent
offsets_step group
broker_restart
offsets_step present
check "the restart replayed __consumer_offsets at start" grep -q "group coordinator loaded" "$BROKER_DIR/broker.log"
broker_stop
rm -rf "$BROKER_DIR"
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start || { fail "start"; summary startup; exit 1; }
offsets_step create
broker_stop
rm -rf "$BROKER_DIR"
# A soft RLIMIT_NOFILE far below what loading the log directory needs: the broker raises it to the hard limit
# before it opens the store (it used to raise it after, so with 400 partitions and a soft limit of 256 part
# of them failed with EMFILE and stayed offline, and their producer snapshots were deleted as "unusable").
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
broker_start --override num.partitions=400 || { fail "start"; summary startup; exit 1; }
kcat -L -b "$BROKER" -t wide400 -m 10 >/dev/null 2>&1 # auto-creates the topic
seq 1 2000 | kcat -P -b "$BROKER" -t wide400 -K: 2>/dev/null
broker_stop
soft=$(ulimit -Sn)
if [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -gt 4096 ]; then
    ulimit -Sn 256
    broker_restart --override num.partitions=400
    ulimit -Sn "$soft"
    check_eq "a start under a soft limit of 256 opens all 400 partitions (none offline)" "" \
        "$(grep -E 'could not be opened|open failed' "$BROKER_DIR/broker.log")"
    check "the broker's soft limit was raised to the hard limit" \
        awk '/Max open files/ { exit !($4 == $5) }' "/proc/$BROKER_PID/limits"
    check_eq "every record of the 400 partitions reads back" 2000 \
        "$(timeout 60 kcat -C -b "$BROKER" -t wide400 -e -q 2>/dev/null | wc -l)"
else
    fail "the hard RLIMIT_NOFILE is above 4096" "hard $(ulimit -Hn)"
fi
broker_stop
rm -rf "$BROKER_DIR"
run_py "startup/logformat.py" "$(dirname "$0")/logformat.py" # the log lines: json with gregor.log.format=json, logfmt by default
summary startup
