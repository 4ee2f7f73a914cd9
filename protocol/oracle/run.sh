#!/usr/bin/env bash
# run.sh: build (if needed) and run the Kafka codec oracle.
#
#   run.sh gen OUTFILE [SEED] [PER_VERSION]   write random vectors (default seed 1, 20 per version)
#   run.sh check INFILE                       verify vectors; prints "N passed, N failed", exit 1 on failure
#
# Build: `mvn compile dependency:build-classpath` into protocol/oracle/target (gitignored),
# offline first (-o), online only if the offline build fails (first run, empty ~/.m2).
# Rebuilds when pom.xml or any source is newer than target/.built. See README.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$here/target"
stamp="$target/.built"

needs_build() {
    [[ -f "$stamp" && -f "$target/classpath.txt" ]] || return 0
    [[ -n "$(find "$here/pom.xml" "$here/src" -newer "$stamp" -print -quit)" ]]
}

if needs_build; then
    mvn_args=(-B -q -Dstyle.color=never -f "$here/pom.xml" compile dependency:build-classpath
              "-Dmdep.outputFile=$target/classpath.txt")
    mkdir -p "$target"
    log="$target/build.log"
    if ! mvn -o "${mvn_args[@]}" >"$log" 2>&1; then
        echo "run.sh: offline build failed, retrying online (log: $log)" >&2
        if ! mvn "${mvn_args[@]}" >"$log" 2>&1; then
            cat "$log" >&2
            echo "run.sh: build failed" >&2
            exit 2
        fi
    fi
    touch "$stamp"
fi

exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
    -cp "$target/classes:$(cat "$target/classpath.txt")" dev.gregor.oracle.Oracle "$@"
