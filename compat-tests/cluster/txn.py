"""txn.py: the transaction coordinator in cluster mode (issue #21; server/txns.c gr_txns_follow): etcd and three
gregor brokers on the host, as groups.py; runs as root
through harness.py, seeded and bounded in time.

What it checks (broker.session.timeout.ms 3000; transaction.state.log.num.partitions 10, set here to keep the
loads short; offsets.topic.num.partitions 4; transaction.state.log.replication.factor and .min.isr at
Kafka's defaults, 3 and 2):
  - CreateTopics naming __consumer_offsets with 2 partitions and cleanup.policy delete makes it in the group
    coordinator's shape (4 partitions of 3 replicas, compact: server/internal_topics.h);
  - the first FindCoordinator key type 1 answers COORDINATOR_NOT_AVAILABLE and has __transaction_state
    created once (one "created __transaction_state" log line over the three brokers): 10 partitions of 3
    replicas, min.insync.replicas 2 (DescribeConfigs); for 12 transactional ids every broker names the leader
    of partition abs(hashCode(id)) % 10, and InitProducerId at a broker that does not lead it answers
    NOT_COORDINATOR;
  - a confluent-kafka (librdkafka) transactional producer commits one transaction and aborts another on a
    topic whose partition has the same replicas, in the same order, as the transactional id's partition of
    __transaction_state (so both are led by the same broker before and after a failover: markers and
    Produce verification to other brokers are not bound yet); read_committed reads exactly the committed
    records;
  - raw protocol, a transactional Produce at a broker that does not coordinate its transactional id: verified
    at the coordinator (AddPartitionsToTxn v4 VerifyOnly between brokers): a partition not in the transaction
    is INVALID_TXN_STATE (v9) / TRANSACTION_ABORTABLE (v11), a newer epoch INVALID_PRODUCER_EPOCH, an added
    partition accepted (last stable offset held), the next batch accepted with the coordinator SIGSTOPped (the
    transaction is open in the partition's log: not asked, Kafka's hasOngoingTransaction);
  - raw protocol, TxnOffsetCommit at a group coordinator on another broker than the transactional id's: verified
    there too (INVALID_TXN_STATE v3 / TRANSACTION_ABORTABLE v4 before AddOffsetsToTxn, accepted after), and
    the offset committed by EndTxn;
  - raw protocol, transaction version 2: a transactional Produce v12 at a broker that does not coordinate its
    transactional id, with no AddPartitionsToTxn, is added at the coordinator (AddPartitionsToTxn v4+ without
    VerifyOnly between brokers); EndTxn v5 there bumps the epoch, the marker reaches the leader, a zombie's
    Produce at the old epoch is INVALID_PRODUCER_EPOCH;
  - confluent-kafka commits two transactions and aborts one over three partitions led by the three brokers
    (markers to the other brokers' WriteTxnMarkers, Produce verified at the remote coordinator);
    read_committed exact;
  - send_offsets_to_transaction for a group coordinated by another broker than the transactional id: its
    TxnOffsetCommit is verified at the transaction coordinator on the other broker (AddPartitionsToTxn v4
    VerifyOnly), the offset committed with the transaction (librdkafka's 0103 in the cluster);
  - kill -9 the coordinator's broker mid-transaction (records produced, no EndTxn): the next broker in the
    replica order coordinates at a newer leader epoch (loaded from the replicated log); a new producer with
    the same transactional id fences the old one, its open transaction is aborted, a new one committed;
    read_committed exact;
  - the killed broker restarted and back in the ISRs, kill -9 the new coordinator's broker right after
    EndTxn(commit) answered: the next coordinator completes the commit (PrepareCommit's markers again, or
    CompleteCommit already there); read_committed exact.
Ends with `cluster-txn: N passed, N failed`; exit status 1 on any failure.
Usage: txn.py [--seed N] [--deadline SECONDS]
Read next: server/txns.c, groups.py.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, ok, section  # noqa: E402

SESSION_MS = 3000
PREFIX = '/gregor'
TXN_TOPIC = '__transaction_state'
TXN_PARTS = 10
OFFSETS_PARTS = 4
TOPIC = 'txc'
TXN_ID = 'cluster-txn'
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
NAMES = [f'txn-{i}' for i in range(12)]
figures = []


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            f'broker.session.timeout.ms={SESSION_MS}', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', f'transaction.state.log.num.partitions={TXN_PARTS}',
            f'offsets.topic.num.partitions={OFFSETS_PARTS}']


def java_hash(s):
    """Java's String.hashCode: over UTF-16 code units, 32-bit signed arithmetic."""
    units = s.encode('utf-16-be')
    hv = 0
    for i in range(0, len(units), 2):
        hv = (31 * hv + int.from_bytes(units[i:i + 2], 'big')) & 0xffffffff
    return hv - (1 << 32) if hv >= 1 << 31 else hv


def partition_for(txn_id, n=TXN_PARTS):
    hv = java_hash(txn_id)
    return (0 if hv == -(1 << 31) else abs(hv)) % n  # Kafka's Utils.abs


def find(b, key):
    with k.Conn(b.bootstrap, timeout=5) as c:
        r = c.request('FindCoordinator', 3, {'key': key, 'key_type': 1})
    return r['error_code'], r['node_id']


def try_find(b, key):
    try:
        return find(b, key)
    except Exception:  # noqa: BLE001 - a broker restarting or killed
        return None


def parts_of(b, topic):
    """{partition: (leader, replicas, isr, leader_epoch)} of topic in b's Metadata (None when absent)."""
    with k.Conn(b.bootstrap, timeout=5) as c:
        m = k.metadata(c, [topic], version=12, allow_auto=False)
    for t in m['topics']:
        if t['name'] == topic and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], tuple(p['replica_nodes']), tuple(sorted(p['isr_nodes'])),
                                           p['leader_epoch']) for p in t['partitions']}
    return None


def init_raw(b, txn_id, timeout_ms=60000):
    with k.Conn(b.bootstrap, timeout=5) as c:
        return c.request('InitProducerId', 4, {'transactional_id': txn_id, 'transaction_timeout_ms': timeout_ms,
                                               'producer_id': -1, 'producer_epoch': -1})


def init_wait(b, txn_id, timeout_ms):
    """InitProducerId at b, asked again until NONE (the coordinator may still be loading): (id, epoch)."""
    def init_ok():
        r = init_raw(b, txn_id, timeout_ms)
        return r if r['error_code'] == 0 else None
    r = h.wait_until(init_ok, 20, 'InitProducerId')
    return r['producer_id'], r['producer_epoch']


def txn_produce(b, topic, txn_id, pid, epoch, seq, version):
    """One transactional record to <topic>-0 at broker b: the partition's error code."""
    with k.Conn(b.bootstrap, timeout=10) as pc:
        batch = k.build_batch([(None, b'v')], attributes_extra=0x10, producer_id=pid, producer_epoch=epoch,
                              base_sequence=seq)
        return k.produce(pc, topic, 0, batch, version=version, transactional_id=txn_id)['error_code']


def by_id(bs, node_id):
    return next(b for b in bs if b.node_id == node_id)


def producer(bs):
    from confluent_kafka import Producer
    return Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs if b.alive()),
                     'transactional.id': TXN_ID, 'transaction.timeout.ms': 60000, 'linger.ms': 5,
                     'message.timeout.ms': 30000, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})


def send(p, values):
    for v in values:
        p.produce(TOPIC, value=v.encode(), partition=0)
    p.flush(30)


def read_committed(bs, want):
    """Every value of TOPIC-0 a read_committed consumer returns (stops at `want` values plus 1.5 s quiet)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs if b.alive()), 'group.id': 'rc',
                  'isolation.level': 'read_committed', 'enable.auto.commit': False, 'log_level': 2,
                  'topic.metadata.refresh.interval.ms': 500})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    try:
        end = time.monotonic() + 30
        while len(got) < want and time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
    finally:
        c.close()
    return got


def t_internal_shape(run, etcd, bs, st):
    """CreateTopics naming a coordinator's topic makes it in the coordinator's shape (server/internal_topics.h)."""
    with k.Conn(bs[1].bootstrap, timeout=10) as c:
        r = k.create_topic(c, '__consumer_offsets', partitions=2, configs={'cleanup.policy': 'delete'})
    eq('CreateTopics __consumer_offsets with 2 partitions: NONE, offsets.topic.num.partitions (4) of 3 replicas',
       (0, OFFSETS_PARTS, 3), (r['error_code'], r.get('num_partitions'), r.get('replication_factor')))
    pp = h.wait_until(lambda: parts_of(bs[0], '__consumer_offsets'), 20, '__consumer_offsets in the image')
    eq('Metadata: 4 partitions of 3 replicas', {3: OFFSETS_PARTS}, {len(v[1]): len(pp) for v in pp.values()})
    with k.Conn(bs[2].bootstrap, timeout=5) as c:
        r = c.request('DescribeConfigs', 4, {'resources': [{'resource_type': 2, 'resource_name': '__consumer_offsets',
                                                            'configuration_keys': ['cleanup.policy']}],
                                             'include_synonyms': False, 'include_documentation': False})
    eq('its cleanup.policy is compact', {'cleanup.policy': 'compact'},
       {x['name']: x['value'] for x in r['results'][0]['configs']})


def t_find(run, etcd, bs, st):
    eq('the first FindCoordinator key type 1: COORDINATOR_NOT_AVAILABLE at once', COORDINATOR_NOT_AVAILABLE,
       find(bs[0], NAMES[0])[0])
    t0 = time.monotonic()
    h.wait_until(lambda: all((try_find(b, NAMES[0]) or (-1,))[0] == 0 for b in bs), 30,
                 'FindCoordinator key type 1 answers on every broker')
    figures.append(f'first FindCoordinator to a transaction coordinator on every broker: {time.monotonic() - t0:.2f} s')
    pp = parts_of(bs[0], TXN_TOPIC)
    check(f'{TXN_TOPIC} exists with {TXN_PARTS} partitions', pp is not None and len(pp) == TXN_PARTS,
          repr(pp and len(pp)))
    if not pp:
        return
    eq('every partition has 3 replicas (transaction.state.log.replication.factor 3)', {3},
       {len(v[1]) for v in pp.values()})
    created = 0
    for b in bs:
        with open(b.proc.log_path, 'rb') as f:
            created += f.read().decode('utf-8', 'replace').count(f'created {TXN_TOPIC} with')
    eq(f'{TXN_TOPIC} created once over the three brokers', 1, created)
    with k.Conn(bs[1].bootstrap, timeout=5) as c:
        r = c.request('DescribeConfigs', 4, {'resources': [{'resource_type': 2, 'resource_name': TXN_TOPIC,
                                                            'configuration_keys': ['min.insync.replicas']}],
                                             'include_synonyms': False, 'include_documentation': False})
    cfg = {x['name']: x['value'] for x in r['results'][0]['configs']}
    eq('min.insync.replicas = transaction.state.log.min.isr (2)', {'min.insync.replicas': '2'}, cfg)
    want = {n: (0, pp[partition_for(n)][0]) for n in NAMES}
    for b in bs:
        eq(f'broker {b.node_id}: FindCoordinator key type 1 for 12 ids names the leader of abs(hash) % {TXN_PARTS}',
           want, {n: find(b, n) for n in NAMES})
    name = NAMES[1]
    coord = by_id(bs, want[name][1])
    other = next(b for b in bs if b is not coord)

    def init_ok():
        r = init_raw(coord, name)
        return r if r['error_code'] == 0 else None
    r = h.wait_until(init_ok, 20, f'InitProducerId for {name} at its coordinator')
    ok(f'InitProducerId for {name} at its coordinator (broker {coord.node_id}): producer id {r["producer_id"]}')
    eq(f'InitProducerId for {name} at broker {other.node_id}: NOT_COORDINATOR', NOT_COORDINATOR,
       init_raw(other, name)['error_code'])
    st['txn_parts'] = pp


def wait_isr_full(bs, topic, p, timeout=30):
    h.wait_until(lambda: (parts_of(bs[0], topic) or {}).get(p, (0, (), ()))[2] == (1, 2, 3), timeout,
                 f'{topic}-{p} with all three in its ISR')


def t_local_txn(run, etcd, bs, st):
    p = partition_for(TXN_ID)
    replicas = list(st['txn_parts'][p][1])
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': TOPIC, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': 0,
                                                                       'broker_ids': replicas}],
                                                      'configs': []}], 'timeout_ms': 10000, 'validate_only': False})
    eq(f'CreateTopics {TOPIC} with the replicas of {TXN_TOPIC}-{p} in the same order {replicas}', 0,
       r['topics'][0]['error_code'])
    h.wait_until(lambda: (parts_of(bs[0], TOPIC) or {}).get(0, (-1,))[0] == replicas[0], 20, f'{TOPIC} led')
    wait_isr_full(bs, TOPIC, 0)
    wait_isr_full(bs, TXN_TOPIC, p)
    eq(f'FindCoordinator for {TXN_ID}: broker {replicas[0]}, which leads {TOPIC}-0 too', (0, replicas[0]),
       find(bs[0], TXN_ID))
    pr = producer(bs)
    pr.init_transactions(30)
    pr.begin_transaction()
    send(pr, ['c0', 'c1', 'c2'])
    pr.commit_transaction(30)
    pr.begin_transaction()
    send(pr, ['a0', 'a1'])
    pr.abort_transaction(30)
    ok('one transaction committed, one aborted (confluent-kafka)')
    st['want'] = ['c0', 'c1', 'c2']
    eq('read_committed reads exactly the committed records', st['want'], read_committed(bs, 3))
    st['producer'] = pr


def t_remote_verify(run, etcd, bs, st):
    """Raw protocol: a transactional Produce at a leader whose transactional id is coordinated by another broker
    is verified there (AddPartitionsToTxn v4 VerifyOnly between the brokers)."""
    tp = st['txn_parts']
    name = next(n for n in NAMES if n != TXN_ID)
    coord = by_id(bs, tp[partition_for(name)][0])
    lead = next(b for b in bs if b is not coord)
    topic = 'txr'
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': topic, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': 0,
                                                                       'broker_ids': [lead.node_id]}],
                                                      'configs': []}], 'timeout_ms': 10000, 'validate_only': False})
    eq(f'CreateTopics {topic} led by broker {lead.node_id} ({name} is coordinated by broker {coord.node_id})', 0,
       r['topics'][0]['error_code'])
    h.wait_until(lambda: (parts_of(lead, topic) or {}).get(0, (-1,))[0] == lead.node_id, 20, f'{topic} led')
    with k.Conn(coord.bootstrap, timeout=10) as c:
        pid, epoch = init_wait(coord, name, 900000)

        def produce(e, seq, version=9):
            return txn_produce(lead, topic, name, pid, e, seq, version)
        eq(f'Produce v9 at broker {lead.node_id} for a partition not in the transaction: INVALID_TXN_STATE '
           '(the coordinator\'s TRANSACTION_ABORTABLE)', 48, produce(epoch, 0))
        eq('Produce v11 the same: TRANSACTION_ABORTABLE', 120, produce(epoch, 0, version=11))
        r = c.request('AddPartitionsToTxn', 3, {'v3_and_below_transactional_id': name,
                                                'v3_and_below_producer_id': pid,
                                                'v3_and_below_producer_epoch': epoch,
                                                'v3_and_below_topics': [{'name': topic, 'partitions': [0]}]})
        eq(f'AddPartitionsToTxn at the coordinator (broker {coord.node_id})', 0,
           r['results_by_topic_v3_and_below'][0]['results_by_partition'][0]['partition_error_code'])
    eq(f'Produce at broker {lead.node_id} with a newer epoch than the coordinator\'s: INVALID_PRODUCER_EPOCH', 47,
       produce(epoch + 1, 0))
    eq(f'Produce at broker {lead.node_id} once the partition is in the transaction: accepted', 0, produce(epoch, 0))
    # Kafka's hasOngoingTransaction: the partition's log holds the producer's open transaction, so the leader
    # asks nobody. With the coordinator SIGSTOPped a question would wait out the inter-broker timeout (far
    # past this connection's 10 s); answered at once, it was not asked.
    coord.pause()
    try:
        t0 = time.monotonic()
        err = produce(epoch, 1)
        took = time.monotonic() - t0
    finally:
        coord.resume()
    eq(f'the next batch with the coordinator (broker {coord.node_id}) SIGSTOPped: accepted at once, not asked '
       f'({took:.2f} s)', (0, True), (err, took < 5))
    with k.Conn(lead.bootstrap, timeout=10) as c:
        lso = [c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': iso, 'topics': [
            {'name': topic, 'partitions': [{'partition_index': 0, 'timestamp': -1}]}]})['topics'][0]['partitions'][0]
            ['offset'] for iso in (0, 1)]
    eq('high watermark 2, last stable offset 0 (the transaction is open)', [2, 0], lso)
    st['remote'] = (name, pid, epoch, coord, topic)


# TxnOffsetCommit and AddOffsetsToTxn (clients/src/main/resources/common/message/*.json), as txn/offsets.py
k.API_KEYS.setdefault('TxnOffsetCommit', 28)
k.SCHEMAS.setdefault('TxnOffsetCommit', (3, [
    k.field('transactional_id', 'string', '0+'), k.field('group_id', 'string', '0+'),
    k.field('producer_id', 'int64', '0+'), k.field('producer_epoch', 'int16', '0+'),
    k.field('generation_id', 'int32', '3+', default=-1), k.field('member_id', 'string', '3+'),
    k.field('group_instance_id', 'string', '3+', nullable='3+'),
    k.field('topics', [
        k.field('name', 'string', '0+'),
        k.field('partitions', [k.field('partition_index', 'int32', '0+'), k.field('committed_offset', 'int64', '0+'),
                               k.field('committed_leader_epoch', 'int32', '2+', default=-1),
                               k.field('committed_metadata', 'string', '0+', nullable='0+')], '0+'),
    ], '0+'),
], [
    k.field('throttle_time_ms', 'int32', '0+'),
    k.field('topics', [
        k.field('name', 'string', '0+'),
        k.field('partitions', [k.field('partition_index', 'int32', '0+'), k.field('error_code', 'int16', '0+')],
                '0+'),
    ], '0+'),
]))
k.API_KEYS.setdefault('AddOffsetsToTxn', 25)
k.SCHEMAS.setdefault('AddOffsetsToTxn', (3, [
    k.field('transactional_id', 'string', '0+'), k.field('producer_id', 'int64', '0+'),
    k.field('producer_epoch', 'int16', '0+'), k.field('group_id', 'string', '0+'),
], [k.field('throttle_time_ms', 'int32', '0+'), k.field('error_code', 'int16', '0+')]))


def t_remote_offsets(run, etcd, bs, st):
    """Raw protocol: TxnOffsetCommit at a group coordinator whose transactional id another broker coordinates
    is verified there (the group's __consumer_offsets partition in the transaction), as Produce is."""
    name, pid, epoch, coord, topic = st['remote']

    def group_node(g):
        with k.Conn(bs[0].bootstrap, timeout=10) as c:
            r = c.request('FindCoordinator', 3, {'key': g, 'key_type': 0})
        return r['node_id'] if r['error_code'] == 0 else None
    group, gnode = None, None
    for i in range(40):
        n = h.wait_until(lambda: group_node(f'g-{i}'), 30, 'the group coordinator')
        if n != coord.node_id:
            group, gnode = f'g-{i}', by_id(bs, n)
            break
    check(f'a group coordinated by another broker than {name}\'s', group is not None)
    if group is None:
        return

    def commit(version):
        with k.Conn(gnode.bootstrap, timeout=10) as c:
            r = c.request('TxnOffsetCommit', version, {
                'transactional_id': name, 'group_id': group, 'producer_id': pid, 'producer_epoch': epoch,
                'generation_id': -1, 'member_id': '', 'group_instance_id': None,
                'topics': [{'name': topic, 'partitions': [{'partition_index': 0, 'committed_offset': 42,
                                                           'committed_metadata': 'm'}]}]})
        return r['topics'][0]['partitions'][0]['error_code']
    eq(f'TxnOffsetCommit v3 at broker {gnode.node_id} (group {group}) before AddOffsetsToTxn: INVALID_TXN_STATE '
       f'(asked broker {coord.node_id})', 48, commit(3))
    eq('TxnOffsetCommit v4 the same: TRANSACTION_ABORTABLE', 120, commit(4))
    with k.Conn(coord.bootstrap, timeout=10) as c:
        r = c.request('AddOffsetsToTxn', 3, {'transactional_id': name, 'producer_id': pid, 'producer_epoch': epoch,
                                             'group_id': group})
    eq(f'AddOffsetsToTxn at the coordinator (broker {coord.node_id})', 0, r['error_code'])
    eq(f'TxnOffsetCommit at broker {gnode.node_id} once the offsets partition is in the transaction: accepted', 0,
       commit(3))
    with k.Conn(coord.bootstrap, timeout=10) as c:
        r = c.request('EndTxn', 3, {'transactional_id': name, 'producer_id': pid, 'producer_epoch': epoch,
                                    'committed': True})
    eq('EndTxn(commit)', 0, r['error_code'])

    def fetched():
        with k.Conn(gnode.bootstrap, timeout=10) as c:
            r = c.request('OffsetFetch', 7, {'group_id': group, 'topics': [{'name': topic, 'partition_indexes': [0]}],
                                             'require_stable': True})
        p = r['topics'][0]['partitions'][0]
        return p['committed_offset'] if p['error_code'] == 0 and p['committed_offset'] == 42 else None
    eq('OffsetFetch (require_stable) at the group coordinator: the committed offset', 42,
       h.wait_until(fetched, 20, 'the offset committed'))


def t_remote_add(run, etcd, bs, st):
    """Raw protocol, transaction version 2 (KIP-890 part 2): a transactional Produce v12 at a leader whose
    transactional id is coordinated by another broker, with no AddPartitionsToTxn: the leader has the coordinator
    add the partition (AddPartitionsToTxn v4+ without VerifyOnly between the brokers); EndTxn v5 at the
    coordinator bumps the epoch and its marker reaches the leader; a zombie's Produce at the old epoch is
    refused."""
    tp = st['txn_parts']
    used = st['remote'][0] if 'remote' in st else None
    name = next(n for n in NAMES if n not in (TXN_ID, used))
    coord = by_id(bs, tp[partition_for(name)][0])
    lead = next(b for b in bs if b is not coord)
    topic = 'txv2r'
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': topic, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': 0,
                                                                       'broker_ids': [lead.node_id]}],
                                                      'configs': []}], 'timeout_ms': 10000, 'validate_only': False})
    eq(f'CreateTopics {topic} led by broker {lead.node_id} ({name} is coordinated by broker {coord.node_id})', 0,
       r['topics'][0]['error_code'])
    h.wait_until(lambda: (parts_of(lead, topic) or {}).get(0, (-1,))[0] == lead.node_id, 20, f'{topic} led')

    def offsets():
        with k.Conn(lead.bootstrap, timeout=10) as c:
            return [c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': iso, 'topics': [
                {'name': topic, 'partitions': [{'partition_index': 0, 'timestamp': -1}]}]})['topics'][0]
                ['partitions'][0]['offset'] for iso in (0, 1)]
    with k.Conn(coord.bootstrap, timeout=10) as c:
        pid, epoch = init_wait(coord, name, 900000)

        def produce(e, seq, version=12):
            return txn_produce(lead, topic, name, pid, e, seq, version)
        eq(f'Produce v12 at broker {lead.node_id}, no AddPartitionsToTxn: accepted (added at broker '
           f'{coord.node_id})', 0, produce(epoch, 0))
        eq('high watermark 1, last stable offset 0 (the transaction is open)', [1, 0], offsets())
        r = c.request('EndTxn', 5, {'transactional_id': name, 'producer_id': pid, 'producer_epoch': epoch,
                                    'committed': True})
        eq('EndTxn v5 commit at the coordinator: the same producer id at epoch + 1', (0, pid, epoch + 1),
           (r['error_code'], r['producer_id'], r['producer_epoch']))
    # at once, as a version 2 client does: the previous transaction may still be completing at the coordinator
    # (CONCURRENT_TRANSACTIONS there), which the leader asks again for up to 100 ms (KAFKA-18654)
    t0 = time.monotonic()
    err = produce(epoch + 1, 0)
    eq(f'the next transaction at the new epoch, sent at once: accepted ({time.monotonic() - t0:.3f} s)', 0, err)
    h.wait_until(lambda: offsets() == [3, 2], 20, 'the marker at the leader')
    eq(f'the COMMIT marker reached broker {lead.node_id}: high watermark 3, last stable offset 2 (the next '
       'transaction open)', [3, 2], offsets())
    eq('a zombie\'s Produce v12 at the old epoch: INVALID_PRODUCER_EPOCH', 47, produce(epoch, 1))


def t_cross(run, etcd, bs, st):
    """confluent-kafka commit and abort over three partitions led by the three brokers: markers to the other
    brokers (WriteTxnMarkers between brokers) and Produce verified at a remote coordinator."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic, txn_id = 'txx', 'cross-txn'
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': topic, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': p, 'broker_ids': ids}
                                                                      for p, ids in enumerate(
                                                                          [[1, 2, 3], [2, 3, 1], [3, 1, 2]])],
                                                      'configs': []}], 'timeout_ms': 10000, 'validate_only': False})
    eq(f'CreateTopics {topic}: partitions 0, 1, 2 led by brokers 1, 2, 3', 0, r['topics'][0]['error_code'])
    h.wait_until(lambda: [v[0] for _, v in sorted((parts_of(bs[0], topic) or {}).items())] == [1, 2, 3], 20,
                 f'{topic} led')
    pr = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'transactional.id': txn_id,
                   'linger.ms': 5, 'message.timeout.ms': 30000, 'log_level': 2})
    pr.init_transactions(30)
    pr.begin_transaction()
    for p in range(3):
        for i in range(3):
            pr.produce(topic, value=f'c{p}-{i}'.encode(), partition=p)
    pr.commit_transaction(30)
    pr.begin_transaction()
    for p in range(3):
        pr.produce(topic, value=f'a{p}'.encode(), partition=p)
    pr.abort_transaction(30)
    pr.begin_transaction()
    pr.produce(topic, value=b'last', partition=1)
    pr.commit_transaction(30)
    ok(f'two transactions committed, one aborted over the three brokers (coordinator broker '
       f'{find(bs[0], txn_id)[1]})')
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'rc-x',
                  'isolation.level': 'read_committed', 'enable.auto.commit': False, 'log_level': 2})
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got = []
    try:
        end = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
    finally:
        c.close()
    eq('read_committed reads exactly the committed records of the three partitions',
       sorted([f'c{p}-{i}' for p in range(3) for i in range(3)] + ['last']), sorted(got))


def find_group(b, group):
    with k.Conn(b.bootstrap, timeout=5) as c:
        r = c.request('FindCoordinator', 3, {'key': group, 'key_type': 0})
    return r['error_code'], r['node_id']


def t_offsets_remote(run, etcd, bs, st):
    """send_offsets_to_transaction for a group whose coordinator is not the transaction's: TxnOffsetCommit is
    verified at the transaction coordinator on the other broker (AddPartitionsToTxn VerifyOnly), not in process
    (NOT_COORDINATOR there: librdkafka retried it for good, 0103 in the cluster); the offset is committed with
    the transaction."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic, txn_id = 'txx', 'offsets-txn'
    tnode = find(bs[0], txn_id)[1]
    group = None
    for i in range(200):  # a group coordinated by another broker than the transaction
        h.wait_until(lambda: find_group(bs[0], f'og-{i}')[0] == 0, 20, '__consumer_offsets')
        if find_group(bs[0], f'og-{i}')[1] != tnode:
            group = f'og-{i}'
            break
    gnode = find_group(bs[0], group)[1]
    check(f'group {group} coordinated by broker {gnode}, transaction {txn_id} by broker {tnode}',
          gnode != tnode and gnode >= 0 and tnode >= 0)
    boot = ','.join(b.bootstrap for b in bs)
    c = Consumer({'bootstrap.servers': boot, 'group.id': group, 'enable.auto.commit': False, 'log_level': 2})
    pr = Producer({'bootstrap.servers': boot, 'transactional.id': txn_id, 'linger.ms': 5,
                   'message.timeout.ms': 30000, 'log_level': 2})
    try:
        pr.init_transactions(30)
        pr.begin_transaction()
        pr.produce(topic, value=b'o', partition=0)
        pr.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], c.consumer_group_metadata(), 10)
        pr.commit_transaction(30)
        ok(f'send_offsets_to_transaction (group at broker {gnode}) and commit_transaction returned')
        got = c.committed([TopicPartition(topic, 0)], timeout=10)
        eq(f'the committed offset of {group} for {topic}-0', 7, got[0].offset)
    finally:
        c.close()


def t_kill_mid(run, etcd, bs, st):
    p = partition_for(TXN_ID)
    pr = st.pop('producer')
    coord = by_id(bs, find(bs[0], TXN_ID)[1])
    epoch0 = parts_of(bs[0], TXN_TOPIC)[p][3]
    pr.begin_transaction()
    send(pr, ['m0', 'm1', 'm2'])
    t0 = time.monotonic()
    coord.kill9()
    others = [b for b in bs if b is not coord]

    def moved():
        rs = [try_find(b, TXN_ID) for b in others]
        return rs[0] if all(r and r[0] == 0 and r[1] != coord.node_id for r in rs) and rs[0] == rs[1] else None
    r = h.wait_until(moved, SESSION_MS / 1000 + 20, 'a new coordinator')
    new = by_id(bs, r[1])
    ok(f'kill -9 broker {coord.node_id} mid-transaction: broker {new.node_id} coordinates {TXN_ID} after '
       f'{time.monotonic() - t0:.1f} s')
    tp = parts_of(others[0], TXN_TOPIC)[p]
    check(f'{TXN_TOPIC}-{p} at a newer leader epoch ({epoch0} -> {tp[3]})', tp[3] > epoch0)
    eq(f'{TOPIC}-0 is led by the same broker', new.node_id, parts_of(others[0], TOPIC)[0][0])
    h.wait_until(lambda: f'loaded 1 ids of {TXN_TOPIC}-{p} (epoch {tp[3]},' in log_of(new), 10, 'the load')
    ok(f'broker {new.node_id} loaded {TXN_TOPIC}-{p} at coordinator epoch {tp[3]} (its leader epoch)')
    pr2 = producer(others)
    pr2.init_transactions(30)  # fences the old producer: its open transaction is aborted
    figures.append(f'kill -9 mid-transaction to a new producer initialised: {time.monotonic() - t0:.1f} s')
    pr2.begin_transaction()
    send(pr2, ['n0', 'n1'])
    pr2.commit_transaction(30)
    st['want'] += ['n0', 'n1']
    eq('read_committed exact: the open transaction aborted, the new one committed', st['want'],
       read_committed(others, len(st['want'])))
    del pr
    coord.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)
    wait_isr_full(bs, TOPIC, 0)
    wait_isr_full(bs, TXN_TOPIC, p)
    ok(f'broker {coord.node_id} restarted and back in the ISRs')
    st['producer'] = pr2


def t_kill_after_commit(run, etcd, bs, st):
    pr = st.pop('producer')
    coord = by_id(bs, find(bs[0], TXN_ID)[1])
    pr.begin_transaction()
    send(pr, ['k0', 'k1', 'k2'])
    pr.commit_transaction(30)
    t0 = time.monotonic()
    coord.kill9()
    others = [b for b in bs if b is not coord]

    def moved():
        rs = [try_find(b, TXN_ID) for b in others]
        return rs[0] if all(r and r[0] == 0 and r[1] != coord.node_id for r in rs) and rs[0] == rs[1] else None
    r = h.wait_until(moved, SESSION_MS / 1000 + 20, 'a new coordinator')
    ok(f'kill -9 broker {coord.node_id} right after EndTxn(commit): broker {r[1]} coordinates {TXN_ID} after '
       f'{time.monotonic() - t0:.1f} s')
    del pr
    pr2 = producer(others)
    pr2.init_transactions(30)
    pr2.begin_transaction()
    send(pr2, ['z0'])
    pr2.commit_transaction(30)
    st['want'] += ['k0', 'k1', 'k2', 'z0']
    eq('read_committed exact: the commit completed by the new coordinator', st['want'],
       read_committed(others, len(st['want'])))


def log_of(b):
    with open(b.proc.log_path, 'rb') as f:
        return f.read().decode('utf-8', 'replace')


def t_unload(run, etcd, bs, st):
    """SIGSTOP the coordinator's broker past its session: the partition moves; resumed, the broker unloads it."""
    p = partition_for(TXN_ID)
    coord = by_id(bs, find(next(b for b in bs if b.alive()), TXN_ID)[1])
    others = [b for b in bs if b is not coord and b.alive()]
    coord.pause()
    try:
        h.wait_until(lambda: all((try_find(b, TXN_ID) or (-1, coord.node_id))[1] not in (coord.node_id, -1)
                                 for b in others), SESSION_MS / 1000 + 20, 'the partition led elsewhere')
    finally:
        coord.resume()
    h.wait_until(lambda: f'unloaded {TXN_TOPIC}-{p} ' in log_of(coord), 20, 'the unload')
    ok(f'broker {coord.node_id} paused past its session, resumed: it unloaded {TXN_TOPIC}-{p}')
    eq(f'InitProducerId for {TXN_ID} at broker {coord.node_id}: NOT_COORDINATOR', NOT_COORDINATOR,
       init_raw(coord, TXN_ID)['error_code'])


def main():
    seed, deadline = h.cli(deadline_s=150.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-txn') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('a coordinator topic made in its coordinator\'s shape', t_internal_shape, run, etcd, bs, st)
        section('FindCoordinator key type 1 across the cluster', t_find, run, etcd, bs, st)
        if 'txn_parts' in st:
            section('commit and abort at a coordinator leading the data partition', t_local_txn, run, etcd, bs, st)
        if 'txn_parts' in st:
            section('Produce verified by a coordinator on another broker', t_remote_verify, run, etcd, bs, st)
        if 'remote' in st:
            section('TxnOffsetCommit verified by a coordinator on another broker', t_remote_offsets, run, etcd, bs,
                    st)
        if 'txn_parts' in st:
            section('transaction version 2: Produce v12 added by a coordinator on another broker', t_remote_add,
                    run, etcd, bs, st)
            section('commit and abort across partitions led by the three brokers', t_cross, run, etcd, bs, st)
            section('TxnOffsetCommit verified at the transaction coordinator on another broker', t_offsets_remote,
                    run, etcd, bs, st)
        if 'producer' in st:
            section('kill -9 the coordinator mid-transaction', t_kill_mid, run, etcd, bs, st)
        if 'producer' in st:
            section('kill -9 the coordinator after EndTxn(commit)', t_kill_after_commit, run, etcd, bs, st)
            section('pause the coordinator past its session: it unloads', t_unload, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-txn: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
