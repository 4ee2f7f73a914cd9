#!/usr/bin/env bash
# txn_kcat_flow.sh BOOTSTRAP NAME: kcat (librdkafka) producing two records to partition 0 of golden-NAME
# (auto-created by Metadata) in one committed transaction (kcat with transactional.id: init, begin, produce,
# commit), for the transaction APIs' golden frames.
set -u
b=$1; name=$2; t=golden-$name
kcat -b "$b" -X client.id=golden-$name -L -t "$t" >/dev/null 2>&1
sleep 1
printf 'k0:txn value 0\nk1:txn value 1\n' | kcat -b "$b" -X client.id=golden-$name -X transactional.id=golden-$name \
  -P -t "$t" -p 0 -K:
echo "kcat exit $?"
