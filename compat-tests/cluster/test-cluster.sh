#!/usr/bin/env bash
# test-cluster.sh: `make test-cluster`, stock clients against a 3-broker Gregor cluster with etcd (issue #19):
#   1. librdkafka 2.0.2's own suite (every broker test, as `make compat-librdkafka`) through the harness's
#      cluster mode (librdkafka/run.sh --cluster 3: compat-tests/cluster/serve.py starts etcd and three
#      cluster-mode brokers on free loopback ports; a fresh cluster per scenario and after a broker dies);
#      the table goes to compat-tests/librdkafka/results-cluster.md; must-pass.txt and must-pass-cluster.txt
#      (librdkafka's transactional tests) must pass;
#   2. the Java and franz-go rows of the client matrix (clients/run.sh --full --only java,franz-go) against
#      one such cluster, with MATRIX_PARTITIONS=12 MATRIX_MEMBERS=3: a 12-partition topic led by the three
#      brokers and a group of three consumers spanning them (issue #19's client test).
# Needs root (installs etcd-server with scripts/install-deps.sh test when missing). Every step runs even when
# an earlier one failed; the last line is "test-cluster: librdkafka <rc>, clients <rc>"; exit 1 on any failure.
# Usage: test-cluster.sh [BUILD_DIR]   (default build)
set -u
here=$(cd "$(dirname "$0")" && pwd)
export REPO=${REPO:-$(cd "$here/../.." && pwd)}
build=${1:-$REPO/build}
case "$build" in /*) ;; *) build=$REPO/$build ;; esac
export GREGOR_BIN=${GREGOR_BIN:-$build/bin/gregor}
command -v etcd >/dev/null || "$REPO/scripts/install-deps.sh" test || { echo "test-cluster: etcd missing"; exit 1; }

"$REPO/compat-tests/librdkafka/run.sh" --all --cluster 3 --gregor "$GREGOR_BIN" \
    --results "$REPO/compat-tests/librdkafka/results-cluster.md"
rdk=$?

tmp=$(mktemp -d)
python3 "$here/serve.py" --ready-file "$tmp/ready" --brokers 3 --deadline 3600 \
    --override auto.create.topics.enable=false --override group.initial.rebalance.delay.ms=0 >"$tmp/serve.log" 2>&1 &
serve=$!
for _ in $(seq 1 900); do [ -s "$tmp/ready" ] || ! kill -0 $serve 2>/dev/null && break; sleep 0.1; done
if [ -s "$tmp/ready" ]; then
    MATRIX_PARTITIONS=12 MATRIX_MEMBERS=3 \
        "$REPO/compat-tests/clients/run.sh" --full --only java,franz-go --bootstrap "$(cat "$tmp/ready")"
    cl=$?
else
    echo "test-cluster: the cluster for the client matrix did not start:"; cat "$tmp/serve.log"
    cl=1
fi
kill -TERM $serve 2>/dev/null; wait $serve 2>/dev/null
rm -rf "$tmp"
echo "test-cluster: librdkafka $rdk, clients $cl"
[ $rdk -eq 0 ] && [ $cl -eq 0 ]
