#!/usr/bin/env bash
# kcat_flow.sh BOOTSTRAP NAME: the kcat (librdkafka) flow used to capture golden frames: Metadata (-L),
# two records to partition 0 of golden-NAME per compression codec (none, gzip, snappy, lz4, zstd; one kcat
# run, so one batch, each; the topic is auto-created by Metadata), consume them back (-C, Fetch and
# ListOffsets), look up offsets by time (-Q), and a balanced consumer in group golden-NAME-group (-G:
# FindCoordinator, JoinGroup, SyncGroup, OffsetFetch, Heartbeat, OffsetCommit, LeaveGroup).
set -u
b=$1; name=$2; t=golden-$name; x=(-X client.id=golden-$name)
kcat -b "$b" "${x[@]}" -L -t "$t" >/dev/null 2>&1   # auto-creates the topic
sleep 1
filler=$(printf ' gregor golden frame%.0s' 1 2 3 4 5 6 7 8)  # compressible: librdkafka sends
for z in none gzip snappy lz4 zstd; do                          # uncompressed when compressing does not help
  printf 'k0:%s value 0%s\nk1:%s value 1%s\n' "$z" "$filler" "$z" "$filler" | kcat -b "$b" "${x[@]}" -P -t "$t" -p 0 -K: -z "$z" \
    -H h=x -X linger.ms=50
done
kcat -b "$b" "${x[@]}" -C -t "$t" -p 0 -o beginning -e -f '%k=%s\n'
kcat -b "$b" "${x[@]}" -Q -t "$t:0:-1"
timeout 25 kcat -b "$b" "${x[@]}" -G "golden-$name-group" -o beginning -e -X enable.auto.commit=true \
  -X auto.commit.interval.ms=500 "$t" -f '%k=%s\n'
echo "kcat exit $?"
