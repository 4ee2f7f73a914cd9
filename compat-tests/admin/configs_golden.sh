# admin/configs_golden.sh: sourced by admin/run.sh. The configuration golden check (issue 18): what
# DescribeConfigs answers for the broker, the cluster-wide broker default and two topics must not change
# while the configuration code is reshaped. A fresh broker with two static overrides
# (message.max.bytes=2000000, log.retention.hours=100), a dynamic per-broker config
# (log.flush.interval.messages, log.retention.ms) and a dynamic cluster default
# (log.cleaner.delete.retention.ms); topic gold-all with every one of the 37 topic configs set to a
# non-default value Gregor accepts (kafka-configs.sh --alter), topic gold-none with none. Then
#   - kafka-configs.sh --describe --all for --entity-type brokers --entity-name 1, --entity-default, and each
#     topic (sources, synonyms, defaults as Kafka's tool prints them), golden/kafka-configs-*.txt;
#   - a raw DescribeConfigs v4 dump with synonyms and documentation (read-only flags, sources and types, which
#     the tool does not print), configs_golden.py, golden/describe-configs.txt.
# Only the broker's temporary directory is normalised (to <dir>): the listener binds port 0 and the node id
# is 1. A difference fails the check and prints the diff. After a deliberate change:
# GOLDEN_UPDATE=1 compat-tests/admin/run.sh rewrites the golden files (review and commit them).
# Needs KAFKA_BIN (the kafka-dist tools), java and python3 with the admin suite's packages.
# Read next: compat-tests/admin/configs_golden.py, server/handlers/describe_configs.c.

GOLD_TOPIC_CONFIGS='cleanup.policy=[compact,delete],compression.gzip.level=5,compression.lz4.level=10,compression.type=zstd,compression.zstd.level=7,delete.retention.ms=3600000,errors.deadletterqueue.group.enable=true,file.delete.delay.ms=30000,flush.messages=1000,flush.ms=5000,follower.replication.throttled.replicas=[0:1,1:1],index.interval.bytes=8192,leader.replication.throttled.replicas=*,local.retention.bytes=1000000,local.retention.ms=3600000,max.compaction.lag.ms=86400000,max.decompressed.message.bytes=1000000,max.message.bytes=500000,message.timestamp.after.max.ms=60000,message.timestamp.before.max.ms=86400000,message.timestamp.type=LogAppendTime,min.cleanable.dirty.ratio=0.25,min.compaction.lag.ms=1000,min.insync.replicas=1,preallocate=false,remote.copy.lag.bytes=1000,remote.copy.lag.ms=1000,remote.log.copy.disable=true,remote.log.delete.on.disable=true,remote.storage.enable=false,retention.bytes=100000000,retention.ms=7200000,segment.bytes=2000000,segment.index.bytes=1000000,segment.jitter.ms=0,segment.ms=3600000,unclean.leader.election.enable=true'

# golden_compare NAME FILE TEXT: compares TEXT (normalised) with golden/FILE; counts a pass or a failure and
# prints the diff on a failure. GOLDEN_UPDATE=1 first writes TEXT to golden/FILE. (Not in a pipeline: the
# counts live in this shell.)
golden_compare() {
    local name=$1 file=$here/golden/$2 got
    got=$(sed -e "s#$(realpath "$BROKER_DIR")#<dir>#g" -e "s#$BROKER_DIR#<dir>#g" <<<"$3")
    if [ -n "${GOLDEN_UPDATE:-}" ]; then
        mkdir -p "$here/golden"
        printf '%s\n' "$got" >"$file"
        echo "  wrote $file"
    fi
    local d
    if d=$(diff -u "$file" - <<<"$got"); then
        pass "$name"
    else
        fail "$name" "differs from golden/$2"
        printf '%s\n' "$d" | head -80
    fi
}

configs_golden() {
    local gold_err out
    BROKER_DIR=$(mktemp -d /tmp/gregor-test.XXXXXX)
    broker_start --override message.max.bytes=2000000 --override log.retention.hours=100 ||
        { fail "configs golden: broker starts"; return; }
    gold_err=$BROKER_DIR/tool-stderr
    # The tool's stdout only: its warnings (stderr) are kept for a failure's detail.
    gtool() { timeout 60 "$KAFKA_BIN/$1" --bootstrap-server "$BROKER" "${@:2}" 2>>"$gold_err"; }
    out=$(BROKER=$BROKER timeout 60 python3 "$here/configs_golden.py" create gold-all gold-none 2>&1)
    check "configs golden: create gold-all and gold-none" test -z "$out"
    out=$(gtool kafka-configs.sh --alter --entity-type topics --entity-name gold-all --add-config "$GOLD_TOPIC_CONFIGS")
    check "configs golden: all 37 topic configs set on gold-all" grep -q 'Completed updating config for topic gold-all' <<<"$out"
    out=$(gtool kafka-configs.sh --alter --entity-type brokers --entity-name 1 \
        --add-config log.flush.interval.messages=50000,log.retention.ms=7200000)
    check "configs golden: dynamic broker configs set" grep -q 'Completed updating config for broker 1' <<<"$out"
    out=$(gtool kafka-configs.sh --alter --entity-type brokers --entity-default \
        --add-config log.cleaner.delete.retention.ms=3600000)
    check "configs golden: dynamic default broker config set" grep -q 'Completed updating default config' <<<"$out"
    golden_compare "configs golden: kafka-configs.sh --describe --all broker 1" kafka-configs-broker.txt \
        "$(gtool kafka-configs.sh --describe --all --entity-type brokers --entity-name 1)"
    golden_compare "configs golden: kafka-configs.sh --describe --all --entity-default" kafka-configs-broker-default.txt \
        "$(gtool kafka-configs.sh --describe --all --entity-type brokers --entity-default)"
    golden_compare "configs golden: kafka-configs.sh --describe --all topic gold-all (every config set)" \
        kafka-configs-topic-all.txt "$(gtool kafka-configs.sh --describe --all --entity-type topics --entity-name gold-all)"
    golden_compare "configs golden: kafka-configs.sh --describe --all topic gold-none (defaults)" \
        kafka-configs-topic-none.txt "$(gtool kafka-configs.sh --describe --all --entity-type topics --entity-name gold-none)"
    golden_compare "configs golden: DescribeConfigs v4 dump (read-only, source, type, synonyms, documentation)" \
        describe-configs.txt "$(BROKER=$BROKER timeout 60 python3 "$here/configs_golden.py" dump gold-all gold-none 2>>"$gold_err")"
    [ "$FAILED" -gt 0 ] && [ -s "$gold_err" ] && { echo "  tool stderr:"; tail -20 "$gold_err"; }
    broker_stop TERM
    rm -rf "$BROKER_DIR"
}
