#!/usr/bin/env bash
# kcat/run.sh: the stock kcat (librdkafka 2.0.2) against a fresh Gregor broker.
#   - `kcat -L` (text and JSON): the one broker, the controller id, topics with leader/replicas/isr;
#   - produce and consume with keys, headers (empty and null values), null and empty keys and values, for
#     each codec none|gzip|snappy|lz4|zstd; the consumed bytes are compared exactly through `-f` formats
#     (%K/%S print -1 for null and 0 for empty), and the stored segment is read back to check that every
#     batch kept the producer's codec (attributes & 7);
#   - start offsets -o beginning|end|-N|N|s@timestamp with -e, and kcat -Q (ListOffsets by timestamp);
#   - the librdkafka feature set negotiated from ApiVersions (`-d feature`), see features.py;
#   - all of it consumed again, byte-identical, after a SIGTERM restart.
# Prints "kcat: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
export PYTHONPATH=$REPO/compat-tests/lib
T=$(mktemp -d /tmp/gregor-kcat.XXXXXX)
trap 'broker_cleanup; rm -rf "$T"' EXIT

broker_start || { fail "broker starts"; summary kcat; exit 1; }
B=$BROKER
kc() { timeout 30 kcat -b "$B" "$@"; }

# ---- kcat -L before any topic --------------------------------------------------------------------------
kc -L >"$T/L.txt" 2>&1
check_eq "kcat -L: one broker" " 1 brokers:" "$(grep -m1 'brokers:' "$T/L.txt")"
check_eq "kcat -L: broker 1 at the listener, controller" "  broker 1 at $B (controller)" "$(grep -m1 '^  broker ' "$T/L.txt")"
check_eq "kcat -L: no user topics yet (internal __ topics aside)" "" \
    "$(grep '^  topic "' "$T/L.txt" | grep -v '^  topic "__' | head -3)"

# ---- produce and consume per codec ---------------------------------------------------------------------
long=$(python3 -c "print(''.join('line %04d of a compressible value; ' % i for i in range(60)))")
pad=$(python3 -c "print('abcdefgh' * 64)")
codec_num() { case $1 in none) echo 0 ;; gzip) echo 1 ;; snappy) echo 2 ;; lz4) echo 3 ;; zstd) echo 4 ;; esac; }
for z in none gzip snappy lz4 zstd; do
    t=kc-$z
    # Invocation A: -Z sends empty keys/values as NULL; headers h1="x", h2="" (empty), h3 (null), and a
    # 512-byte compressible header on every record so that librdkafka compresses every batch (it sends a
    # batch uncompressed when compressing does not make it smaller).
    printf 'k1:v1\nk2:\n:v3\nk4:%s\nk5:with spaces and \xc3\x85\xc3\x84\xc3\x96 utf-8\nk6:a:b:c\n' "$long" |
        kc -P -t "$t" -K: -Z -H h1=x -H h2= -H h3 -H "pad=$pad" -z "$z" -X linger.ms=200 -X acks=all 2>"$T/p-$z.err"
    check "kcat -P -z $z (with -Z and headers) exits 0" test $? -eq 0
    # Invocation B: no -Z, so the empty value and the empty key stay empty; no headers.
    printf 'k7:\n:v8\n' | kc -P -t "$t" -K: -H "pad=$pad" -z "$z" -X linger.ms=200 -X acks=all 2>>"$T/p-$z.err"
    check "kcat -P -z $z (no -Z) exits 0" test $? -eq 0
    kc -C -t "$t" -o beginning -e -Z -f '%p|%o|%K|%k|%S|%s|%h\n' >"$T/c-$z.txt" 2>"$T/c-$z.err"
    check "kcat -C -t $t -e exits 0" test $? -eq 0
    {
        echo "0|0|2|k1|2|v1|h1=x,h2=,h3=NULL,pad=$pad"
        echo "0|1|2|k2|-1|NULL|h1=x,h2=,h3=NULL,pad=$pad"
        echo "0|2|-1|NULL|2|v3|h1=x,h2=,h3=NULL,pad=$pad"
        echo "0|3|2|k4|${#long}|$long|h1=x,h2=,h3=NULL,pad=$pad"
        printf '0|4|2|k5|28|with spaces and \xc3\x85\xc3\x84\xc3\x96 utf-8|h1=x,h2=,h3=NULL,pad=%s\n' "$pad"
        echo "0|5|2|k6|5|a:b:c|h1=x,h2=,h3=NULL,pad=$pad"
        echo "0|6|2|k7|0|NULL|pad=$pad"
        echo "0|7|0|NULL|2|v8|pad=$pad"
    } >"$T/want-$z.txt"
    check "consumed bytes for -z $z are exact (keys, values, null/empty, headers)" cmp "$T/want-$z.txt" "$T/c-$z.txt"
    cmp -s "$T/want-$z.txt" "$T/c-$z.txt" || diff "$T/want-$z.txt" "$T/c-$z.txt" | head -6
    check "stored batches of $t kept codec $z ($(codec_num $z)), magic 2, CRC ok, 8 records" \
        python3 "$REPO/compat-tests/lib/segments.py" "$BROKER_DIR/data/$t-0" --codec "$(codec_num $z)" --records 8
done

# ---- kcat -L after the topics exist (JSON) -------------------------------------------------------------
kc -L -J >"$T/LJ.json" 2>/dev/null
check_eq "kcat -L -J: brokers, controller, user topics with leader 1, replicas [1], isr [1]" \
    "brokers=[(1, '$B')] controller=1 kc-gzip:[(0, 1, [1], [1])] kc-lz4:[(0, 1, [1], [1])] kc-none:[(0, 1, [1], [1])] kc-snappy:[(0, 1, [1], [1])] kc-zstd:[(0, 1, [1], [1])]" \
    "$(python3 - "$T/LJ.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
out = ['brokers=%s' % [(b['id'], b['name']) for b in d['brokers']], 'controller=%s' % d['controllerid']]
for t in sorted((t for t in d['topics'] if not t['topic'].startswith('__')), key=lambda t: t['topic']):
    out.append('%s:%s' % (t['topic'], [(p['partition'], p['leader'], [r['id'] for r in p['replicas']],
                                      [r['id'] for r in p['isrs']]) for p in t['partitions']]))
print(' '.join(out))
EOF
)"

# ---- start offsets ---------------------------------------------------------------------------------------
t=kc-offsets
printf 'm0\nm1\nm2\nm3\nm4\n' | kc -P -t $t -X acks=all 2>/dev/null
sleep 1.2
ts=$(date +%s%3N)
sleep 0.1
printf 'm5\nm6\nm7\nm8\nm9\n' | kc -P -t $t -X acks=all 2>/dev/null
consume() { kc -C -t $t -e -f '%s ' "$@" 2>"$T/o.err"; echo "rc=$?"; }
check_eq "kcat -o beginning -e" "m0 m1 m2 m3 m4 m5 m6 m7 m8 m9 rc=0" "$(consume -o beginning)"
check_eq "kcat -o end -e (nothing, exits 0)" "rc=0" "$(consume -o end)"
check_eq "kcat -e prints 'Reached end' at the high watermark" "% Reached end of topic $t [0] at offset 10: exiting" \
    "$(grep -m1 'Reached end' "$T/o.err")"
check_eq "kcat -o -3 -e (last three)" "m7 m8 m9 rc=0" "$(consume -o -3)"
check_eq "kcat -o 4 -e (absolute offset)" "m4 m5 m6 m7 m8 m9 rc=0" "$(consume -o 4)"
check_eq "kcat -o s@<ts> -e (first record at or after ts)" "m5 m6 m7 m8 m9 rc=0" "$(consume -o "s@$ts")"
check_eq "kcat -Q at ts" "$t [0] offset 5" "$(kc -Q -t "$t:0:$ts" 2>/dev/null)"
check_eq "kcat -Q at 0 (earliest timestamp)" "$t [0] offset 0" "$(kc -Q -t "$t:0:0" 2>/dev/null)"
check_eq "kcat -Q after every record (C15)" "$t [0] offset -1" "$(kc -Q -t "$t:0:$(($(date +%s%3N) + 3600000))" 2>/dev/null)"

# ---- negotiated features -------------------------------------------------------------------------------
kc -L -d feature >/dev/null 2>"$T/feat.log"
BROKER=$B python3 "$here/features.py" "$T/feat.log" >"$T/feat.txt"
cat "$T/feat.txt" | sed 's/^/  /'
check_eq "librdkafka 2.0.2 enables exactly the expected features" \
    "$(sed -n 's/^expected: //p' "$T/feat.txt")" "$(sed -n 's/^enabled: //p' "$T/feat.txt")"
check "base features ApiVersion,BrokerGroupCoordinator,LZ4,MsgVer2,OffsetTime,ZSTD all on" \
    python3 -c "import sys; s=set(sys.argv[1].split(',')); sys.exit(0 if {'ApiVersion','MsgVer2','OffsetTime','ZSTD','LZ4','BrokerGroupCoordinator'} <= s else 1)" \
    "$(sed -n 's/^enabled: //p' "$T/feat.txt")"
check "IdempotentProducer on (InitProducerId v0 advertised)" \
    python3 -c "import sys; sys.exit(0 if 'IdempotentProducer' in sys.argv[1].split(',') else 1)" \
    "$(sed -n 's/^enabled: //p' "$T/feat.txt")"
check_eq "MsgVer1 and ThrottleTime off" "True" "$(sed -n 's/^msgver1_throttle_off: //p' "$T/feat.txt")"

# ---- SIGTERM restart: the same bytes come back -------------------------------------------------------
broker_restart || fail "broker restarts after SIGTERM"
B=$BROKER
check "broker closed its log directory cleanly at SIGTERM" grep -q "storage: closed .* (clean)" "$BROKER_DIR/broker.log"
for z in none gzip snappy lz4 zstd; do
    kc -C -t "kc-$z" -o beginning -e -Z -f '%p|%o|%K|%k|%S|%s|%h\n' >"$T/r-$z.txt" 2>/dev/null
    check "after restart kc-$z consumes byte-identical" cmp "$T/c-$z.txt" "$T/r-$z.txt"
done
check_eq "after restart kcat -o beginning on $t" "m0 m1 m2 m3 m4 m5 m6 m7 m8 m9 rc=0" "$(consume -o beginning)"
check_eq "after restart kcat -Q at ts" "$t [0] offset 5" "$(kc -Q -t "$t:0:$ts" 2>/dev/null)"
printf 'n0\n' | kc -P -t $t -X acks=all 2>/dev/null
check_eq "after restart a new record gets offset 10" "n0 rc=0" "$(consume -o 10)"
check "the restart found the clean-shutdown marker" grep -q "storage: opened .* (clean shutdown)" "$BROKER_DIR/broker.log"

summary kcat
