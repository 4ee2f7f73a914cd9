#!/usr/bin/env bash
# kafka-tools/run.sh BOOTSTRAP MODE RESULT_JSON: Apache Kafka 4.4.0's command-line tools (assembled from
# Maven Central by compat-tests/kafka-dist/get-kafka.sh) against the broker; steps t1..t10 (../README.md).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$here/../../.." && pwd)
if ! home=$("$REPO/compat-tests/kafka-dist/get-kafka.sh" 2>/tmp/gregor-get-kafka.$$ | tail -1) || [ ! -x "$home/bin/kafka-topics.sh" ]; then
    python3 -c 'import json,sys; json.dump({"client":"kafka-tools","version":"4.4.0","language":"Java","install_error":"compat-tests/kafka-dist/get-kafka.sh failed: "+sys.argv[2],"steps":[]}, open(sys.argv[1],"w"))' \
        "$3" "$(tail -2 /tmp/gregor-get-kafka.$$ | tr '\n' ' ')"
    rm -f /tmp/gregor-get-kafka.$$
    exit 0
fi
rm -f /tmp/gregor-get-kafka.$$
exec python3 "$here/scenario.py" "$1" "$2" "$3" "$home/bin"
