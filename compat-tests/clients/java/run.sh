#!/usr/bin/env bash
# java/run.sh BOOTSTRAP MODE RESULT_JSON: the scenario (../README.md) with org.apache.kafka:kafka-clients from
# Maven Central: the version in pom.xml (4.1.1, an older 4.x client; java-latest runs 4.4.0, the tested Kafka's), or env KAFKA_CLIENTS_VERSION (the
# java-latest row sets it); env CLIENT_NAME names the row (default java). Compiles with Maven on first use
# (or when a source is newer than the classpath file), then runs dev.gregor.clients.Scenario. On a build or
# download failure writes install_error.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$1 mode=$2 out=$3
export CLIENT_NAME=${CLIENT_NAME:-java}
ver=${KAFKA_CLIENTS_VERSION:-}
cp=$here/target/classpath${ver:+-$ver}.txt
install_error() {
    python3 - "$out" "$1" "$CLIENT_NAME" <<'PY'
import json, sys
json.dump({"client": sys.argv[3], "version": None, "language": "Java", "install_error": sys.argv[2], "steps": []},
          open(sys.argv[1], "w"))
PY
    echo "$CLIENT_NAME: not installed: $1"; exit 0
}
command -v mvn >/dev/null || install_error "mvn not found (apt-get install maven; scripts/install-deps.sh test)"
mkdir -p "$here/target"
if [ ! -s "$cp" ] || [ ! -d "$here/target/classes" ] || [ -n "$(find "$here/src" "$here/pom.xml" -newer "$cp" -print -quit)" ]; then
    mvn -B -q -f "$here/pom.xml" compile dependency:build-classpath ${ver:+-Dkafka.version=$ver} \
        -Dmdep.outputFile="$cp" >"$here/target/build${ver:+-$ver}.log" 2>&1 ||
        { rm -f "$cp"; install_error "mvn compile/dependency:build-classpath${ver:+ (kafka-clients $ver)} failed: $(grep -m2 ERROR "$here/target/build${ver:+-$ver}.log" | tr '\n' ' ' | cut -c1-300)"; }
fi
exec java -Xmx384m -XX:+UseSerialGC -cp "$here/target/classes:$(cat "$cp")" dev.gregor.clients.Scenario "$B" "$mode" "$out"
