#!/usr/bin/env bash
# java/run.sh BOOTSTRAP MODE RESULT_JSON: the scenario (../README.md) with org.apache.kafka:kafka-clients
# (version in pom.xml) from Maven Central. Compiles with Maven on first use (or when a source is newer than
# the classpath file), then runs dev.gregor.clients.Scenario. On a build failure writes install_error.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$1 mode=$2 out=$3
cp=$here/target/classpath.txt
install_error() {
    python3 - "$out" "$1" <<'PY'
import json, sys
json.dump({"client": "java", "version": None, "language": "Java", "install_error": sys.argv[2], "steps": []},
          open(sys.argv[1], "w"))
PY
    echo "java: not installed: $1"; exit 0
}
command -v mvn >/dev/null || install_error "mvn not found (apt-get install maven; scripts/install-deps.sh test)"
if [ ! -s "$cp" ] || [ -n "$(find "$here/src" "$here/pom.xml" -newer "$cp" -print -quit)" ]; then
    mvn -B -q -f "$here/pom.xml" compile dependency:build-classpath -Dmdep.outputFile="$cp" >"$here/target.build.log" 2>&1 ||
        { mkdir -p "$here/target"; mv "$here/target.build.log" "$here/target/build.log" 2>/dev/null;
          rm -f "$cp"; install_error "mvn compile failed: $(grep -m2 -E 'ERROR' "$here/target/build.log" | tr '\n' ' ' | cut -c1-300)"; }
    mv "$here/target.build.log" "$here/target/build.log" 2>/dev/null
fi
exec java -Xmx384m -XX:+UseSerialGC -cp "$here/target/classes:$(cat "$cp")" dev.gregor.clients.Scenario "$B" "$mode" "$out"
