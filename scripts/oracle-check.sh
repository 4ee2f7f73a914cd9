#!/usr/bin/env bash
# oracle-check.sh: Gregor's codec against Apache Kafka's own generated message classes (kafka-clients 4.4.0).
#  1. Kafka writes random messages for every API x version (protocol/oracle gen).
#  2. Gregor decodes each, must consume every byte and re-encode the same bytes, and renders its JSON.
#  3. Kafka decodes the same bytes and compares its reading with Gregor's JSON (protocol/oracle check).
#  4. Gregor writes its own random messages; Kafka decodes them, compares JSON and re-encodes the bytes.
# Usage: scripts/oracle-check.sh BUILD_DIR [PER_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
per=${2:-20}
tool=$build/tests/gr_oracle_tool
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protocol/oracle/run.sh gen "$out/kafka.txt" 7 "$per" 2>"$out/gen.log" || { cat "$out/gen.log"; exit 1; }
echo "oracle: Gregor decodes and re-encodes Kafka's vectors"
"$tool" decode "$out/kafka.txt" "$out/gregor-read.txt"
echo "oracle: Kafka compares its reading with Gregor's"
protocol/oracle/run.sh check "$out/gregor-read.txt" | tail -20
"$tool" gen "$out/gregor.txt" 11 "$per"
echo "oracle: Kafka decodes Gregor's vectors"
protocol/oracle/run.sh check "$out/gregor.txt" | tail -20
