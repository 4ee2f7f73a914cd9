#!/usr/bin/env bash
# run.sh: librdkafka's own test suite (Debian's librdkafka 2.0.2) against Gregor.
#
#   run.sh --must-pass        must-pass.txt must all PASS (exit 1 otherwise);
#                             then other broker tests while the budget lasts
#                             (RDK_BUDGET_S, default 1200 s in total)
#   run.sh --all              every broker test except not-applicable.txt;
#                             writes results.md
#   run.sh 0001 0003 ...      just those (ids as in `run.sh --list`)
#                             (0001+P: 0001 with the runner's -P flag,
#                             enable.idempotence=true in every client)
#   run.sh --list             broker test ids, sub-tests, must-pass / n/a tags
# Broker (default: Gregor at build/bin/gregor, or GREGOR_BIN / --gregor PATH):
#   --kafka                   start Apache Kafka 4.4.0 (compat-tests/kafka-dist)
#   --bootstrap HOST:PORT     use a running broker (no restarts; default scenario)
# Other options: --timeout S (per test, default 120), --quick (suite's -Q),
#   --include-na, --results FILE, --run-dir DIR, --override k=v (Gregor setting),
#   --keep-data (keep the broker data dirs, removed by default),
#   --jobs N (tests at once against the broker, env RDK_JOBS, default 1).
#
# Output: one line per test as it finishes, then a markdown table, then the
# last line `N passed, N failed, N skipped` (TIMEOUT counts as failed); with --must-pass the last line
# is `librdkafka-must-pass: N passed, N failed` and the other tests are reported on the line before it.
# Logs: per-test output, test.conf, broker logs in the run dir printed at the end.
#
# On a fresh Debian bookworm (root) it installs what is missing: librdkafka-dev,
# compilers and -dev libs (build.sh), python3, and java + maven for the Kafka
# tools that a few tests call through $KAFKA_PATH/bin/kafka-topics.sh.
# Read next: harness.py (what runs and how results are judged), build.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIST="$HERE/../kafka-dist"

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0
fi

as_root() {
  if [[ $(id -u) == 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "run.sh: need root for: $*" >&2; return 1; fi
}
ensure_pkgs() {  # ensure_pkgs cmd:package ...
  local need=() cp
  for cp in "$@"; do
    command -v "${cp%%:*}" >/dev/null || need+=("${cp#*:}")
  done
  if (( ${#need[@]} )); then
    echo "run.sh: installing ${need[*]}" >&2
    as_root apt-get update -q >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
  fi
}

ensure_pkgs python3:python3 timeout:coreutils
RUNNER="$("$HERE/build.sh" | tail -1)"

# Kafka's command-line tools (kafka-topics.sh, kafka-acls.sh) for the tests
# that shell out to them; needed whichever broker is tested.
KAFKA_HOME=""
KAFKA40_HOME=""
if ensure_pkgs java:openjdk-17-jre-headless mvn:maven; then
  KAFKA_HOME="$("$DIST/get-kafka.sh" | tail -1)" ||
    echo "run.sh: warning: Kafka tools unavailable; tests using kafka-topics.sh will fail" >&2
  # Kafka 4.0's tools for the tests whose kafka-topics.sh call 4.1 refuses client-side (0077:
  # segment.bytes=10000, below 4.1's 1 MiB minimum; Gregor keeps 4.0's minimum of 14, see README).
  KAFKA40_HOME="$(KAFKA_VERSION=4.0.2 "$DIST/get-kafka.sh" | tail -1)" ||
    echo "run.sh: warning: Kafka 4.0 tools unavailable; 0077 will fail" >&2
fi

# The suite's Java helpers (tests/java: a transactional producer for 0098, an
# incremental-rebalance consumer for 0113), compiled once against the Kafka
# client jars; harness.py links them into each test's working directory.
JAVA_DIR=""
BUILD_DIR="$(dirname "$RUNNER")"
JSRC="$(dirname "$BUILD_DIR")/librdkafka-${BUILD_DIR##*/build-}/tests/java"
if [[ -n "$KAFKA_HOME" && -d "$JSRC" ]] && ensure_pkgs javac:openjdk-17-jdk-headless; then
  JAVA_DIR="$BUILD_DIR/java"
  if [[ ! -f "$JAVA_DIR/TransactionProducerCli.class" ]]; then
    mkdir -p "$JAVA_DIR"
    cp "$JSRC/run-class.sh" "$JAVA_DIR/"
    javac -nowarn -d "$JAVA_DIR" -classpath "$KAFKA_HOME/libs/*" "$JSRC"/*.java >&2 ||
      { echo "run.sh: warning: tests/java did not compile" >&2; JAVA_DIR=""; }
  fi
fi

exec env -u CI python3 "$HERE/harness.py" --runner "$RUNNER" --kafka-path "$KAFKA_HOME" --kafka40-path "$KAFKA40_HOME" \
  --java-dir "$JAVA_DIR" "$@"
