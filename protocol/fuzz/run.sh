#!/usr/bin/env bash
# run.sh DURATION_SECONDS: builds the libFuzzer target protocol/fuzz/fuzz_protocol.c with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer, seeds it (make_seeds + the golden frames under
# protocol/tests/golden/), and runs it at nice 19 in ONE process for DURATION_SECONDS (default 600).
# The corpus grows in $GREGOR_FUZZ_DIR/corpus across runs, so several short runs add up; crashes land in
# $GREGOR_FUZZ_DIR/artifacts/ (crash-*, leak-*, timeout-*, oom-*). Reproduce one with
#   $GREGOR_FUZZ_DIR/build/fuzz/fuzz_protocol ARTIFACT
# Environment: GREGOR_FUZZ_DIR (default /tmp/gregor-fuzz), CC (default clang), GREGOR_SRC (default: the
# repository this script is in). Needs: clang, on Debian bookworm libclang-rt-14-dev, and xxd.
set -euo pipefail
duration=${1:-600}
case "$duration" in ''|*[!0-9]*) echo "usage: $0 DURATION_SECONDS" >&2; exit 2;; esac
here=$(cd "$(dirname "$0")" && pwd)
src=${GREGOR_SRC:-$(cd "$here/../.." && pwd)}
work=${GREGOR_FUZZ_DIR:-/tmp/gregor-fuzz}
cc=${CC:-clang}
command -v "$cc" >/dev/null || { echo "run.sh: $cc not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
mkdir -p "$work/corpus" "$work/seeds" "$work/artifacts"

CC=$cc cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGREGOR_FUZZ=ON -DGREGOR_SANITIZE=ON \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" -j2 --target fuzz_protocol fuzz_make_seeds >"$work/build.log" 2>&1 || {
  tail -40 "$work/build.log" >&2
  grep -q "No rule to make target.*fuzz_protocol" "$work/build.log" &&
    echo "run.sh: no fuzz_protocol target: protocol/CMakeLists.txt must include tests/golden.cmake" >&2
  exit 1
}

# Seeds: generated frames and batches, then the golden frames (mode byte 0 + request frame; mode byte 1 +
# api key + version + response frame, the key and version taken from the matching request file).
rm -f "$work/seeds"/*
ASAN_OPTIONS=detect_leaks=0 "$work/build/fuzz/fuzz_make_seeds" "$work/seeds"
golden="$src/protocol/tests/golden"
n=0
for f in "$golden"/*/*.req.hex; do
  [ -e "$f" ] || continue
  base=$(basename "$(dirname "$f")")-$(basename "$f" .req.hex)
  { printf '\000'; tr -d ' \n\r' <"$f" | xxd -r -p; } >"$work/seeds/golden-$base.req"
  n=$((n + 1))
  r=${f%.req.hex}.resp.hex
  if [ -e "$r" ]; then
    { printf '\001'; tr -d ' \n\r' <"$f" | head -c 8 | xxd -r -p; tr -d ' \n\r' <"$r" | xxd -r -p; } \
      >"$work/seeds/golden-$base.resp"
    n=$((n + 1))
  fi
done
echo "run.sh: $(ls "$work/seeds" | wc -l) seeds ($n from golden frames); running ${duration}s"

log="$work/fuzz-$(date +%Y%m%d-%H%M%S).log"
set +e
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
nice -n 19 "$work/build/fuzz/fuzz_protocol" -max_total_time="$duration" -max_len=65536 -timeout=25 \
  -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  "$work/corpus" "$work/seeds" 2>&1 | tee "$log" | grep -E '^#[0-9]+[[:space:]]*(INITED|DONE|pulse)|ERROR|SUMMARY|stat::|Test unit written'
status=${PIPESTATUS[0]}
set -e
echo "run.sh: log $log; corpus $(ls "$work/corpus" | wc -l) files; artifacts: $(ls "$work/artifacts" | wc -l)"
exit "$status"
