#!/usr/bin/env bash
# cluster/run.sh: the cluster fault harness's self-test (compat-tests/cluster/selftest.py): etcd members,
# network namespaces with nftables cuts, and gregor brokers, each fault shown to happen and to be undone,
# and nothing of the run left afterwards. Needs root; installs etcd-server, etcd-client and nftables
# (scripts/install-deps.sh test) when they are missing. Prints "cluster-harness: N passed, N failed".
# Usage: compat-tests/cluster/run.sh [--seed N] [--deadline SECONDS]
set -u
here=$(cd "$(dirname "$0")" && pwd)
export REPO=${REPO:-$(cd "$here/../.." && pwd)}
export GREGOR_BIN=${GREGOR_BIN:-$REPO/build/bin/gregor}
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null || ! command -v nft >/dev/null; then
    "$REPO/scripts/install-deps.sh" test || { echo "cluster-harness: 0 passed, 1 failed (etcd/nftables missing)"; exit 1; }
fi
exec python3 "$here/selftest.py" "$@"
