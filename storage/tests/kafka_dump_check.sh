#!/bin/sh
# kafka_dump_check.sh: Apache Kafka's own DumpLogSegments (kafka-tools 4.4.0 from the local Maven
# repository, which compat-tests/kafka-dist/get-kafka.sh fills) must read the segments and indexes Gregor writes. Runs dump_fixture (60 batches, five
# codecs, producer ids, one LogAppendTime batch, several segments), dumps every .log with
# --deep-iteration --print-data-log and every .index/.timeindex, and checks what Kafka printed; then the
# same for a segment the cleaner rewrote (topic cdump: offset gaps, delete horizons, emptied batches).
# Exit 77 (ctest: skipped) when java or the jars are missing. Usage: kafka_dump_check.sh <dump_fixture>
set -u
FIXTURE=$1
M=${HOME}/.m2/repository
command -v java >/dev/null 2>&1 || { echo "java not found: skipped"; exit 77; }
KV=4.4.0
DUMP=org.apache.kafka.tools.DumpLogSegments # kafka.tools.DumpLogSegments (kafka_2.13) until 4.1
[ -f "$M/org/apache/kafka/kafka-tools/$KV/kafka-tools-$KV.jar" ] || { echo "kafka-tools $KV jar not found: skipped"; exit 77; }
CP=$(find "$M/org/apache/kafka" -name "*-$KV.jar" | tr '\n' ':')$(find "$M/org/scala-lang" "$M/net/sf/jopt-simple" \
    "$M/org/slf4j" "$M/org/apache/logging/log4j" "$M/org/lz4" "$M/at/yawk/lz4" "$M/org/xerial" "$M/com/github/luben" \
    "$M/com/fasterxml" -name "*.jar" 2>/dev/null | tr '\n' ':')

DIR=$(mktemp -d /tmp/gr-kafka-dump-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
PASS=0
FAIL=0
check() { # check <description> <condition result 0/1>
    if [ "$2" -eq 0 ]; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)); echo "FAIL: $1"; fi
}

SUMMARY=$("$FIXTURE" "$DIR/logs" 2>/dev/null)
check "fixture ran" $?
RECORDS=$(echo "$SUMMARY" | head -1 | awk '{print $4}')
KEPT=$(echo "$SUMMARY" | awk '/^compacted/ {print $3}')
PART="$DIR/logs/dump-0"
LOGS=$(ls "$PART"/*.log | paste -sd, -)
OUT="$DIR/log.txt"
java -cp "$CP" "$DUMP" --deep-iteration --print-data-log --files "$LOGS" >"$OUT" 2>&1
check "DumpLogSegments on .log exits 0" $?

N=$(grep -c '^baseOffset:' "$OUT")
[ "$N" -eq 60 ]; check "60 batches (got $N)" $?
N=$(grep -c 'isvalid: true' "$OUT")
[ "$N" -eq 60 ]; check "60 batches with isvalid: true (got $N)" $?
N=$(grep -c '^| offset:' "$OUT")
[ "$N" -eq "$RECORDS" ]; check "$RECORDS records (got $N)" $?
# Record offsets are exactly 0..n-1, in order.
grep '^| offset:' "$OUT" | awk '{ if ($3 != NR - 1) { bad = 1 } } END { exit bad }'
check "record offsets contiguous from 0" $?
# Batch i carries payloads "i:0".."i:k" in order.
grep '^| offset:' "$OUT" | sed 's/.*payload: //' | awk -F: 'NR == 1 { if ($1 != 0 || $2 != 0) bad = 1 }
    NR > 1 { if (($1 == prev && $2 != last + 1) || ($1 != prev && ($1 != prev + 1 || $2 != 0))) bad = 1 }
    { prev = $1; last = $2 } END { exit bad }'
check "payloads in batch order" $?
for codec in none gzip snappy lz4 zstd; do
    grep -q "compresscodec: $codec " "$OUT"; check "a $codec batch" $?
done
N=$(grep -c 'LogAppendTime: 1800000000000' "$OUT")
[ "$N" -ge 1 ]; check "the LogAppendTime batch is seen as LogAppendTime" $?
N=$(grep -c 'producerId: 400[01] producerEpoch: 3' "$OUT")
[ "$N" -eq 20 ]; check "20 idempotent batches (got $N)" $?
! grep -qiE 'exception|corrupt|error' "$OUT"; check "no exception or corruption reported" $?

IDX=$(ls "$PART"/*.index "$PART"/*.timeindex | paste -sd, -)
OUT2="$DIR/idx.txt"
java -cp "$CP" "$DUMP" --files "$IDX" >"$OUT2" 2>&1
check "DumpLogSegments on indexes exits 0" $?
N=$(grep -c '^offset: [0-9]* position: [0-9]*' "$OUT2")
[ "$N" -gt 10 ]; check "offset index entries read (got $N)" $?
N=$(grep -c '^timestamp: [0-9]* offset: [0-9]*' "$OUT2")
[ "$N" -gt 5 ]; check "time index entries read (got $N)" $?
! grep -qiE 'mismatch|exception|corrupt|error' "$OUT2"; check "no index mismatch reported" $?

# A cleaned segment (log compaction, storage/cleaner.c).
CLEANED="$DIR/logs/cdump-0/00000000000000000000.log"
OUT3="$DIR/cleaned.txt"
java -cp "$CP" "$DUMP" --deep-iteration --print-data-log --files "$CLEANED" >"$OUT3" 2>&1
check "DumpLogSegments on a cleaned segment exits 0" $?
N=$(grep -c '^baseOffset:' "$OUT3")
[ "$N" -ge 1 ]; check "cleaned segment: batches read (got $N)" $?
[ "$(grep -c 'isvalid: true' "$OUT3")" -eq "$N" ]; check "cleaned segment: every batch isvalid: true" $?
N=$(grep -c '^| offset:' "$OUT3")
[ "$N" -eq "${KEPT:--1}" ]; check "cleaned segment: the $KEPT records the cleaner kept (got $N)" $?
grep '^| offset:' "$OUT3" | awk '{ if (NR > 1 && $3 <= prev) bad = 1; prev = $3 } END { exit bad }'
check "cleaned segment: record offsets strictly increasing (gaps allowed)" $?
grep -q 'deleteHorizonMs: OptionalLong\[1800086400000\]' "$OUT3"
check "cleaned segment: a kept tombstone's batch carries the delete horizon Kafka reads" $?
! grep -qiE 'exception|corrupt|error' "$OUT3"; check "cleaned segment: no exception or corruption reported" $?

if [ "$FAIL" -ne 0 ]; then
    echo "--- Kafka output (first lines):"
    head -20 "$OUT" "$OUT2" "$OUT3"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
