#!/usr/bin/env bash
# install-deps.sh: installs what building and testing Gregor needs on Debian bookworm, skipping what is
# already there. Usage: scripts/install-deps.sh [build|test]. Needs root (apt-get) only when something is missing.
set -euo pipefail
mode=${1:-build}
build_pkgs=(build-essential cmake pkg-config python3 libev-dev libzstd-dev libsnappy-dev liblz4-dev zlib1g-dev libcmocka-dev
            libcurl4-openssl-dev libjansson-dev libssl-dev libmicrohttpd-dev)
# kcat and librdkafka drive the compat tests; Java 17 and Maven run the codec oracle and Kafka's own tools;
# pip installs the Python clients the admin and group suites use; the client matrix (compat-tests/clients)
# also runs Debian's own (older) python3-kafka and python3-confluent-kafka with their codec modules.
# The cluster harness (compat-tests/cluster) runs etcd 3.4 (etcd-server, etcdctl from etcd-client), cuts
# namespaces apart with nftables and builds them with iproute2; its fault runs (jepsen.py) offset a
# restarted broker's wall clock with libfaketime (faketime). strace counts a broker's fdatasyncs
# (compat-tests/txn/markers_fsync.py). prometheus gives promtool (the metrics suite lints /metrics with it) and
# the server `make test-dashboard` runs (96 MB installed; 9 s to install here on 2026-12-03).
test_pkgs=(clang-format-14 kcat librdkafka-dev wamerican netcat-openbsd python3-pip python3-venv
           python3-kafka python3-confluent-kafka python3-lz4 python3-snappy python3-zstandard
           python3-cryptography openssl etcd-server etcd-client nftables iproute2 procps faketime strace prometheus)
pkgs=("${build_pkgs[@]}")
if [ "$mode" = test ]; then
    pkgs+=("${test_pkgs[@]}")
    command -v javac >/dev/null 2>&1 || pkgs+=(openjdk-17-jdk-headless)
    command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
