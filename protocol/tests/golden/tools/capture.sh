#!/usr/bin/env bash
# capture.sh OUTDIR [kafka|gregor] [CLIENT...]: runs each client flow through capture_proxy.py and leaves
# one JSON-lines log per client in OUTDIR (OUTDIR/<client>.jsonl). select_frames.py then picks the golden
# frames out of those logs. Upstream: "kafka" (default) starts Apache Kafka (4.4.0, start-kafka.sh's default) with
# compat-tests/kafka-dist/start-kafka.sh, so that every flow (consumer groups included) is served and the
# responses are Kafka's own; "gregor" starts $GREGOR (default build/bin/gregor). Either way the broker
# advertises the proxy's port, so clients come back through the proxy after Metadata.
# Clients (default: all): kcat, kafka-python-2.0.2, kafka-python-3.0.12, confluent-kafka, kafkajs, java.
# The transaction flows are named explicitly, in this order: txn-kcat txn-confluent txn-tools.
# Client installs it makes if missing (all outside the repository): venvs /tmp/gold-venv-kp2 and
# /tmp/gold-venv-kp3 (kafka-python + python-snappy, lz4, zstandard), /tmp/gold-js (npm kafkajs), and the
# compiled GoldenFlow in /tmp/gold-java. confluent-kafka is the python3 one on PATH.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
out=${1:?usage: capture.sh OUTDIR [kafka|gregor] [CLIENT...]}; shift
upstream=${1:-kafka}; shift || true
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(kcat kafka-python-2.0.2 kafka-python-3.0.12 confluent-kafka kafkajs java)
mkdir -p "$out"; out=$(cd "$out" && pwd)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
updir=$(mktemp -d /tmp/gold-upstream-XXXXXX)

case "$upstream" in
kafka)
  START_TIMEOUT_S=180 "$repo/compat-tests/kafka-dist/start-kafka.sh" --dir "$updir/k" \
    --override "advertised.listeners=PLAINTEXT://127.0.0.1:$port" >"$updir/start.out" || exit 1
  upfile=$updir/k/bootstrap
  stop_upstream() { "$repo/compat-tests/kafka-dist/stop-kafka.sh" "$updir/k"; }
  ;;
gregor)
  "${GREGOR:-$repo/build/bin/gregor}" --override listeners=PLAINTEXT://127.0.0.1:0 --override gregor.admin.listeners= \
    --override "advertised.listeners=PLAINTEXT://127.0.0.1:$port" --override "gregor.listener.file=$updir/addr" \
    --override "log.dirs=$updir/data" >"$updir/gregor.log" 2>&1 &
  gpid=$!
  upfile=$updir/addr
  stop_upstream() { kill "$gpid"; wait "$gpid" 2>/dev/null; }
  ;;
*) echo "capture.sh: upstream must be kafka or gregor" >&2; exit 2 ;;
esac

need_venv() { # DIR KAFKA_PYTHON_VERSION
  [ -x "$1/bin/python" ] && "$1/bin/python" -c 'import kafka, snappy, lz4, zstandard' 2>/dev/null && return
  python3 -m venv "$1" && "$1/bin/pip" install -q "kafka-python==$2" python-snappy lz4 zstandard
}

run_client() { # NAME: runs one flow against 127.0.0.1:$port
  local b=127.0.0.1:$port
  case "$1" in
  kcat) "$here/kcat_flow.sh" "$b" kcat ;;
  kafka-python-2.0.2) need_venv /tmp/gold-venv-kp2 2.0.2 && /tmp/gold-venv-kp2/bin/python "$here/kafka_python_flow.py" "$b" kp2 ;;
  kafka-python-3.0.12) need_venv /tmp/gold-venv-kp3 3.0.12 && /tmp/gold-venv-kp3/bin/python "$here/kafka_python_flow.py" "$b" kp3 ;;
  confluent-kafka) python3 "$here/confluent_flow.py" "$b" confluent ;;
  kafkajs)
    [ -d /tmp/gold-js/node_modules/kafkajs ] || (mkdir -p /tmp/gold-js && cd /tmp/gold-js && npm init -y >/dev/null && npm install -q kafkajs@2.2.4)
    NODE_PATH=/tmp/gold-js/node_modules node "$here/kafkajs_flow.js" "$b" kafkajs ;;
  java)
    local m2=$HOME/.m2/repository
    local cp="$m2/org/apache/kafka/kafka-clients/4.1.1/kafka-clients-4.1.1.jar:$m2/org/lz4/lz4-java/1.8.0/lz4-java-1.8.0.jar"
    cp="$cp:$m2/org/xerial/snappy/snappy-java/1.1.10.7/snappy-java-1.1.10.7.jar:$m2/com/github/luben/zstd-jni/1.5.6-10/zstd-jni-1.5.6-10.jar"
    cp="$cp:$m2/org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"
    mkdir -p /tmp/gold-java
    javac -d /tmp/gold-java -cp "$cp" "$here/GoldenFlow.java" && java -cp "/tmp/gold-java:$cp" GoldenFlow "$b" java ;;
  txn-kcat) "$here/txn_kcat_flow.sh" "$b" txn-kcat ;;
  txn-confluent) python3 "$here/txn_confluent_flow.py" "$b" txn-confluent ;;
  txn-tools) # Kafka's own kafka-transactions.sh (the distribution start-kafka.sh uses): ListTransactions,
    # DescribeTransactions of the ids the two flows above left (run them first, against the same broker)
    local kt=${KAFKA_HOME:-$repo/compat-tests/.cache/kafka-4.4.0}/bin/kafka-transactions.sh
    "$kt" --bootstrap-server "$b" list && "$kt" --bootstrap-server "$b" describe --transactional-id golden-txn-confluent ;;
  *) echo "capture.sh: unknown client $1" >&2; return 2 ;;
  esac
}

for c in "${clients[@]}"; do
  rm -f "$out/$c.jsonl"
  python3 "$here/capture_proxy.py" --port "$port" --upstream-file "$upfile" --log "$out/$c.jsonl" >/dev/null &
  ppid=$!
  sleep 0.5
  echo "== $c"
  timeout 120 bash -c "$(declare -f run_client need_venv); here='$here' repo='$repo' port='$port'; run_client '$c'" >"$out/$c.out" 2>&1
  echo "   exit $?: $(tail -3 "$out/$c.out" | tr '\n' ' ')"
  kill "$ppid"; wait "$ppid" 2>/dev/null
  echo "   $(wc -l <"$out/$c.jsonl") frames"
done
stop_upstream
rm -rf "$updir"
