"""txn_raise.py: transaction.version raised from 1 to 2 on a running cluster under a Java 4.x transactional
producer (issue #25): etcd and three gregor brokers on the host, as txn.py; runs as root through harness.py,
seeded and bounded in time.

The Java client (kafka-clients 4.4.0) reads ApiVersions only when it opens a connection, and at
beginTransaction adopts a finalized transaction.version only when it saw a newer FinalizedFeaturesEpoch. So a
running producer switches to version 2 on its next new connection to any broker after the raise. This test
arranges that connection and checks that nothing fails around it:

  - gregor.transaction.version=1 (set explicitly), transaction.state.log.num.partitions 4; the transactional
    id's coordinator C is the leader of its __transaction_state partition; topic A (2 partitions, replicas
    [C, X]) and topic B (1 partition, replica Z only; Z != C, Z not a replica of A; X, Z picked by the seed);
  - compat-tests/streams' TxnRaise (enable.idempotence, acks=all, connections.max.idle.ms 2000) with
    bootstrap C only runs transactions of K records to A back to back; after about 5 s C's /metrics shows EndTxn
    below v5 only, AddPartitionsToTxn v0-3 growing;
  - kafka-features.sh --bootstrap-server C upgrade --feature transaction.version=2 exits 0; every broker answers
    level 2 at one higher epoch (ApiVersions), and kafka-features.sh describe through every broker shows it;
    then (at least 2 s after the raise; about 6 s with the describes) still no EndTxn v5 at C (the producer
    opened no connection since);
  - the trigger file: each transaction also sends K records to B, the producer connects to Z, sees the raised
    epoch, and C's /metrics shows EndTxn v5 within 20 s; a few seconds later EndTxn v5 grew while EndTxn below
    v5 and the client's AddPartitionsToTxn (v0-3: v4+ are the brokers' own) did not (version 2 adds the
    partitions implicitly);
  - TxnRaise exits 0 with 0 failed transactions over the whole run; EndTxn (v0-5) at C counts exactly the
    committed transactions; a read_committed read of A and B returns exactly the committed records (A: every
    committed transaction x K, B: those from the first transaction after the trigger), no duplicate.
Ends with `cluster-txn-raise: N passed, N failed`; exit 1 on any failure. Needs Kafka's tools
(compat-tests/.cache/kafka-4.4.0), Maven and Java (compat-tests/streams/build.sh).
Env TXN_RAISE_JAVA_OPTS: extra JVM options for TxnRaise (e.g.
-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals=debug shows each batch's epoch and
sequence). About 25 s. Usage: txn_raise.py [--seed N] [--deadline SECONDS]. Read next: txn.py, tools.py,
compat-tests/streams/src/main/java/dev/gregor/streams/TxnRaise.java.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import metrics as mx  # noqa: E402 - scrape(), g()
import testkit  # noqa: E402
import tools  # noqa: E402 - tool(), features_of(), all_at()
import txn  # noqa: E402 - partition_for(), find(), try_find(), parts_of(), by_id()
from testkit import check, eq, fail, ok, section  # noqa: E402

TXN_PARTS = 4
TXN_TOPIC = '__transaction_state'
TXN_ID = 'raise-txn'
TOPIC_A, TOPIC_B = 'raise-a', 'raise-b'
K = 5              # records per topic per transaction
V1_S = 5.0         # seconds of version 1 transactions before the raise
SWITCH_S = 20.0    # bound from the trigger to the first EndTxn v5
AFTER_S = 3.0      # seconds of version 2 transactions after the switch
MAX_S = 90         # TxnRaise's own bound
figures = []


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', 'gregor.metadata.etcd.prefix=/gregor',
            'broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', f'transaction.state.log.num.partitions={TXN_PARTS}',
            'gregor.transaction.version=1']


def requests(b, api):
    """{version: count} of kafka_network_requestmetrics_requests_total{request=api} in b's /metrics."""
    out = {}
    for (name, labels), v in mx.scrape(b).items():
        d = dict(labels)
        if name == 'kafka_network_requestmetrics_requests_total' and d.get('request') == api:
            out[int(d['version'])] = int(v)
    return out


def endtxn(b):
    """(EndTxn below v5, EndTxn v5, the client's AddPartitionsToTxn v0-3) counts at b."""
    e, a = requests(b, 'EndTxn'), requests(b, 'AddPartitionsToTxn')
    return (sum(n for v, n in e.items() if v < 5), sum(n for v, n in e.items() if v >= 5),
            sum(n for v, n in a.items() if v <= 3))


def progress(path):
    """(seconds, committed, failed, b transactions) of TxnRaise's last once-a-second line, or None."""
    with open(path, 'rb') as f:
        text = f.read().decode('utf-8', 'replace')
    ms = re.findall(r'^txnraise: (\d+) s committed (\d+) failed (\d+) b (\d+)$', text, re.M)
    return tuple(int(x) for x in ms[-1]) if ms else None


def create(b, name, assignments):
    with k.Conn(b.bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': name, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': p, 'broker_ids': ids}
                                                                      for p, ids in enumerate(assignments)],
                                                      'configs': []}], 'timeout_ms': 10000, 'validate_only': False})
    return r['topics'][0]['error_code']


def t_setup(run, etcd, bs, st):
    level, st['epoch1'] = tools.all_at(bs, 1)
    eq('cluster made at gregor.transaction.version 1: every broker answers level 1', 1, level)
    txn.find(bs[0], TXN_ID)  # the first one has __transaction_state created
    h.wait_until(lambda: all((txn.try_find(b, TXN_ID) or (-1,))[0] == 0 for b in bs), 30,
                 'FindCoordinator key type 1 answers on every broker')
    pp = txn.parts_of(bs[0], TXN_TOPIC)
    coord = txn.by_id(bs, pp[txn.partition_for(TXN_ID, TXN_PARTS)][0])
    eq(f'every broker names broker {coord.node_id}, leader of {TXN_TOPIC}-{txn.partition_for(TXN_ID, TXN_PARTS)}, '
       f'the coordinator of {TXN_ID}', {(0, coord.node_id)}, {txn.find(b, TXN_ID) for b in bs})
    x, z = run.rng.sample([b for b in bs if b is not coord], 2)
    eq(f'CreateTopics {TOPIC_A}: 2 partitions on [C={coord.node_id}, X={x.node_id}]', 0,
       create(bs[0], TOPIC_A, [[coord.node_id, x.node_id]] * 2))
    eq(f'CreateTopics {TOPIC_B}: 1 partition on [Z={z.node_id}] only', 0, create(bs[0], TOPIC_B, [[z.node_id]]))
    h.wait_until(lambda: {p: (v[0], v[2]) for p, v in (txn.parts_of(bs[0], TOPIC_A) or {}).items()} ==
                 {p: (coord.node_id, tuple(sorted((coord.node_id, x.node_id)))) for p in (0, 1)}, 20,
                 f'{TOPIC_A} led by C with X in the ISRs')
    h.wait_until(lambda: (txn.parts_of(bs[0], TOPIC_B) or {}).get(0, (-1,))[0] == z.node_id, 20, f'{TOPIC_B} led')
    ok(f'{TOPIC_A} led by broker {coord.node_id} with broker {x.node_id} in sync, {TOPIC_B} led by broker '
       f'{z.node_id}')
    eq('C\'s /metrics before any transaction: no EndTxn, no AddPartitionsToTxn v0-3', (0, 0, 0), endtxn(coord))
    st.update(coord=coord, x=x, z=z)


def t_raise(run, etcd, bs, st):
    coord, z = st['coord'], st['z']
    log_path = run.path('logs', 'txnraise.log')
    trigger, stop = run.path('trigger'), run.path('stop')
    argv = ['java', '-Xmx256m', '-XX:+UseSerialGC'] + os.environ.get('TXN_RAISE_JAVA_OPTS', '').split() + ['-cp', st['classpath'], 'dev.gregor.streams.TxnRaise',
            coord.bootstrap, TOPIC_A, TOPIC_B, TXN_ID, str(K), str(MAX_S), trigger, stop]
    p = run.spawn(argv, log_name='txnraise.log', label='txnraise')
    st['proc'] = p
    h.wait_until(lambda: (progress(log_path) or (0, 0))[1] > 0 or not p.alive(), 60, 'TxnRaise\'s first commits')
    time.sleep(V1_S)
    before = progress(log_path)
    v1 = endtxn(coord)
    check(f'{before[0]} s of version 1: {before[1]} transactions committed, {before[2]} failed',
          p.alive() and before[1] > 0 and before[2] == 0, p.log_tail(5))
    check(f'C\'s /metrics: EndTxn below v5 only ({v1[0]}, v5 {v1[1]}), AddPartitionsToTxn v0-3 {v1[2]}',
          v1[0] > 0 and v1[1] == 0 and v1[2] > 0)
    t_up = time.monotonic()
    rc, out = tools.tool('kafka-features.sh', '--bootstrap-server', coord.bootstrap, 'upgrade', '--feature',
                         'transaction.version=2')
    check(f'kafka-features.sh --bootstrap-server C upgrade --feature transaction.version=2: exit 0 '
          f'({time.monotonic() - t_up:.1f} s)', rc == 0 and 'transaction.version was upgraded to 2.' in out,
          out[-400:])
    _, epoch = tools.all_at(bs, 2)
    check(f'every broker answers level 2 at one higher epoch ({st["epoch1"]} -> {epoch})', epoch > st['epoch1'])
    for b in bs:
        eq(f'kafka-features.sh describe through broker {b.node_id}: level 2 at epoch {epoch}', (2, epoch, 2),
           tools.features_of(b))
    time.sleep(max(0.0, 2.0 - (time.monotonic() - t_up)))
    mid = endtxn(coord)
    raised = progress(log_path)
    check(f'{time.monotonic() - t_up:.1f} s after the raise, before any new connection: still no EndTxn v5 at C '
          f'({mid[0] - v1[0]} more EndTxn below v5)', mid[1] == 0 and mid[0] > v1[0], str(mid))
    t_trig = time.monotonic()
    with open(trigger, 'w') as f:
        f.write('go\n')

    def switched():
        m = endtxn(coord)
        return m if m[1] > 0 else None
    try:
        at = h.wait_until(switched, SWITCH_S, 'EndTxn v5 at C', interval=0.1)
    except h.HarnessError as e:
        fail('EndTxn v5 at C after the trigger', f'{e}: {endtxn(coord)}; {p.log_tail(5)}')
        at = None
    if at is not None:
        dt = time.monotonic() - t_trig
        ok(f'the producer connected to Z={z.node_id} and switched: EndTxn v5 at C {dt:.2f} s after the trigger')
        figures.append(f'trigger (first record for broker {z.node_id}) to the first EndTxn v5: {dt:.2f} s')
        time.sleep(AFTER_S)
        end = endtxn(coord)
        check(f'{AFTER_S:.0f} s later: EndTxn v5 grew ({at[1]} -> {end[1]})', end[1] > at[1])
        eq('  EndTxn below v5 and AddPartitionsToTxn v0-3 stopped growing at the switch (version 2 adds the '
           'partitions itself)', (at[0], at[2]), (end[0], end[2]))
    with open(stop, 'w') as f:
        f.write('stop\n')
    rc = p.wait(60)
    with open(log_path, 'rb') as f:
        text = f.read().decode('utf-8', 'replace')
    for line in re.findall(r'^txnraise: transaction \d+ failed: .*$', text, re.M)[:5]:
        print(f'   {line}')
    m = re.search(r'^txnraise: total committed (\d+) failed (\d+) b_txns (\d+) first_b (-?\d+) records_a (\d+) '
                  r'records_b (\d+)$', text, re.M)
    eq('TxnRaise exit status', 0, rc)
    if not m:
        fail('TxnRaise\'s totals line', p.log_tail(10))
        return
    committed, failed, b_txns, first_b, rec_a, rec_b = (int(v) for v in m.groups())
    eq(f'0 failed transactions over the whole run ({committed} committed)', 0, failed)
    final = endtxn(coord)
    eq('EndTxn at C (v0-5) counts exactly the committed transactions', committed, final[0] + final[1])
    check(f'transactions to {TOPIC_B} after the trigger: {b_txns} (from transaction {first_b})', b_txns > 0)
    figures.append(f'transactions: {final[0]} at version 1 ({before[1]} before the raise, about '
                   f'{raised[1] - before[1]} between the raise and the trigger), {final[1]} at version 2; '
                   f'{committed} committed in all, 0 failed, {K} records per topic each')
    st.update(committed=committed, first_b=first_b, b_txns=b_txns, rec_a=rec_a, rec_b=rec_b)


def read_committed(bs, topic, parts, want):
    """Every value of topic's partitions a read_committed consumer returns (stops at `want` values + 1.5 s)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'raise-rc',
                  'isolation.level': 'read_committed', 'enable.auto.commit': False, 'log_level': 2})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    got = []
    try:
        end = time.monotonic() + 30
        quiet = None
        while time.monotonic() < end and (quiet is None or time.monotonic() < quiet):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
            if quiet is None and len(got) >= want:
                quiet = time.monotonic() + 1.5
    finally:
        c.close()
    return got


def t_read(run, etcd, bs, st):
    n, first_b, b_txns = st['committed'], st['first_b'], st['b_txns']
    want_a = {f'a-{t}-{i}' for t in range(n) for i in range(K)}
    want_b = {f'b-{t}-{i}' for t in range(first_b, first_b + b_txns) for i in range(K)}
    got_a = read_committed(bs, TOPIC_A, 2, len(want_a))
    got_b = read_committed(bs, TOPIC_B, 1, len(want_b))
    eq(f'read_committed {TOPIC_A}: {n} transactions x {K} records', (len(want_a), st['rec_a']),
       (len(got_a), len(want_a)))
    check('  exactly the committed records, no duplicate', len(got_a) == len(set(got_a)) and set(got_a) == want_a,
          f'missing {len(want_a - set(got_a))}, extra {len(set(got_a) - want_a)}, dup {len(got_a) - len(set(got_a))}')
    eq(f'read_committed {TOPIC_B}: {b_txns} transactions x {K} records (TxnRaise\'s total)', (len(want_b), st['rec_b']),
       (len(got_b), len(want_b)))
    check('  exactly the committed records, no duplicate', len(got_b) == len(set(got_b)) and set(got_b) == want_b,
          f'missing {len(want_b - set(got_b))}, extra {len(set(got_b) - want_b)}, dup {len(got_b) - len(set(got_b))}')


def build_classpath():
    """compat-tests/streams/build.sh's class path, or None (the reason printed as a failure)."""
    try:
        r = subprocess.run(['bash', os.path.join(os.path.dirname(HERE), 'streams', 'build.sh')], capture_output=True,
                           text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        fail('compat-tests/streams/build.sh', str(e))
        return None
    if r.returncode != 0:
        fail('compat-tests/streams/build.sh (Maven, Java)', r.stderr.strip()[-400:])
        return None
    return r.stdout.strip().splitlines()[-1]


def main():
    seed, deadline = h.cli(deadline_s=180.0)
    t0 = time.monotonic()
    st = {}
    if not os.access(os.path.join(tools.KAFKA_BIN, 'kafka-features.sh'), os.X_OK):
        fail(f'Kafka\'s tools not found in {tools.KAFKA_BIN} (compat-tests/kafka-dist/get-kafka.sh)')
    else:
        st['classpath'] = build_classpath()
    if st.get('classpath'):
        with h.Run(seed=seed, deadline_s=deadline, label='cluster-txn-raise') as run:
            etcd = run.etcd(1)
            bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
            section('a cluster at transaction version 1, C, X and Z', t_setup, run, etcd, bs, st)
            if 'coord' in st:
                section('transaction.version 1 -> 2 under a running Java producer', t_raise, run, etcd, bs, st)
            if 'committed' in st:
                section('read_committed: exactly the committed records', t_read, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-txn-raise: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
