#!/usr/bin/env bash
# cluster/run.sh: the cluster suites. First the fault harness's self-test (compat-tests/cluster/selftest.py):
# etcd members, network namespaces with nftables cuts, and gregor brokers, each fault shown to happen and to
# be undone, and nothing of the run left afterwards. Then membership.py: cluster-mode brokers join, are
# refused, restart, are fenced and leave. Then e2e.py: a 3-broker cluster end to end (a 12-partition topic
# led 4 per broker, librdkafka produce and consume, NOT_LEADER_OR_FOLLOWER, kill -9 of a broker and of the
# controller with restarts, DeleteTopics). Then replication_factors.py: a cluster takes RF > 1 (an RF 3 topic:
# 3 replicas, ISR 3, leaders spread; Kafka's refusals), a single-node broker refuses it. Then
# replication_default.py: __consumer_offsets at the default factor 3 (COORDINATOR_NOT_AVAILABLE with two
# brokers, created when a third joins, a group consumer commits and resumes). Then
# replication.py: RF 3 end to end (acks=all produce, replicas byte for byte, a leader's kill -9, its return). Then
# ctl_shutdown.py: a leader's SIGTERM under an idempotent acks=all producer (controlled shutdown: its
# leaderships moved before it exits, no produce error, every record read back, back in every ISR; a second
# SIGTERM during the wait stops it at once). Then elect.py: preferred leader election (issue #24): Kafka's
# kafka-leader-election.sh moves leadership back to broker 1 after its restart (epochs bumped, acks=all
# records all read back), ELECTION_NOT_NEEDED on a second run, PREFERRED_LEADER_NOT_AVAILABLE while it is
# down, and the automatic rebalance (leader.imbalance.check.interval.seconds=2) does it by itself (about
# 8 s). Then reassign.py: partition reassignment (issue #24, KIP-455): kafka-reassign-partitions.sh raises a
# topic and __consumer_offsets from one replica to three under an acks=all load (none lost), moves a partition
# off its leader onto a fourth broker, lists and cancels one in progress, and the API's errors (about 15 s).
# Then pids.py: producer ids from etcd's counter across three
# brokers and a restart, a librdkafka idempotent producer, the shutting_down mark on SIGTERM. Then groups.py:
# consumer groups across the cluster (FindCoordinator on every broker, a group of three librdkafka consumers,
# kill -9 of its coordinator). Then grouplag.py: a group's lag series and /v1/groups/<g>/lag come from its
# coordinator only (about 2 s). Then remote_lag.py: the lag of partitions other brokers lead, from their
# partition summaries (issue #22): exact values on the coordinator, once over the brokers, a SIGSTOPped leader's
# partition left out within 0.5 s and counted, back after SIGCONT, records lost counted once (about 12 s). Then txn.py: the transaction coordinator in cluster mode (issue #21;
# __transaction_state created once at RF 3, FindCoordinator key type 1 on every broker,
# confluent-kafka commits and aborts on one broker and across the three, Produce and TxnOffsetCommit verified at
# a remote coordinator, kill -9 of the coordinator mid-transaction and after EndTxn(commit), an unload; about 30 s; the pipeline under faults in a
# cluster, txn_faults.py, runs in make test-txn-faults only). Then txn_raise.py: transaction.version raised from 1
# to 2 with kafka-features.sh under a running Java 4.4 transactional producer (compat-tests/streams' TxnRaise):
# it switches to EndTxn v5 on its next new connection, no transaction fails, read_committed exact (about 25 s). Then interbroker_tls.py: the inter-broker listener
# over SSL with ssl.client.auth=required (issue #23): replication.py's RF 3 sections and txn.py's transaction across
# three leaders over it, every inter-broker connection logged over TLS, clients on a second SSL listener, a broker
# of another CA kept out of the ISR, a certificate for another address refused, bad settings stopping the broker
# (about 35 s). Then interbroker_tls_reload.py: certificate reload reaching the inter-broker client (two brokers;
# broker 2's INTERNAL keystore reloaded to a second CA's certificate; broker 1's new fetcher connection refuses it
# until broker 1's INTERNAL truststore is reloaded (validate_only changes nothing), then verifies it and keeps the
# ISR, the established connection keeps its session; about 9 s).
# Then interbroker_sasl.py: the inter-broker listener over SASL_SSL with PLAIN (and SASL_PLAINTEXT
# with SCRAM-SHA-512, credentials added after start): replication.py's RF 3 sections over it, every fetcher
# connection logged with SASL as User:broker, a leader without User:broker in super.users refusing its fetches,
# a wrong password kept out of the ISR without spinning, bad settings stopping the broker (about 30 s).
# Then interbroker_reauth.py: KIP-368 re-authentication of the inter-broker client (3 s sessions on a SASL
# PLAIN inter-broker listener under 12 s of acks=all load: ISR complete throughout, every fetcher
# re-authenticated in band, no expired session, no reconnect) and OAUTHBEARER between brokers (unsecured
# tokens from the JAAS options, re-authentication with new tokens, a token subject without cluster permission
# kept out of the ISR, bad login options stopping the broker; about 35 s).
# Then security_etcd.py: ACLs and SCRAM credentials in etcd across three brokers (issue #23; 6,000 SCRAM users one key each, a restart reading them before serving; about 17 s).
# Then tools.py: Kafka's kafka-topics.sh, kafka-broker-api-versions.sh,
# kafka-configs.sh, kafka-consumer-groups.sh and kafka-features.sh (describe, and upgrade/downgrade through
# brokers that are not the controller: every broker answers the same level and epoch) through any broker. Then lifecycle.py: a 1,000-partition
# CreateTopics with a Produce the moment a leader shows, the __consumer_offsets shape, delete while a broker
# is down, a rolling restart under load. Then faults.py: etcd and the brokers each in a network namespace;
# ApiVersions while etcd is SIGSTOPped, a SIGSTOPped controller that resumes after losing its lease, a broker
# cut from etcd only (nftables), etcd SIGSTOPped for 30 s under produce and fetch, etcd's data wiped. Then jepsen.py: the replication
# fault runs in their short form at replication factor 3 (--rf 3: seeds 1 and 2 x (60 s of faults + 20 s
# drain), about 2 min 50 s; seed 3 moved to make test-faults' ten seeds on 2026-12-03 to make room for the
# metrics stages): idempotent producers and consumers under a seeded nemesis, Jepsen's queue checker,
# the replica comparison, the high watermark invariant's count, under make test's network-thread audit
# (compat-tests/run.sh). A follower's truncation no longer reads on the network thread (its cold reads go to
# the I/O pool, storage/truncate.c), which that audit had reported in 2 of 3 runs on 2026-12-03 while this
# ran at --rf 1. Then metrics.py: /metrics of three brokers (issue #22; leadercount summed, one active
# controller, a SIGSTOPped follower's partitions under-replicated on their leaders with isrshrinks_total
# grown, isrexpands_total after its return; about 10 s). Then fetchsess.py: the followers' fetch sessions
# (issue #24, KIP-227; two incremental sessions per leader, replication byte for byte through them, leader
# changes opening new ones; about 10 s). Needs root; installs etcd-server,
# etcd-client and nftables (scripts/install-deps.sh test) when they are missing. Each prints its own
# "N passed, N failed" line; the
# last line, "cluster: N passed, N failed", sums them.
# Usage: compat-tests/cluster/run.sh [--seed N] [--deadline SECONDS]
set -u
here=$(cd "$(dirname "$0")" && pwd)
export REPO=${REPO:-$(cd "$here/../.." && pwd)}
export GREGOR_BIN=${GREGOR_BIN:-$REPO/build/bin/gregor}
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null || ! command -v nft >/dev/null; then
    "$REPO/scripts/install-deps.sh" test || { echo "cluster-harness: 0 passed, 1 failed (etcd/nftables missing)"; exit 1; }
fi
total_p=0
total_f=0
status=0
for t in selftest membership e2e replication_factors replication_default replication ctl_shutdown elect reassign pids groups grouplag remote_lag txn txn_raise interbroker_tls interbroker_tls_reload interbroker_sasl interbroker_reauth security_etcd tools lifecycle faults jepsen metrics fetchsess; do
    out=$(mktemp)
    extra=()
    [ "$t" = jepsen ] && extra=(--rf 3 --seeds 1,2)
    python3 "$here/$t.py" "${extra[@]}" "$@" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^[a-z0-9-]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
    rm -f "$out"
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
    [ -n "$line" ] || { p=0; f=1; }
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    [ "$rc" -ne 0 ] && status=1
    total_p=$((total_p + p))
    total_f=$((total_f + f))
done
echo "cluster: $total_p passed, $total_f failed"
exit $status
