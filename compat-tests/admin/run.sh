#!/usr/bin/env bash
# admin/run.sh: the admin APIs (DescribeCluster, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
# CreatePartitions, DeleteRecords, OffsetForLeaderEpoch, DescribeLogDirs, AlterReplicaLogDirs, DeleteTopics)
# driven by real clients: kafka-python 3 and confluent-kafka (admin/run.py), and Apache Kafka's own
# kafka-configs.sh (topics, dynamic broker configs per broker and cluster-wide, broker loggers),
# kafka-topics.sh and kafka-log-dirs.sh when compat-tests/.cache/kafka-4.4.0 holds them
# (compat-tests/kafka-dist/get-kafka.sh builds it); with them also the Java console producer with its default
# enable.idempotence=true, checked with kafka-transactions.sh describe-producers (DescribeProducers).
#
#   run.sh                       Gregor (GREGOR_BIN, default build/bin/gregor) on a free loopback port with a
#                                fresh data dir and message.max.bytes=2000000 (a static broker value); then a
#                                restart (configs, partition counts, deletions, DeleteRecords persist) and a
#                                restart with delete.topic.enable=false; then a new broker with
#                                GREGOR_NET_THREAD_AUDIT=1 for admin/net_thread.py (topic operations make no
#                                blocking call on the network thread; answer times printed as "figure:")
#   run.sh --bootstrap H:P       the Python part only, against a running broker (e.g. Apache Kafka 4.4.0 from
#                                kafka-dist/start-kafka.sh): the same checks, Kafka's answers where Gregor
#                                deliberately differs
#   run.sh --configs-golden      only the configuration golden check (admin/configs_golden.sh; also the last
#                                part of a full run): kafka-configs.sh --describe --all for the broker, the
#                                broker default and two topics, and a raw DescribeConfigs dump, each compared
#                                with the files in admin/golden/ (GOLDEN_UPDATE=1 rewrites them)
# Installs kafka-python and confluent-kafka with pip when they are missing.
# Prints "admin: N passed, N failed" last and exits non-zero on failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/broker.sh"

PY_PKGS=('kafka-python==3.0.12' 'confluent-kafka==2.16.1') # run.py uses kafka-python 3's request classes
if ! python3 -c 'import kafka, confluent_kafka; assert kafka.__version__.startswith("3.")' 2>/dev/null; then
    python3 -m pip install -q "${PY_PKGS[@]}" >&2 ||
        python3 -m pip install -q --break-system-packages "${PY_PKGS[@]}" >&2 || # Debian's PEP 668 python
        { fail "pip install ${PY_PKGS[*]} (needs python3-pip)"; summary admin; exit 1; }
fi

KAFKA_BIN=$REPO/compat-tests/.cache/kafka-4.4.0/bin
source "$here/configs_golden.sh"
have_kafka_tools() { [ -x "$KAFKA_BIN/kafka-configs.sh" ] && command -v java >/dev/null; }

if [ "${1:-}" == --configs-golden ]; then
    trap broker_cleanup EXIT
    if have_kafka_tools; then configs_golden; else fail "configs golden: needs compat-tests/kafka-dist/get-kafka.sh"; fi
    summary admin
    exit
fi

if [ "${1:-}" == --bootstrap ]; then
    BROKER=$2 BROKER_DIR= run_py "admin/run.py" "$here/run.py" main
    summary admin
    exit
fi

trap broker_cleanup EXIT
broker_start --override message.max.bytes=2000000 || { fail "broker starts"; summary admin; exit 1; }
run_py "admin/run.py" "$here/run.py" main

if have_kafka_tools; then
    tool() { timeout 60 "$KAFKA_BIN/$1" --bootstrap-server "$BROKER" "${@:2}" 2>&1; }
    out=$(tool kafka-configs.sh --describe --entity-type topics --entity-name adm-b --all)
    # run.py's main phase left log.retention.ms=7200000 as this broker's dynamic config: Kafka's synonym order
    check "kafka-configs.sh --describe --all: dynamic retention.ms with its synonyms" \
        grep -q 'retention.ms=2400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=2400000, DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}' <<<"$out"
    check "kafka-configs.sh --describe --all: 37 topic configs" test "$(grep -c 'sensitive=' <<<"$out")" -eq 37
    out=$(tool kafka-configs.sh --alter --entity-type topics --entity-name adm-b --add-config segment.bytes=2000000)
    check "kafka-configs.sh --alter --add-config" grep -q 'Completed updating config' <<<"$out"
    out=$(tool kafka-configs.sh --describe --entity-type topics --entity-name adm-b)
    check "kafka-configs.sh --describe: the new override" grep -q 'segment.bytes=2000000' <<<"$out"
    out=$(tool kafka-configs.sh --alter --entity-type topics --entity-name adm-b --add-config cleanup.policy=compact)
    check "kafka-configs.sh --alter cleanup.policy=compact is accepted (log compaction is built)" \
        grep -q 'Completed updating config' <<<"$out"
    out=$(tool kafka-configs.sh --alter --entity-type topics --entity-name adm-b --add-config cleanup.policy=delete)
    check "kafka-configs.sh --alter cleanup.policy=delete back" grep -q 'Completed updating config' <<<"$out"
    out=$(tool kafka-configs.sh --alter --entity-type topics --entity-name adm-b --delete-config segment.bytes)
    check "kafka-configs.sh --alter --delete-config" grep -q 'Completed updating config' <<<"$out"
    out=$(tool kafka-topics.sh --alter --topic adm-b --partitions 2)
    check "kafka-topics.sh --alter --partitions" test -z "$(grep -i error <<<"$out")"
    out=$(tool kafka-topics.sh --describe --topic adm-b)
    check "kafka-topics.sh --describe: 2 partitions" grep -q 'PartitionCount: 2' <<<"$out"
    out=$(tool kafka-log-dirs.sh --describe --topic-list adm-a)
    check "kafka-log-dirs.sh --describe: the data dir" grep -q "\"logDir\":\"$(realpath "$BROKER_DIR/data")\"" <<<"$out"
    out=$(tool kafka-topics.sh --delete --topic adm-del7)
    check "kafka-topics.sh --delete" test -z "$(grep -i error <<<"$out")"
    out=$(tool kafka-topics.sh --create --topic adm-del7 --partitions 3)
    check "kafka-topics.sh --create again (restart phase expects adm-del7 with 3 partitions)" grep -q 'Created topic' <<<"$out"
    # Dynamic broker configs (issue 17 item 8): per broker and the cluster-wide default, as Kafka 4.x answers.
    out=$(tool kafka-configs.sh --alter --entity-type brokers --entity-name 1 --add-config log.flush.interval.messages=50000)
    check "kafka-configs.sh --alter --entity-type brokers --entity-name 1 --add-config log.flush.interval.messages" \
        grep -q 'Completed updating config for broker 1' <<<"$out"
    out=$(tool kafka-configs.sh --alter --entity-type brokers --entity-default --add-config log.cleaner.delete.retention.ms=3600000)
    check "kafka-configs.sh --alter --entity-type brokers --entity-default --add-config log.cleaner.delete.retention.ms" \
        grep -q 'Completed updating default config for brokers in the cluster' <<<"$out"
    out=$(tool kafka-configs.sh --describe --entity-type brokers --entity-name 1)
    check "kafka-configs.sh --describe broker 1: the per-broker value, DYNAMIC_BROKER_CONFIG" \
        grep -q 'log.flush.interval.messages=50000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.flush.interval.messages=50000, DEFAULT_CONFIG:log.flush.interval.messages=9223372036854775807}' <<<"$out"
    out=$(tool kafka-configs.sh --describe --entity-type brokers --entity-default)
    check "kafka-configs.sh --describe --entity-default: DYNAMIC_DEFAULT_BROKER_CONFIG" \
        grep -q 'log.cleaner.delete.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.delete.retention.ms=3600000}' <<<"$out"
    out=$(tool kafka-configs.sh --describe --entity-type topics --entity-name adm-a --all)
    check "kafka-configs.sh --describe topic --all: delete.retention.ms inherited from the default level" \
        grep -q ' delete.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.delete.retention.ms=3600000, DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}' <<<"$out"
    out=$(tool kafka-configs.sh --alter --entity-type brokers --entity-name 1 --add-config num.partitions=3)
    check "kafka-configs.sh --alter broker num.partitions: Kafka's refusal" \
        grep -q 'Cannot update these configs dynamically: \[num.partitions\]' <<<"$out"
    out=$(tool kafka-configs.sh --alter --entity-type broker-loggers --entity-name 1 --add-config root=WARN)
    check "kafka-configs.sh --alter --entity-type broker-loggers root=WARN" grep -q 'Completed updating config' <<<"$out"
    out=$(tool kafka-configs.sh --describe --entity-type broker-loggers --entity-name 1)
    check "kafka-configs.sh --describe broker-loggers: root=WARN" grep -q 'root=WARN' <<<"$out"
    tool kafka-configs.sh --alter --entity-type broker-loggers --entity-name 1 --add-config root=INFO >/dev/null
    out=$(tool kafka-configs.sh --alter --entity-type brokers --entity-name 1 --delete-config log.flush.interval.messages)
    check "kafka-configs.sh --alter broker --delete-config" grep -q 'Completed updating config for broker 1' <<<"$out"
    out=$(tool kafka-configs.sh --alter --entity-type brokers --entity-default --delete-config log.cleaner.delete.retention.ms)
    check "kafka-configs.sh --alter --entity-default --delete-config" grep -q 'Completed updating default config' <<<"$out"
    out=$(tool kafka-topics.sh --alter --topic adm-b --partitions 1)
    check "kafka-topics.sh --alter --partitions 1: a decrease is refused" grep -q 'would not be an increase' <<<"$out"
    # The Java producer's defaults (enable.idempotence=true, acks=all): InitProducerId, then sequences 0..299.
    seq 1 300 | timeout 90 "$KAFKA_BIN/kafka-console-producer.sh" --bootstrap-server "$BROKER" --topic adm-idem >/dev/null 2>&1
    out=$(tool kafka-transactions.sh describe-producers --topic adm-idem --partition 0)
    check "kafka-console-producer.sh (idempotent by default), then kafka-transactions.sh describe-producers: one producer, epoch 0, coordinator epoch -1, last sequence 299" \
        awk 'NR == 2 && $2 == 0 && $3 == -1 && $4 == 299 { ok = 1 } END { exit !(ok && NR == 2) }' <<<"$out"
else
    echo "  skip Kafka's command-line tools: run compat-tests/kafka-dist/get-kafka.sh to include them"
fi

# Finalized features on one node (issue #25): transaction.version at gregor.transaction.version (default 2) with
# the epoch kept in the log directory's gregor-features file, raised only when the level changes; a stored level
# changed at start only by a setting given explicitly, never by the default (the upgrade rule); then
# UpdateFeatures through kafka-features.sh and by raw requests (admin/features.py).
features() { tool kafka-features.sh describe | grep -o 'Feature: transaction.version.*'; }
if have_kafka_tools; then
    f1=$(features)
    check "kafka-features.sh describe: transaction.version supported 0-2, finalized 2 at epoch 0 (new log directory, the default)" \
        grep -Eq 'SupportedMinVersion: 0\s+SupportedMaxVersion: 2\s+FinalizedVersionLevel: 2\s+Epoch: 0' <<<"$f1"
    check "the gregor-features file of a new log directory: level 2, epoch 0, setting 2" \
        grep -qz '^transaction.version=2.epoch=0.setting=2.$' "$BROKER_DIR/data/gregor-features"
    broker_restart --override gregor.transaction.version=0 || fail "broker restarts with gregor.transaction.version=0"
    f2=$(features)
    check "restarted with gregor.transaction.version=0: not finalized (level 0 is not listed), epoch 1" \
        grep -Eq 'FinalizedVersionLevel: 0\s+Epoch: 1' <<<"$f2"
    check "the gregor-features file holds level 0 and epoch 1" grep -qz 'transaction.version=0.epoch=1' "$BROKER_DIR/data/gregor-features"
fi
broker_restart --override message.max.bytes=2000000 || fail "broker restarts"
run_py "admin/run.py restarted" "$here/run.py" restarted
if have_kafka_tools; then
    f3=$(features)
    check "restarted with the setting not given: the default 2 does not override the stored level, finalized 0 at epoch 1" \
        grep -Eq 'FinalizedVersionLevel: 0\s+Epoch: 1' <<<"$f3"
    broker_restart --override gregor.transaction.version=2 || fail "broker restarts with gregor.transaction.version=2"
    f4=$(features)
    check "restarted with gregor.transaction.version=2 given (it differs from the recorded 0): finalized 2 at epoch 2" \
        grep -Eq 'SupportedMaxVersion: 2\s+FinalizedVersionLevel: 2\s+Epoch: 2' <<<"$f4"
fi
# UpdateFeatures (issue #25): kafka-features.sh upgrade/downgrade, each answer and the level and epoch after,
# counted from the level L0 (above 0) and epoch E0 the broker runs at now
if have_kafka_tools; then
    f5=$(features)
    fmax=$(grep -oE 'SupportedMaxVersion: [0-9]+' <<<"$f5" | grep -oE '[0-9]+$')
    l0=$(grep -oE 'FinalizedVersionLevel: [0-9]+' <<<"$f5" | grep -oE '[0-9]+$')
    e0=$(grep -oE 'Epoch: [0-9]+' <<<"$f5" | grep -oE '[0-9]+$')
    at() { grep -Eq "FinalizedVersionLevel: $1\s+Epoch: $2(\s|\$)" <<<"$(features)"; }
    out=$(tool kafka-features.sh downgrade --feature transaction.version=0 --dry-run)
    check "kafka-features.sh downgrade --dry-run: validated" grep -q 'transaction.version can be downgraded to 0.' <<<"$out"
    check "--dry-run changed nothing: finalized $l0 at epoch $e0" at "$l0" "$e0"
    out=$(tool kafka-features.sh downgrade --feature transaction.version=0)
    check "kafka-features.sh downgrade --feature transaction.version=0" grep -q 'transaction.version was downgraded to 0.' <<<"$out"
    check "describe: finalized 0 at epoch E0 + 1" at 0 $((e0 + 1))
    check "the gregor-features file: level 0, epoch E0 + 1, the setting seen at start" \
        grep -qz "^transaction.version=0.epoch=$((e0 + 1)).setting=[0-9]*.\$" "$BROKER_DIR/data/gregor-features"
    out=$(tool kafka-features.sh downgrade --feature transaction.version=1)
    check "downgrade to a higher level: Kafka's refusal" grep -q "Could not downgrade transaction.version to 1. The update failed for all features since the following feature had an error: Invalid update version 1 for feature transaction.version. Can't downgrade to a newer version." <<<"$out"
    out=$(tool kafka-features.sh upgrade --feature transaction.version=$((fmax + 1)))
    check "upgrade above the supported max: refused" grep -q "Invalid update version $((fmax + 1)) for feature transaction.version. Local controller 1 only supports versions 0-$fmax" <<<"$out"
    out=$(tool kafka-features.sh upgrade --feature no.such.feature=1)
    check "upgrade of an unknown feature: refused" grep -q 'Could not upgrade no.such.feature to 1. .*Local controller 1 does not support this feature.' <<<"$out"
    check "the refusals changed nothing: finalized 0 at epoch E0 + 1" at 0 $((e0 + 1))
    out=$(tool kafka-features.sh upgrade --feature transaction.version=1)
    check "kafka-features.sh upgrade --feature transaction.version=1" grep -q 'transaction.version was upgraded to 1.' <<<"$out"
    check "describe: finalized 1 at epoch E0 + 2" at 1 $((e0 + 2))
    out=$(tool kafka-features.sh downgrade --unsafe --feature transaction.version=0)
    check "kafka-features.sh downgrade --unsafe" grep -q 'transaction.version was downgraded to 0.' <<<"$out"
    seen=$(sed -n 's/^setting=//p' "$BROKER_DIR/data/gregor-features")
    broker_restart --override message.max.bytes=2000000 --override "gregor.transaction.version=$seen" ||
        fail "broker restarts"
    check "a restart with the setting it last started with keeps the level UpdateFeatures set: finalized 0 at epoch E0 + 3" \
        at 0 $((e0 + 3))
fi
run_py "admin/features.py" "$here/features.py" # UpdateFeatures by raw requests; ends at level 1
if have_kafka_tools; then
    check "back at level 1 for what follows" grep -Eq 'FinalizedVersionLevel: 1\s+Epoch: [0-9]+' <<<"$(features)"
fi
# the upgrade from a build whose default was 1: its gregor-features file (level 1, setting 1) under a broker at
# the default 2, the setting not given: level 1 and its epoch stand, the file is not rewritten
broker_stop TERM
printf 'transaction.version=1\nepoch=9\nsetting=1\n' >"$BROKER_DIR/data/gregor-features"
broker_restart --override delete.topic.enable=false || fail "broker restarts with delete.topic.enable=false"
if have_kafka_tools; then
    check "a log directory of a build whose default was 1, started at the default 2: finalized 1 at epoch 9 stands" \
        grep -Eq 'FinalizedVersionLevel: 1\s+Epoch: 9(\s|$)' <<<"$(features)"
fi
check "... and its gregor-features file is left as it was" \
    grep -qz '^transaction.version=1.epoch=9.setting=1.$' "$BROKER_DIR/data/gregor-features"
# a log directory from before the file existed (meta.properties there, no gregor-features): level 1 too, recorded
broker_stop TERM
rm -f "$BROKER_DIR/data/gregor-features"
broker_restart --override delete.topic.enable=false || fail "broker restarts with delete.topic.enable=false"
if have_kafka_tools; then
    check "a log directory without gregor-features, started at the default 2: finalized 1 at epoch 0" \
        grep -Eq 'FinalizedVersionLevel: 1\s+Epoch: 0(\s|$)' <<<"$(features)"
fi
check "... recorded as level 1, epoch 0, setting 1" \
    grep -qz '^transaction.version=1.epoch=0.setting=1.$' "$BROKER_DIR/data/gregor-features"
run_py "admin/run.py nodelete" "$here/run.py" nodelete
check "broker logged no assertion or crash" bash -c "! grep -Eiq 'assert|abort|sanitizer' '$BROKER_DIR/broker.log'"

# Topic metadata operations keep the network thread free (admin/net_thread.py): a new broker with the
# network-thread audit on (GREGOR_NET_THREAD_AUDIT=1, README), so that __consumer_offsets is created lazily.
broker_stop
rm -rf "$BROKER_DIR"
BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
saved_audit=${GREGOR_NET_THREAD_AUDIT-} # compat-tests/run.sh sets a file: the brokers after this one keep it
export GREGOR_NET_THREAD_AUDIT=1
broker_start || fail "broker starts with GREGOR_NET_THREAD_AUDIT=1"
if [ -n "$saved_audit" ]; then export GREGOR_NET_THREAD_AUDIT=$saved_audit; else unset GREGOR_NET_THREAD_AUDIT; fi
run_py "admin/net_thread.py" "$here/net_thread.py"
broker_stop TERM
check "audit broker closed cleanly after the topic operations" grep -q "storage: closed .* (clean)" "$BROKER_DIR/broker.log"
rm -rf "$BROKER_DIR"

# What DescribeConfigs answers must not change while the configuration code is reshaped (issue 18).
if have_kafka_tools; then
    configs_golden
else
    echo "  skip the configuration golden check: run compat-tests/kafka-dist/get-kafka.sh to include it"
fi
summary admin
