#!/usr/bin/env bash
# diskfull/run.sh: a broker whose log directory fills up keeps every acknowledged record, stops, starts
# again and serves, and takes produces again once space is freed (issue 26, defect 3). The log directory is
# a 48 MiB ext4 file system on a loop device (mkfs.ext4 -m 0: no blocks reserved for root, the broker runs
# as root here); where a loop mount is impossible (or DISKFULL_TMPFS=1), a tmpfs with size=48m (said in the
# output). Steps:
#   - a group request creates __consumer_offsets (50 partitions), 6 MiB each go into `filler` and `filler2`, then
#     acks=-1 produces of 64 KiB batches to `main` until KAFKA_STORAGE_ERROR (every acknowledged offset kept),
#   - SIGTERM (the clean close may fail for lack of space: the next start then recovers), start again: the
#     broker starts, every partition is served, every acknowledged record is read back at its offset,
#   - DeleteRecords of `filler` to its high watermark (its checkpoint cannot be written on the full disk:
#     applied anyway, written later), then 20 more acks=-1 batches are acknowledged; `main` fills the disk
#     again until KAFKA_STORAGE_ERROR, DeleteTopics of `filler2` frees it, 20 more batches are acknowledged,
#     and every acknowledged record is read back,
#   - a restart after that closes cleanly and still has every acknowledged record.
# The network-thread audit (GREGOR_NET_THREAD_AUDIT, set by compat-tests/run.sh) must log nothing.
# Prints "diskfull: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
export GREGOR_NET_THREAD_AUDIT=${GREGOR_NET_THREAD_AUDIT:-1}

BROKER_DIR=$(mktemp -d /tmp/gregor-diskfull.XXXXXX)
IMG=$BROKER_DIR.img
MNT=$BROKER_DIR/data
cleanup() {
    broker_stop KILL
    mountpoint -q "$MNT" && umount "$MNT"
    rm -f "$IMG"
    [ -z "${KEEP_DATA:-}" ] && rm -rf "$BROKER_DIR"
}
trap cleanup EXIT

mkdir -p "$MNT"
if [ -z "${DISKFULL_TMPFS:-}" ] && truncate -s 48M "$IMG" && mkfs.ext4 -q -F -m 0 "$IMG" >/dev/null 2>&1 && mount -o loop "$IMG" "$MNT" 2>/dev/null; then
    echo "  log.dirs: 48 MiB ext4 on a loop device ($IMG)"
    FS=ext4
elif mount -t tmpfs -o size=48m tmpfs "$MNT" 2>/dev/null; then
    echo "  log.dirs: no loop mount (impossible here, or DISKFULL_TMPFS set): a 48 MiB tmpfs instead"
    FS=tmpfs
else
    fail "mount a small file system for log.dirs (needs root: loop device or tmpfs)"
    summary diskfull
    exit 1
fi

audit_none() { # NAME: no audit line in the broker's log
    local n
    n=$(grep -c "net-thread disk call" "$BROKER_DIR/broker.log")
    check_eq "$1" 0 "$n"
    [ "$n" -gt 0 ] && grep "net-thread disk call" "$BROKER_DIR/broker.log" | sed -E 's/^ts=[^ ]* level=[^ ]* component=[^ ]* //' | sort | uniq -c | sort -rn | head -10
}

start=$(date +%s)
broker_start --override log.segment.bytes=1048576 --override offsets.topic.num.partitions=50 ||
    { fail "broker starts on the $FS file system"; summary diskfull; exit 1; }
run_py "diskfull/run.py fill" "$here/run.py" fill
check "the file system is full ($(df --output=avail -k "$MNT" | tail -1 | tr -d ' ') KiB left)" \
    [ "$(df --output=avail -k "$MNT" | tail -1)" -lt 1024 ]
broker_stop TERM
echo "  stop: $(grep -E 'storage: closed' "$BROKER_DIR/broker.log" | tail -1 | sed -E 's/^ts=[^ ]* level=[^ ]* component=[^ ]* //')"
started() { # N: waits until the log holds N "started in" lines with the broker alive (its store opened)
    for _ in $(seq 1 200); do
        [ "$(grep -c ' started in ' "$BROKER_DIR/broker.log")" -ge "$1" ] && kill -0 "$BROKER_PID" 2>/dev/null && return 0
        kill -0 "$BROKER_PID" 2>/dev/null || break
        sleep 0.05
    done
    tail -3 "$BROKER_DIR/broker.log"
    return 1
}
broker_restart && started 2 ||
    { fail "the broker starts again on the full disk"; summary diskfull; exit 1; }
pass "the broker starts again on the full disk"
check_eq "no partition offline at the start on the full disk" 0 "$(grep -c 'could not be opened and are offline' "$BROKER_DIR/broker.log")"
run_py "diskfull/run.py verify" "$here/run.py" verify
run_py "diskfull/run.py free" "$here/run.py" free
audit_none "network-thread disk calls logged by the audit (full disk, start, DeleteRecords, DeleteTopics, produce)"
broker_stop TERM
check "with space again the stop is clean" grep -q "storage: closed .* (clean)" <(tail -3 "$BROKER_DIR/broker.log")
broker_restart && started 3 || fail "the broker starts a third time"
run_py "diskfull/run.py verify_end (after the last restart)" "$here/run.py" verify_end
echo "  diskfull ran in $(( $(date +%s) - start )) s"
summary diskfull
