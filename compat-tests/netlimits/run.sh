#!/usr/bin/env bash
# netlimits/run.sh: the broker's connection limits under attack (issue 26: defects 2, 4, 5 and the start-up
# item); each stage's assertions are listed in netlimits/run.py.
#   1. out of descriptors: a broker whose RLIMIT_NOFILE is lowered to 256 (prlimit) gets 400 connections:
#      bounded CPU and log lines, clients refused (closed) rather than hanging, service after they close;
#   2. partial frames: queued.max.request.bytes=64 MiB against 32 connections sending half of 16 MiB frames;
#   3. non-reading clients: gregor.unsent.bytes.max=32 MiB against 100 connections pipelining 64 Metadata
#      requests of a 3,000-partition topic each without reading;
#   4. start-up: the same broker restarted (loading 3,000 partitions takes seconds) refuses connections until
#      it serves; none is accepted and left unanswered.
# NETLIMITS_STAGES="3 4" runs only those stages (4 needs 3). Prints "netlimits: N passed, N failed" and exits
# non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
trap 'broker_cleanup' EXIT
export GREGOR_NET_THREAD_AUDIT=${GREGOR_NET_THREAD_AUDIT:-1} # compat-tests/run.sh sets a file
py() { BROKER_PID=$BROKER_PID run_py "$@"; }
new_dir() { broker_cleanup; BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX); }
stage() { case " ${NETLIMITS_STAGES:-1 2 3 4} " in *" $1 "*) return 0 ;; esac; return 1; }

if stage 1; then
    echo "-- 1. out of file descriptors"
    new_dir
    broker_start || { fail "broker starts"; summary netlimits; exit 1; }
    check "RLIMIT_NOFILE of the broker lowered to 256" prlimit --pid "$BROKER_PID" --nofile=256:256
    py "netlimits/run.py emfile" "$here/run.py" emfile
    check "the broker is still running" kill -0 "$BROKER_PID"
fi

if stage 2; then
    echo "-- 2. partly received frames against queued.max.request.bytes"
    new_dir
    broker_start --override queued.max.request.bytes=67108864 || { fail "broker starts"; summary netlimits; exit 1; }
    py "netlimits/run.py partial" "$here/run.py" partial
fi

echo "-- 3. clients that never read their answers"
new_dir
broker_start --override gregor.unsent.bytes.max=33554432 || { fail "broker starts"; summary netlimits; exit 1; }
py "netlimits/run.py create_wide" "$here/run.py" create_wide
stage 3 && py "netlimits/run.py nonreading" "$here/run.py" nonreading

echo "-- 4. start-up: no connection accepted and left unanswered while 3,000 partitions load"
broker_stop
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
probe_out=$BROKER_DIR/probe.out
PYTHONPATH=$REPO/compat-tests/lib python3 "$here/run.py" startup_probe "$port" "$probe_out" &
probe_pid=$!
sleep 0.3
# The load must take long enough for the probe to see it: since opens write no checkpoint (issue 26, defect 3)
# 3,000 partitions load in a few hundred ms, so io/slowread.c slows each segment-file open by 50 us (a few seconds in all).
shim=$BROKER_DIR/slowread.so
cc -shared -fPIC -O2 -o "$shim" "$here/../io/slowread.c" -ldl || fail "io/slowread.c builds"
touch "$BROKER_DIR/slow-open"
export GREGOR_TEST_SLOW_OPEN_US=50 GREGOR_TEST_SLOW_OPEN_FLAG=$BROKER_DIR/slow-open LD_PRELOAD=$shim
check "the broker restarts on port $port" broker_restart --override gregor.unsent.bytes.max=33554432 \
    --override "listeners=PLAINTEXT://127.0.0.1:$port"
unset GREGOR_TEST_SLOW_OPEN_US GREGOR_TEST_SLOW_OPEN_FLAG LD_PRELOAD
rm -f "$BROKER_DIR/slow-open"
wait "$probe_pid"
read -r refused hung first_ok <"$probe_out" || { refused=0; hung=-1; first_ok=-1; }
ms=$(sed -n 's/.* started in \([0-9]*\) ms.*/\1/p' "$BROKER_DIR/broker.log" | tail -1)
echo "  ..   start-up: load ${ms} ms; probe: $refused refused, $hung accepted and unanswered for 1 s, first answer after ${first_ok} s"
check "the load takes measurable time (${ms} ms >= 500 ms)" test "${ms:-0}" -ge 500
check_eq "connections accepted and left unanswered during the load" 0 "$hung"
check "connects during the load were refused ($refused)" test "$refused" -ge 1
check "the first ApiVersions is answered once the broker is up (${first_ok} s)" \
    python3 -c "import sys; sys.exit(0 if 0 < $first_ok < 30 else 1)"
check "--healthcheck answers once it is up" "$GREGOR_BIN" --healthcheck --override "listeners=PLAINTEXT://127.0.0.1:$port"
broker_cleanup
unset GREGOR_NET_THREAD_AUDIT
summary netlimits
