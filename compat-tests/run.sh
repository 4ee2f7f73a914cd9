#!/usr/bin/env bash
# run.sh: the compat stage of `make test`: runs every suite listed in compat-tests/suites.txt against a
# freshly started broker (each suite starts its own), then prints one total line.
# Usage: compat-tests/run.sh [BUILD_DIR]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export REPO=$(cd "$here/.." && pwd)
build=${1:-$REPO/build}
case "$build" in /*) ;; *) build=$REPO/$build ;; esac
export GREGOR_BIN=$build/bin/gregor
# librdkafka stage: must-pass list first, then other broker tests while this budget (seconds) lasts, two tests
# at a time against the stage's broker (librdkafka's own runner runs its suite concurrently; tests marked
# `alone` in must-pass.txt run by themselves)
export RDK_BUDGET_S=${RDK_BUDGET_S:-480}
export RDK_JOBS=${RDK_JOBS:-2}
# Apache Kafka's own tools (Maven Central), used by the admin suite and librdkafka's suite.
"$here/kafka-dist/get-kafka.sh" >/dev/null 2>&1 || echo "compat: could not fetch Kafka's tools (the suites that use them say so)"
total_pass=0
total_fail=0
failed_suites=()
# The failure lines of every failed suite, printed again at the end so that a log's last lines name them.
failures=$(mktemp)
while read -r suite budget args; do
    case "$suite" in ''|'#'*) continue ;; esac
    script=$here/$suite
    [ -x "$script" ] || { echo "compat: $suite missing"; failed_suites+=("$suite"); total_fail=$((total_fail + 1)); continue; }
    echo "== compat: $suite (budget ${budget}s)"
    start=$(date +%s)
    out=$(mktemp)
    # Every broker the suite starts logs calls that may wait for the disk made on its network thread here.
    audit=$(mktemp)
    GREGOR_NET_THREAD_AUDIT=$audit timeout -k 10 "$budget" "$script" $args 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^([A-Za-z0-9_./-]+: )?[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
    [ -n "$line" ] || { p=0; f=1; }
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    if [ -s "$audit" ]; then
        echo "  FAIL $suite: the network thread made $(wc -l <"$audit") calls that may wait for the disk:"
        cut -d' ' -f2- "$audit" | sed -E 's/[0-9]{20}/<offset>/g' | sort | uniq -c | sort -rn | head -10
        f=$((f + 1))
        rc=1
    fi
    rm -f "$audit"
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    if [ "$rc" -ne 0 ]; then
        failed_suites+=("$suite")
        { echo "  $suite:"
          grep -E '(^|[[:space:]])(FAIL|FAILED|TIMEOUT)([[:space:]:]|$)|not PASSED|Traceback|timed out' "$out" \
              | grep -vE '^[[:space:]]*ok[[:space:]]' | tail -12 | cut -c1-300 | sed 's/^/    /'
        } >>"$failures"
    fi
    echo "== compat: $suite done in $(( $(date +%s) - start ))s (exit $rc)"
    rm -f "$out"
done < "$here/suites.txt"
if [ ${#failed_suites[@]} -gt 0 ]; then
    echo "compat: what the failed suites reported (their last failure lines):"
    cat "$failures"
    echo "compat: failed suites: ${failed_suites[*]}"
fi
rm -f "$failures"
echo "compat: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] && [ ${#failed_suites[@]} -eq 0 ]
