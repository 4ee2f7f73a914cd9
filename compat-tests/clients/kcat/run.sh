#!/usr/bin/env bash
# kcat/run.sh BOOTSTRAP MODE RESULT_JSON: the scenario (../README.md) with Debian's kcat; see scenario.py for
# what kcat cannot do (admin API, per-record headers, group describe) and how the row handles it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$here/../../.." && pwd)
if ! command -v kcat >/dev/null; then
    python3 -c 'import json,sys; json.dump({"client":"kcat","version":None,"language":"C","install_error":"kcat not installed (apt-get install kcat; scripts/install-deps.sh test)","steps":[]}, open(sys.argv[1],"w"))' "$3"
    exit 0
fi
KAFKA_BIN=$("$REPO/compat-tests/kafka-dist/get-kafka.sh" 2>/dev/null | tail -1)/bin
exec python3 "$here/scenario.py" "$1" "$2" "$3" "$KAFKA_BIN"
