#!/usr/bin/env bash
# get-kafka.sh: an Apache Kafka 4.4.0 "distribution" (broker + command-line
# tools) assembled from Maven Central, for comparison runs and for the tools
# librdkafka's test suite shells out to ($KAFKA_PATH/bin/kafka-topics.sh ...).
#
# What it produces (idempotent; a second run only checks and prints the path):
#   $KAFKA_HOME/libs/*.jar     every jar of pom.xml's dependencies (transitive)
#   $KAFKA_HOME/bin/*.sh       wrappers named like Kafka's own scripts, each
#                              `java -cp 'libs/*' <MainClass> "$@"`
#   $KAFKA_HOME/config/        log4j2 configs for tools (WARN to stderr) and
#                              the server (INFO to stdout)
# with KAFKA_HOME defaulting to compat-tests/.cache/kafka-4.4.0 (gitignored).
# The main classes are those of Kafka 4.x's bin/*.sh (most tools live in
# org.apache.kafka.tools, a few are still Scala in kafka_2.13; ConfigCommand and
# DumpLogSegments moved from kafka_2.13 to org.apache.kafka.tools after 4.1, so
# a wrapper may name alternatives and gets the first class the jars hold); each
# wrapper is checked with --help once at install time.
#
# Usage: get-kafka.sh [--print-home]   prints KAFKA_HOME on the last line.
# KAFKA_VERSION=4.0.2 get-kafka.sh builds .cache/kafka-4.0.2 the same way: librdkafka's 0077 needs
# Kafka 4.0's kafka-topics.sh (4.1+ refuses segment.bytes=10000 before asking the broker).
# Needs: java >= 17, mvn (reaches Maven Central or uses ~/.m2), python3.
# Read next: start-kafka.sh (runs a single-node KRaft broker from this).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}" # another 4.x: KAFKA_VERSION=4.0.2 get-kafka.sh (tools only matter)
KAFKA_HOME="${KAFKA_HOME:-$HERE/../.cache/kafka-$KAFKA_VERSION}"
mkdir -p "$KAFKA_HOME"
KAFKA_HOME="$(cd "$KAFKA_HOME" && pwd)"
STAMP="$KAFKA_HOME/.complete"

log() { echo "get-kafka: $*" >&2; }

# script name -> main class (Kafka 4.x bin/ scripts; a|b: the first class the jars hold).
WRAPPERS=(
  "kafka-topics.sh=org.apache.kafka.tools.TopicCommand"
  "kafka-configs.sh=org.apache.kafka.tools.ConfigCommand|kafka.admin.ConfigCommand"
  "kafka-console-producer.sh=org.apache.kafka.tools.ConsoleProducer"
  "kafka-console-consumer.sh=org.apache.kafka.tools.consumer.ConsoleConsumer"
  "kafka-consumer-groups.sh=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
  "kafka-producer-perf-test.sh=org.apache.kafka.tools.ProducerPerformance"
  "kafka-consumer-perf-test.sh=org.apache.kafka.tools.ConsumerPerformance"
  "kafka-dump-log.sh=org.apache.kafka.tools.DumpLogSegments|kafka.tools.DumpLogSegments"
  "kafka-storage.sh=kafka.tools.StorageTool"
  "kafka-acls.sh=org.apache.kafka.tools.AclCommand"
  "kafka-delete-records.sh=org.apache.kafka.tools.DeleteRecordsCommand"
  "kafka-get-offsets.sh=org.apache.kafka.tools.GetOffsetShell"
  "kafka-transactions.sh=org.apache.kafka.tools.TransactionsCommand"
  "kafka-features.sh=org.apache.kafka.tools.FeatureCommand"
  "kafka-metadata-quorum.sh=org.apache.kafka.tools.MetadataQuorumCommand"
  "kafka-cluster.sh=org.apache.kafka.tools.ClusterTool"
  "kafka-log-dirs.sh=org.apache.kafka.tools.LogDirsCommand"
  "kafka-broker-api-versions.sh=org.apache.kafka.tools.BrokerApiVersionsCommand"
  "kafka-reassign-partitions.sh=org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
  "kafka-leader-election.sh=org.apache.kafka.tools.LeaderElectionCommand"
)

# The stamp records this script's checksum: editing the script regenerates
# bin/ and config/ (the jars are kept).
SELF_SUM="$(sha1sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$SELF_SUM" ]]; then
  echo "$KAFKA_HOME"
  exit 0
fi

command -v java >/dev/null || { log "java not found (apt-get install openjdk-17-jre-headless)"; exit 1; }
command -v mvn >/dev/null || { log "mvn not found (apt-get install maven)"; exit 1; }

# 1. Jars.
if ! ls "$KAFKA_HOME/libs/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null 2>&1; then
  log "fetching Kafka $KAFKA_VERSION jars with Maven into $KAFKA_HOME/libs"
  mkdir -p "$KAFKA_HOME/libs"
  mvn -B -q -f "$HERE/pom.xml" dependency:copy-dependencies -Dkafka.version="$KAFKA_VERSION" \
      -DoutputDirectory="$KAFKA_HOME/libs" -DincludeScope=runtime >&2
fi

# 2. Logging configs (log4j2 properties format: needs no YAML parser).
mkdir -p "$KAFKA_HOME/config" "$KAFKA_HOME/bin"
cat > "$KAFKA_HOME/config/tools-log4j2.properties" <<'EOF'
# Command-line tools: warnings and errors only, on stderr.
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
EOF
cat > "$KAFKA_HOME/config/log4j2.properties" <<'EOF'
# Broker: INFO on stdout (start-kafka.sh sends it to <data dir>/server.log).
status = error
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = org.apache.kafka
logger.kafka.level = info
logger.coord.name = kafka.coordinator
logger.coord.level = info
EOF

# 3. Wrappers.
cat > "$KAFKA_HOME/bin/kafka-run-class.sh" <<'EOF'
#!/usr/bin/env bash
# kafka-run-class.sh <main class> [args...]: like Kafka's, minus the extras.
# Env: CLASSPATH (put before libs/*, as Kafka's script does; librdkafka's
#      tests/java/run-class.sh relies on it), KAFKA_HEAP_OPTS (default
#      -Xmx256m for tools), KAFKA_OPTS,
#      KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_CONFIG (log4j2 config file).
set -e
base_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 1 ]] || { echo "USAGE: $0 classname [opts]" >&2; exit 1; }
: "${KAFKA_HEAP_OPTS:=-Xmx256m}"
# Tools are short-lived: C1 only and serial GC start noticeably faster.
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto}"
: "${KAFKA_LOG4J_CONFIG:=$base_dir/config/tools-log4j2.properties}"
# shellcheck disable=SC2086
exec java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_OPTS \
  -Dlog4j2.configurationFile="$KAFKA_LOG4J_CONFIG" \
  -cp "${CLASSPATH:+$CLASSPATH:}$base_dir/libs/*" "$@"
EOF
chmod +x "$KAFKA_HOME/bin/kafka-run-class.sh"

# Every class file of Kafka's own jars, to choose between a wrapper's alternatives.
classes="$(python3 -c 'import sys, zipfile
for j in sys.argv[1:]: print("\n".join(zipfile.ZipFile(j).namelist()))' "$KAFKA_HOME"/libs/kafka*.jar)"
for w in "${WRAPPERS[@]}"; do
  name="${w%%=*}"; cls="${w#*=}"
  for c in ${cls//|/ }; do
    if grep -qxF "${c//.//}.class" <<<"$classes"; then cls="$c"; break; fi
  done
  cls="${cls##*|}" # none found: the last one, which the --help check below reports
  cat > "$KAFKA_HOME/bin/$name" <<EOF
#!/usr/bin/env bash
# Generated by compat-tests/kafka-dist/get-kafka.sh: Kafka $KAFKA_VERSION $name.
exec "\$(dirname "\${BASH_SOURCE[0]}")/kafka-run-class.sh" $cls "\$@"
EOF
  chmod +x "$KAFKA_HOME/bin/$name"
done

cat > "$KAFKA_HOME/bin/kafka-server-start.sh" <<'EOF'
#!/usr/bin/env bash
# kafka-server-start.sh <server.properties> [--override k=v ...]
# Env: KAFKA_HEAP_OPTS (default -Xmx512m -Xms256m).
base_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"
export KAFKA_JVM_PERFORMANCE_OPTS="${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true}"
export KAFKA_LOG4J_CONFIG="${KAFKA_LOG4J_CONFIG:-$base_dir/config/log4j2.properties}"
exec "$base_dir/bin/kafka-run-class.sh" kafka.Kafka "$@"
EOF
chmod +x "$KAFKA_HOME/bin/kafka-server-start.sh"

# 4. Check every wrapper's main class loads (--help exits 0 or 1 depending
#    on the tool; a missing class gives "Could not find or load main class").
log "checking wrappers"
fail=0
for w in "${WRAPPERS[@]}" "kafka-server-start.sh=kafka.Kafka"; do
  name="${w%%=*}"
  out="$("$KAFKA_HOME/bin/$name" --help 2>&1 </dev/null || true)"
  if grep -qE 'Could not find or load main class|ClassNotFoundException|NoClassDefFoundError|UnsupportedClassVersionError' <<<"$out"; then
    log "FAILED: $name: $(grep -m1 -E 'main class|ClassNotFound|NoClassDef|UnsupportedClassVersion' <<<"$out")"
    fail=1
  fi
done
[[ $fail == 0 ]] || { log "some wrappers are broken"; exit 1; }

echo "$SELF_SUM" > "$STAMP"
log "Kafka $KAFKA_VERSION ready"
echo "$KAFKA_HOME"
