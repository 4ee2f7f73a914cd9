#!/usr/bin/env bash
# stop-kafka.sh DIR [--keep]: stop the Kafka started by start-kafka.sh --dir DIR
# (pid in DIR/kafka.pid): SIGTERM, up to 30 s for a clean shutdown, then
# SIGKILL; then removes DIR unless --keep is given.
# Only the recorded process (and its session, which start-kafka.sh created
# with setsid) is signalled.
# Read next: start-kafka.sh.
set -uo pipefail

DIR="${1:?usage: stop-kafka.sh DIR [--keep]}"
KEEP="${2:-}"
[[ -f "$DIR/kafka.pid" ]] || { echo "stop-kafka: no $DIR/kafka.pid" >&2; exit 1; }
PID="$(cat "$DIR/kafka.pid")"

if kill -0 "$PID" 2>/dev/null; then
  # The JVM is exec'd by the wrappers, so $PID is the JVM itself and the
  # leader of its own session; signal the process group to catch stragglers.
  kill -TERM -- "-$PID" 2>/dev/null || kill -TERM "$PID" 2>/dev/null
  for _ in $(seq 1 60); do
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$PID" 2>/dev/null; then
    echo "stop-kafka: pid $PID did not exit after 30 s, killing" >&2
    kill -KILL -- "-$PID" 2>/dev/null || kill -KILL "$PID" 2>/dev/null
  fi
fi
rm -f "$DIR/kafka.pid"
[[ "$KEEP" == "--keep" ]] || rm -rf "$DIR"
exit 0
