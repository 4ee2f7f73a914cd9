#!/usr/bin/env bash
# etcd-tests.sh: runs the etcd client's tests (cluster/tests/test_etcd.c) against a real etcd (Debian's
# etcd-server) and the topic writer's (test_topic_writer.c) that it starts on free loopback ports (client and peer) with a temporary data directory and
# --auto-compaction-retention=0 (the tests read history), and always stops (also on failure or timeout).
# Then the controller's test (cluster/tests/test_controller.c) against the same etcd, the ISR writer's
# (test_isr_writer.c), the inter-broker client's (test_broker_client.c, against gregor brokers it starts
# itself) and the producer id blocks' (test_producer_ids_etcd.c).
# Usage: cluster/tests/etcd-tests.sh [BUILD_DIR]   (default build; ends with "cluster: N passed, N failed")
# The test binary acts on that etcd through "etcd-tests.sh ctl ACTION" (kill | start | start-wait | stop |
# cont | compact REV | put-compact KEY VALUE), with ETCD_TEST_DIR naming the run's directory.
set -u
here=$(cd "$(dirname "$0")" && pwd)

start_etcd() { # $1 = run directory (holds ports, data/, pid, etcd.log); returns at once
    local dir=$1 c p
    read -r c p <"$dir/ports"
    setsid etcd --name gr-test --data-dir "$dir/data" \
        --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
        --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
        --initial-cluster "gr-test=http://127.0.0.1:$p" --auto-compaction-retention=0 \
        >>"$dir/etcd.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    disown $! 2>/dev/null # its kill -9 is expected: no "Killed" line from bash
}

stop_etcd() { # kill -9, then wait (at most 5 s) until the process is gone
    local dir=$1 pid
    pid=$(cat "$dir/pid" 2>/dev/null) || return 0
    kill -CONT "$pid" 2>/dev/null
    kill -9 "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/pid"
}

if [ "${1:-}" = ctl ]; then
    dir=${ETCD_TEST_DIR:?}
    read -r c _ <"$dir/ports"
    case "${2:-}" in
    kill) stop_etcd "$dir" ;;
    start) start_etcd "$dir" ;;
    stop) kill -STOP "$(cat "$dir/pid")" ;;
    cont) kill -CONT "$(cat "$dir/pid")" ;;
    compact) ETCDCTL_API=3 timeout 10 etcdctl --endpoints="127.0.0.1:$c" compact "$3" >/dev/null ;;
    start-wait) # start, then wait (at most 10 s) until etcd answers
        start_etcd "$dir"
        for _ in $(seq 100); do
            ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$c" --command-timeout=1s endpoint health >/dev/null 2>&1 &&
                exit 0
            sleep 0.1
        done
        exit 1 ;;
    put-compact) # put $3=$4 twice, then compact etcd's history up to the second put's revision
        ETCDCTL_API=3 timeout 10 etcdctl --endpoints="127.0.0.1:$c" put "$3" "$4" >/dev/null || exit 1
        rev=$(ETCDCTL_API=3 timeout 10 etcdctl --endpoints="127.0.0.1:$c" -w json put "$3" "$4" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])') || exit 1
        ETCDCTL_API=3 timeout 10 etcdctl --endpoints="127.0.0.1:$c" compact "$rev" >/dev/null ;;
    *) echo "etcd-tests.sh ctl: unknown action ${2:-}" >&2; exit 2 ;;
    esac
    exit $?
fi

build=${1:-build}
bin=$build/tests/test_etcd
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    echo "cluster: etcd or etcdctl missing (scripts/install-deps.sh test installs etcd-server, etcd-client)"
    echo "cluster: 0 passed, 1 failed"
    exit 1
fi
[ -x "$bin" ] || { echo "cluster: $bin not built"; echo "cluster: 0 passed, 1 failed"; exit 1; }

dir=$(mktemp -d /tmp/gregor-etcd-test.XXXXXX)
cleanup() { stop_etcd "$dir"; rm -rf "$dir"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
# Three free loopback ports: etcd's client and peer ports, and one where nothing listens (failover).
python3 -c 'import socket
ss=[socket.socket() for _ in range(3)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])' >"$dir/allports"
read -r cport pport closed <"$dir/allports"
echo "$cport $pport" >"$dir/ports"
start_etcd "$dir"
healthy=0
for _ in $(seq 100); do
    if ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$cport" --command-timeout=1s endpoint health >/dev/null 2>&1; then
        healthy=1
        break
    fi
    sleep 0.1
done
if [ $healthy -ne 1 ]; then
    echo "cluster: etcd did not become healthy on 127.0.0.1:$cport"; tail -5 "$dir/etcd.log"
    echo "cluster: 0 passed, 1 failed"
    exit 1
fi
# run_one NAME BINARY SUMMARY-PREFIX: runs one test binary against the etcd, adds its counts to p and f.
p=0; f=0
run_one() {
    local out=$dir/$1.out rc line tp tf
    ETCD_TEST_DIR=$dir ETCD_ENDPOINT="http://127.0.0.1:$cport" ETCD_CLOSED="http://127.0.0.1:$closed" \
        ETCD_CTL="$here/etcd-tests.sh ctl" timeout -k 5 150 "$2" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    line=$(grep -E "^$3: [0-9]+ passed, [0-9]+ failed" "$out" | tail -1)
    tp=$(echo "$line" | sed -n 's/.*: \([0-9]*\) passed.*/\1/p')
    tf=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    [ -n "$tp" ] || tp=0
    if [ -z "$tf" ] || { [ "$rc" -ne 0 ] && [ "$tf" -eq 0 ]; }; then
        echo "cluster: $1 exited with $rc before its summary"; tf=$(( ${tf:-0} + 1 )); fi
    p=$((p + tp)); f=$((f + tf))
}
run_one test_etcd "$bin" "etcd client"
# The controller (cluster/tests/test_controller.c): two controllers, election, takeover, a deposed writer.
if [ -x "$build/tests/test_controller" ]; then
    run_one test_controller "$build/tests/test_controller" controller
else
    echo "cluster: $build/tests/test_controller not built"; f=$((f + 1))
fi
# The controller's lease (cluster/tests/test_ctl_lease.c): kept alive, lost and replaced, released.
if [ -x "$build/tests/test_ctl_lease" ]; then
    run_one test_ctl_lease "$build/tests/test_ctl_lease" "controller lease"
else
    echo "cluster: $build/tests/test_ctl_lease not built"; f=$((f + 1))
fi
# UpdateFeatures' txn on the features key (cluster/tests/test_features_etcd.c): absent, compared, stale.
if [ -x "$build/tests/test_features_etcd" ]; then
    run_one test_features_etcd "$build/tests/test_features_etcd" "features key"
else
    echo "cluster: $build/tests/test_features_etcd not built"; f=$((f + 1))
fi
# The topic writer (cluster/tests/test_topic_writer.c) on the same etcd, under its own key prefix.
if [ -x "$build/tests/test_topic_writer" ]; then
    run_one test_topic_writer "$build/tests/test_topic_writer" "topic writer"
else
    echo "cluster: $build/tests/test_topic_writer not built"; f=$((f + 1))
fi
# A leader's ISR changes (cluster/tests/test_isr_writer.c): shrink, expand, stale, fenced, a paused etcd.
if [ -x "$build/tests/test_isr_writer" ]; then
    run_one test_isr_writer "$build/tests/test_isr_writer" "isr writer"
else
    echo "cluster: $build/tests/test_isr_writer not built"; f=$((f + 1))
fi
# The role binding with the real ISR writer (cluster/tests/test_roles_etcd.c): a shrink written and committed.
if [ -x "$build/tests/test_roles_etcd" ]; then
    run_one test_roles_etcd "$build/tests/test_roles_etcd" "roles etcd"
else
    echo "cluster: $build/tests/test_roles_etcd not built"; f=$((f + 1))
fi
# The inter-broker client (cluster/tests/test_broker_client.c): needs no etcd; it starts gregor brokers of
# its own on free loopback ports (GREGOR_BIN) and a fake peer, and stops them.
if [ -x "$build/tests/test_broker_client" ] && [ -x "$build/bin/gregor" ]; then
    GREGOR_BIN=$(cd "$build/bin" && pwd)/gregor
    export GREGOR_BIN
    run_one test_broker_client "$build/tests/test_broker_client" "broker client"
else
    echo "cluster: $build/tests/test_broker_client or $build/bin/gregor not built"; f=$((f + 1))
fi
# Producer id blocks (cluster/tests/test_producer_ids_etcd.c): last, since it pauses etcd.
if [ -x "$build/tests/test_producer_ids_etcd" ]; then
    run_one test_producer_ids_etcd "$build/tests/test_producer_ids_etcd" "producer ids"
else
    echo "cluster: $build/tests/test_producer_ids_etcd not built"; f=$((f + 1))
fi
[ "$f" -gt 0 ] && tail -20 "$dir/etcd.log" | sed 's/^/etcd.log: /'
echo "cluster: $p passed, $f failed"
[ "$f" -eq 0 ]
