#!/usr/bin/env bash
# e2e/run.sh: end to end with librdkafka and real data.
#   1. e2e_client.c (compiled here with -lrdkafka) creates a 4-partition topic with rd_kafka_CreateTopics,
#      produces E2E_RECORDS (default 1,000,000) records of 100 bytes with acks=-1, linger.ms=5, and
#      consumes them back with assign() (no group), checking partition, offset order and every payload;
#      the stored segments hold exactly that many records.
#   2. Real input: the wamerican word list (/usr/share/dict/words), one word per record through kcat,
#      consumed back byte-identical.
#   3. Both again after a SIGTERM restart.
#   4. kill -9 of the broker during an acks=-1 produce (the client logs every acknowledged record): after a
#      restart every acknowledged record is at its offset with its payload, in order (duplicates allowed).
#      E2E_CRASH_ROUNDS (default 1) repeats this step.
# Prints "e2e: N passed, N failed" and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"
N=${E2E_RECORDS:-1000000}
ROUNDS=${E2E_CRASH_ROUNDS:-1}
WORDS=/usr/share/dict/words
T=$(mktemp -d /tmp/gregor-e2e.XXXXXX)
CLIENT_PID=
trap '[ -n "$CLIENT_PID" ] && kill -9 "$CLIENT_PID" 2>/dev/null; broker_cleanup; rm -rf "$T"' EXIT

check "compile e2e_client.c against librdkafka" cc -O2 -Wall -Wextra -o "$T/e2e_client" "$here/e2e_client.c" -lrdkafka
[ -x "$T/e2e_client" ] || { summary e2e; exit 1; }
C=$T/e2e_client
broker_start || { fail "broker starts"; summary e2e; exit 1; }
B=$BROKER
elapsed() { echo $(( ($(date +%s%N) - $1) / 1000000 ))ms; }

# ---- 1. N records, 4 partitions ---------------------------------------------------------------------
check "rd_kafka_CreateTopics e2e-seq with 4 partitions" "$C" create "$B" e2e-seq 4
t0=$(date +%s%N)
check "produce $N x 100 B, acks=-1, all acknowledged" "$C" produce "$B" e2e-seq 4 "$N" 100
echo "  ..   produce took $(elapsed "$t0")"
t0=$(date +%s%N)
check "consume $N with assign(): every partition, offset and payload" "$C" verify "$B" e2e-seq 4 "$N" 100
echo "  ..   verify took $(elapsed "$t0")"
for p in 0 1 2 3; do
    want=$(( N / 4 + (p < N % 4 ? 1 : 0) ))
    check "segments of e2e-seq-$p hold $want records (magic 2, CRC ok)" \
        python3 "$REPO/compat-tests/lib/segments.py" "$BROKER_DIR/data/e2e-seq-$p" --records "$want" --codec 0 --quick
done

# ---- 2. real input: the word list --------------------------------------------------------------------
words_roundtrip() {
    timeout 60 kcat -C -b "$B" -t e2e-words -o beginning -e -f '%s\n' >"$T/words.out" 2>"$T/words.err"
    cmp "$WORDS" "$T/words.out"
}
if [ -r "$WORDS" ]; then
    timeout 60 kcat -P -b "$B" -t e2e-words -X acks=all <"$WORDS"
    check "kcat -P the word list ($(wc -l <"$WORDS") lines) exits 0" test $? -eq 0
    check "word list consumed back byte-identical" words_roundtrip
else
    fail "wamerican word list present at $WORDS"
fi

# ---- 3. SIGTERM restart -------------------------------------------------------------------------------
broker_restart || fail "broker restarts after SIGTERM"
B=$BROKER
check "after SIGTERM restart: all $N records verified again" "$C" verify "$B" e2e-seq 4 "$N" 100
[ -r "$WORDS" ] && check "after SIGTERM restart: word list byte-identical" words_roundtrip

# ---- 4. kill -9 during an acks=-1 produce ---------------------------------------------------------------
crash_round() {
    local r=$1 t=e2e-crash-$1 lines
    check "round $r: create $t" "$C" create "$B" "$t" 4
    "$C" produce "$B" "$t" 4 100000000 100 "$T/acks-$r.log" >"$T/prod-$r.out" 2>&1 &
    CLIENT_PID=$!
    for _ in $(seq 1 200); do
        lines=$(wc -l 2>/dev/null <"$T/acks-$r.log" || echo 0)
        [ "$lines" -ge 200000 ] && break
        sleep 0.05
    done
    broker_stop KILL
    sleep 0.3
    kill -9 "$CLIENT_PID" 2>/dev/null
    wait "$CLIENT_PID" 2>/dev/null
    CLIENT_PID=
    echo "  ..   round $r: $(wc -l <"$T/acks-$r.log") records acknowledged before kill -9"
    broker_restart || { fail "round $r: broker restarts after kill -9"; return; }
    B=$BROKER
    check "round $r: dump every partition after the restart" "$C" dump "$B" "$t" 4 "$T/dump-$r.txt"
    check "round $r: every acknowledged record is at its offset with its payload, in order" \
        python3 - "$T/acks-$r.log" "$T/dump-$r.txt" <<'EOF'
import sys
acks, stored = [], {}
with open(sys.argv[1]) as f:
    for line in f:
        if line.endswith('\n'):
            p, o, s = map(int, line.split())
            acks.append((p, o, s))
with open(sys.argv[2]) as f:
    for line in f:
        p, o, s = map(int, line.split())
        stored[(p, o)] = s
if not acks:
    sys.exit('no acknowledged records: the kill came too early to test anything')
missing = [(p, o, s) for p, o, s in acks if stored.get((p, o)) != s]
by_part = {}
for p, o, s in sorted(acks):
    by_part.setdefault(p, []).append(s)
disorder = [p for p, seqs in by_part.items() if seqs != sorted(seqs)]
print(f'{len(acks)} acknowledged, {len(stored)} stored, {len(missing)} missing, partitions out of order: {disorder}')
for m in missing[:5]:
    print(f'  missing: partition {m[0]} offset {m[1]} seq {m[2]} (stored: {stored.get((m[0], m[1]))})')
sys.exit(1 if missing or disorder else 0)
EOF
}
for r in $(seq 1 "$ROUNDS"); do crash_round "$r"; done
check "after the crash rounds: e2e-seq still verifies" "$C" verify "$B" e2e-seq 4 "$N" 100

summary e2e
