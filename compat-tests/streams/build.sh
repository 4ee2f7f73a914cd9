#!/usr/bin/env bash
# streams/build.sh: builds compat-tests/streams (Maven: kafka-streams 4.4.0 and its kafka-clients from Maven
# Central; target/ gitignored) when its sources or pom.xml are newer than the last build, and prints the Java
# class path of its classes and dependencies on stdout. On a failed build: "mvn build failed: ..." on stderr,
# status 1. Used by run.sh (`make compat-eos`), compat-tests/txn/eos.py --pipeline java and
# compat-tests/cluster/txn_raise.py (TxnRaise).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cp=$here/target/classpath.txt
mkdir -p "$here/target"
if [ ! -s "$cp" ] || [ ! -d "$here/target/classes" ] || [ -n "$(find "$here/src" "$here/pom.xml" -newer "$cp" -print -quit)" ]; then
    if ! mvn -B -q -f "$here/pom.xml" compile dependency:build-classpath -Dmdep.outputFile="$cp" >"$here/target/build.log" 2>&1; then
        rm -f "$cp"
        echo "mvn build failed: $(grep -m3 ERROR "$here/target/build.log")" >&2
        exit 1
    fi
fi
echo "$here/target/classes:$(cat "$cp")"
