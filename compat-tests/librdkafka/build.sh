#!/usr/bin/env bash
# build.sh: fetch librdkafka's source package (the version of the installed
# librdkafka-dev, 2.0.2 on Debian bookworm) and build ONLY its test runner,
# linked against the system library. Cached: a second run is a no-op unless a
# source file changed. Prints the test-runner path on the last line of stdout.
#
# Steps (each skipped when already done):
#   1. make sure apt can fetch sources: add a deb822 deb-src entry
#      (/etc/apt/sources.list.d/gregor-deb-src.sources) mirroring debian.sources
#   2. install the few build packages that are missing (root only)
#   3. apt-get source librdkafka=<installed version> into
#      compat-tests/.cache/librdkafka/
#   4. ./configure (mklove; only to produce config.h for the tests' includes)
#   5. make -f runner.mk -j2 -> compat-tests/.cache/librdkafka/build-<ver>/test-runner
#
# Env: RDK_CACHE (default compat-tests/.cache/librdkafka), RDK_JOBS (default 2).
# Read next: runner.mk (what is compiled and how), run.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${RDK_CACHE:-$HERE/../.cache/librdkafka}"
JOBS="${RDK_JOBS:-2}"
log() { echo "build: $*" >&2; }

as_root() {
  if [[ $(id -u) == 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else log "need root for: $*"; return 1; fi
}

# --- 2. packages -------------------------------------------------------------
# librdkafka-dev: the library under test (+ rdkafkacpp.h, librdkafka++.so)
# dpkg-dev: dpkg-source for apt-get source; g++/make: the build;
# libssl/zlib/lz4/zstd -dev: the test runner links what the suite uses directly;
# rapidjson-dev (headers only): without it the suite skips its JSON checks
# (0110 batch_size, stats verification in 0053/0098).
need=()
for p in librdkafka-dev dpkg-dev g++ make libssl-dev zlib1g-dev liblz4-dev libzstd-dev rapidjson-dev; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if (( ${#need[@]} )); then
  log "installing: ${need[*]}"
  as_root apt-get update -q >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi

VER_FULL="$(dpkg-query -W -f '${Version}' librdkafka-dev)"   # e.g. 2.0.2-1
VER="${VER_FULL%%-*}"; VER="${VER#*:}"                       # e.g. 2.0.2
SRC="$CACHE/librdkafka-$VER"
OUT="$CACHE/build-$VER"
mkdir -p "$CACHE" "$OUT"
CACHE="$(cd "$CACHE" && pwd)"; SRC="$CACHE/librdkafka-$VER"; OUT="$CACHE/build-$VER"

# --- 1 + 3. source -----------------------------------------------------------
if [[ ! -f "$SRC/tests/test.c" ]]; then
  if ! apt-cache showsrc librdkafka 2>/dev/null | grep -q '^Package: librdkafka'; then
    f=/etc/apt/sources.list.d/gregor-deb-src.sources
    log "enabling deb-src in $f"
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
      # Same entries as the binary sources, as deb-src (deb822 stanzas).
      sed -e 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
        as_root tee "$f" >/dev/null
    else
      codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
      printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$codename" "$codename" | as_root tee "$f" >/dev/null
    fi
    as_root apt-get update -q >&2
  fi
  log "apt-get source librdkafka=$VER_FULL into $CACHE"
  (cd "$CACHE" && apt-get source -q "librdkafka=$VER_FULL" >&2)
  [[ -f "$SRC/tests/test.c" ]] || { log "source not found at $SRC"; exit 1; }
fi

# --- 4. configure (config.h, included by the suite through src/rd.h) ---------
if [[ ! -f "$SRC/config.h" ]] ||
   { [[ -f /usr/include/rapidjson/schema.h ]] && ! grep -q 'define WITH_RAPIDJSON 1' "$SRC/config.h"; }; then
  log "configuring $SRC"
  (cd "$SRC" && ./configure --prefix=/usr > "$OUT/configure.log" 2>&1) ||
    { tail -20 "$OUT/configure.log" >&2; exit 1; }
fi

# --- 5. build ----------------------------------------------------------------
if ! make -q -f "$HERE/runner.mk" SRC="$SRC" OUT="$OUT" 2>/dev/null; then
  log "building test-runner in $OUT (-j$JOBS)"
  start=$(date +%s)
  make -s -f "$HERE/runner.mk" SRC="$SRC" OUT="$OUT" -j"$JOBS" > "$OUT/build.log" 2>&1 ||
    { grep -E 'error|Error' "$OUT/build.log" | head -30 >&2; log "build failed, see $OUT/build.log"; exit 1; }
  log "built in $(( $(date +%s) - start ))s"
fi
echo "$OUT/test-runner"
