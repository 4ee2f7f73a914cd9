#!/usr/bin/env bash
# fdcap/run.sh: requests naming more partitions than gregor.open.files.max (issue 26, defect 1: such a
# Produce never got answered, spun the network thread and crashed the broker).
#   1. gregor.open.files.max=64, topic `wide` with 1,000 partitions (fdcap/run.py wide): Produce acks=1 and
#      acks=-1 over every partition (with a Produce pipelined behind), Fetch, ListOffsets (-1, -2, -3, by
#      time) and OffsetForLeaderEpoch naming every partition, each after the cap pass closed the idle files:
#      every partition answered right, another connection served within a second meanwhile; then a Produce
#      over every partition with SIGTERM while the pool reopens its files (slowed by io/slowread.c): the
#      broker exits 0 within 15 s, and after a restart every log end offset is as acknowledged.
#   2. the default cap (1,024) and 1,100 partitions: the same requests, then a stock kafka-python 2.0.2
#      producer (Debian's python3-kafka) sending 5 records to each of the 1,100 idle partitions (it puts
#      them all in one Produce): every record acknowledged at its offset. SIGTERM: exit 0 within 15 s.
# Every broker runs under the network-thread audit (compat-tests/run.sh sets a file; alone: =1 and the
# broker log is checked), and its log must hold no such line.
# Prints "fdcap: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
SHIM_DIR=$(mktemp -d /tmp/gregor-fdcap-shim.XXXXXX)
trap 'broker_cleanup; rm -rf "$FLAG_FILE" "$SHIM_DIR"' EXIT
export GREGOR_NET_THREAD_AUDIT=${GREGOR_NET_THREAD_AUDIT:-1}
export FLAG_FILE=$(mktemp -u /tmp/gregor-fdcap-flag.XXXXXX)
export BROKER_PID

# term_clean NAME [FILE]: SIGTERM (then removes FILE); the broker must exit 0 within 15 s and log a clean
# stop. Closing the store fsyncs every partition's files: 2-5 s for 1,000 written partitions on a loaded
# 2-core machine; before the fix a SIGTERM during such a Produce never finished.
term_clean() {
    local t0 rc=none
    t0=$(date +%s%N)
    kill -TERM "$BROKER_PID"
    [ -n "${2:-}" ] && rm -f "$2"
    for _ in $(seq 1 300); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -9 "$BROKER_PID" 2>/dev/null
    fi
    wait "$BROKER_PID" 2>/dev/null
    rc=$?
    local ms=$((($(date +%s%N) - t0) / 1000000))
    check_eq "$1: SIGTERM: exit status 0 within 15 s (${ms} ms)" 0 "$rc"
    check "$1: the broker logged a clean stop" grep -q "stopped cleanly" "$BROKER_DIR/broker.log"
    BROKER_PID=
}

audit_none() { # NAME: no network-thread disk call in this broker's log
    local n
    n=$(grep -c "net-thread disk call" "$BROKER_DIR/broker.log")
    check_eq "$1: network-thread disk calls logged by the audit" 0 "$n"
    [ "$n" -gt 0 ] && grep "net-thread disk call" "$BROKER_DIR/broker.log" | sed -E 's/^ts=[^ ]* level=[^ ]* component=[^ ]* //' | sort | uniq -c | sort -rn | head -5
}

add_result() { # NAME FILE: the output of a Python part run outside run_py, added to the counts
    local p f
    grep -v '^RESULT ' "$2"
    read -r _ p f _ <<<"$(grep '^RESULT ' "$2" | tail -1)"
    if [ -n "${p:-}" ]; then PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); else fail "$1" "ended without a RESULT line"; fi
}

# ---- 1. cap 64, 1,000 partitions ----
# io/slowread.c slows each segment-file open by GREGOR_TEST_SLOW_OPEN_MS while $SLOW_FLAG exists: the pool's
# reopen of ~936 files then takes seconds, so the SIGTERM below lands while the Produce waits for it.
if ! cc -shared -fPIC -O2 -o "$SHIM_DIR/slowread.so" "$here/../io/slowread.c" -ldl; then
    fail "build the slow-open shim"; summary fdcap; exit 1
fi
export GREGOR_TEST_SLOW_OPEN_MS=5 GREGOR_TEST_SLOW_OPEN_FLAG=$SHIM_DIR/slow LD_PRELOAD=$SHIM_DIR/slowread.so
broker_start --override gregor.open.files.max=64 --override num.partitions=1 ||
    { fail "broker starts (cap 64)"; summary fdcap; exit 1; }
unset GREGOR_TEST_SLOW_OPEN_MS GREGOR_TEST_SLOW_OPEN_FLAG LD_PRELOAD
run_py "fdcap/run.py wide 1000 64" "$here/run.py" wide 1000 64
check "cap 64: broker still running after the wide requests" kill -0 "$BROKER_PID"
sleep 1.5 # the cap pass closes the files again
touch "$SHIM_DIR/slow"
BROKER=$BROKER BROKER_DIR=$BROKER_DIR PYTHONPATH=$REPO/compat-tests/lib python3 "$here/run.py" inflight 1000 \
    >"$BROKER_DIR/inflight.out" 2>&1 &
py=$!
for _ in $(seq 1 100); do [ -e "$FLAG_FILE" ] && break; sleep 0.05; done
sleep 0.3
term_clean "cap 64, SIGTERM while a 1,000-partition produce waits for its files" "$SHIM_DIR/slow"
wait "$py"
add_result "fdcap/run.py inflight 1000" "$BROKER_DIR/inflight.out"
audit_none "cap 64"
broker_restart --override gregor.open.files.max=64 --override num.partitions=1 ||
    { fail "broker restarts (cap 64)"; summary fdcap; exit 1; }
run_py "fdcap/run.py ends 1000" "$here/run.py" ends 1000
broker_cleanup
BROKER_DIR=

# ---- 2. the default cap (1,024), 1,100 partitions, and kafka-python 2.0.2 ----
broker_start --override num.partitions=1 || { fail "broker starts (default cap)"; summary fdcap; exit 1; }
run_py "fdcap/run.py wide 1100 1024" "$here/run.py" wide 1100 1024
check "default cap: broker still running after the wide requests" kill -0 "$BROKER_PID"
pkg_ok=1
if ! dpkg-query -W -f='${Status}' python3-kafka 2>/dev/null | grep -q 'install ok installed'; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends python3-kafka; } >/tmp/gregor-apt-fdcap.log 2>&1 || pkg_ok=0
fi
if [ "$pkg_ok" = 1 ]; then
    # Debian's package only (the admin suite's pip kafka-python 3 lives in /usr/local and would shadow it).
    BROKER=$BROKER BROKER_DIR=$BROKER_DIR PYTHONPATH=/usr/lib/python3/dist-packages:$REPO/compat-tests/lib \
        /usr/bin/python3 -s -S "$here/run.py" kp 1100 >"$BROKER_DIR/kp.out" 2>&1
    add_result "fdcap/run.py kp 1100 (kafka-python 2.0.2)" "$BROKER_DIR/kp.out"
else
    fail "python3-kafka (kafka-python 2.0.2) installed" "$(tail -2 /tmp/gregor-apt-fdcap.log)"
fi
check "default cap: broker still running after kafka-python" kill -0 "$BROKER_PID"
term_clean "default cap"
audit_none "default cap"
summary fdcap
