#!/usr/bin/env bash
# sanitize-check.sh [BUILD_DIR] [FUZZ_SECONDS]: the sanitizer stage of `make test`. Builds only what it runs in
# the ASan + UBSan build (default build-asan, the directory `make sanitize` uses; -fno-sanitize-recover, so a
# UBSan finding aborts), then runs, with UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:
#   - the protocol tests that feed malformed input (codec, malformed frames, the transaction APIs' messages,
#     golden frames, record batches, compression, wire primitives) and the timestamp tests of issue 26
#     (extreme header timestamps in storage, the produce handler's timestamp rules, the log rate limiter), the
#     end-transaction marker, the replication floor of issue
#     #20 (the follower's log: append as follower, truncation with its crash points; the leader side and the
#     follower side of a partition), the produce gate and commit wait over a tight open-file cap, and the
#     broker's exit status 2 on a refused configuration (test_server_exit_codes: the leak check must not turn it
#     into 1), the SCRAM messages and credential file parsers (test_scram: malformed client messages, damaged
#     files), the /metrics page's steps and the series cap (test_metrics_cap: a page freed mid-way, a failed
#     step), the SASL parsers and state machine (test_sasl: JAAS, PLAIN), OAUTHBEARER tokens (test_oauth: malformed
#     and mutated tokens), through ctest;
#   - the fuzz corpus: make_seeds' generated seeds plus the golden frames (as protocol/fuzz/run.sh builds
#     them), replayed by fuzz_replay, then deterministic mutants of them for FUZZ_SECONDS (default 60).
# Any sanitizer report, failed check or crash fails the stage. Ends with "sanitize-check: N passed, N failed"
# (one step per test program and one for the fuzz replay).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
fuzz_s=${2:-60}
jobs=${JOBS:-$(nproc)}
tests=(test_wire test_codec test_malformed test_malformed2 test_txn_codec test_golden test_record_batch
       test_txn_marker test_compress test_crc32c test_storage_log test_produce_timestamps test_common_log test_common_log_format test_storage_lag test_storage_replica
       test_partition_replica test_partition_follower test_server_fdcap_requests test_server_exit_codes
       test_cluster_part_summary_local
       test_metrics_cap test_sasl test_scram test_oauth)
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
start=$(date +%s)
mkdir -p "$build"
pass=0
fail=0
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DGREGOR_SANITIZE=ON >"$build/sanitize-check.cmake.log" 2>&1 ||
   ! cmake --build "$build" -j"$jobs" --target "${tests[@]/test_server_exit_codes/gregor}" fuzz_replay fuzz_make_seeds >"$build/sanitize-check.build.log" 2>&1; then
    tail -30 "$build/sanitize-check.cmake.log" "$build/sanitize-check.build.log" 2>/dev/null
    echo "sanitize-check: 0 passed, 1 failed (the sanitizer build failed)"
    exit 1
fi
echo "sanitize-check: built in $(($(date +%s) - start)) s"
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
(cd "$build" && ctest --output-on-failure -j"$jobs" -R "$regex") >"$build/sanitize-check.ctest.log" 2>&1
n_run=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$build/sanitize-check.ctest.log")
n_bad=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*\*\*\*' "$build/sanitize-check.ctest.log")
grep -E '^ *[0-9]+/[0-9]+ Test +#' "$build/sanitize-check.ctest.log"
if [ "$n_run" -ne ${#tests[@]} ] || [ "$n_bad" -ne 0 ] || grep -q "runtime error:\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer" "$build/sanitize-check.ctest.log"; then
    grep -B2 -A25 "runtime error:\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|\*\*\*Failed\|\*\*\*Exception" "$build/sanitize-check.ctest.log" | head -80
    [ "$n_bad" -eq 0 ] && n_bad=1
fi
fail=$((fail + n_bad + ${#tests[@]} - n_run))
pass=$((pass + n_run - n_bad))

# The fuzz corpus: generated seeds and the golden frames from real clients (mode byte 0 + request frame;
# mode byte 1 + api key and version + response frame), then mutants.
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
ok=1
"$build/fuzz/fuzz_make_seeds" "$seeds" >/dev/null || ok=0
python3 - "$seeds" <<'PY' || ok=0
import glob, os, re, sys
for f in sorted(glob.glob('protocol/tests/golden/*/*.req.hex')):
    base = os.path.basename(os.path.dirname(f)) + '-' + os.path.basename(f)[:-len('.req.hex')]
    req = bytes.fromhex(re.sub(r'\s', '', open(f).read()))
    open(os.path.join(sys.argv[1], 'golden-' + base + '.req'), 'wb').write(b'\0' + req)
    r = f[:-len('.req.hex')] + '.resp.hex'
    if os.path.exists(r):
        resp = bytes.fromhex(re.sub(r'\s', '', open(r).read()))
        open(os.path.join(sys.argv[1], 'golden-' + base + '.resp'), 'wb').write(b'\1' + req[:4] + resp)
PY
if [ $ok -eq 1 ] && "$build/fuzz/fuzz_replay" -r 1000000 -t "$fuzz_s" "$seeds" 2>"$build/sanitize-check.fuzz.log"; then
    pass=$((pass + 1))
else
    grep -v "^ *$" "$build/sanitize-check.fuzz.log" | head -60
    echo "sanitize-check: the fuzz corpus replay found something (or could not run); reproduce with"
    echo "  FUZZ_CRASH_FILE=/tmp/crash UBSAN_OPTIONS=$UBSAN_OPTIONS $build/fuzz/fuzz_replay -r 1000000 -t $fuzz_s <seeds dir>  (writes the inputs that led there to /tmp/crash.NNNNNN)"
    fail=$((fail + 1))
fi
echo "sanitize-check: done in $(($(date +%s) - start)) s"
echo "sanitize-check: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
