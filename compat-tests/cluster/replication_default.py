"""replication_default.py: __consumer_offsets at Kafka's default replication factor 3 (issue #20): etcd and
gregor brokers on the host with no replication setting at all (harness.py: everything started is stopped at
the end), seeded and bounded in time.

What it checks:
  - two brokers: FindCoordinator v3 at each answers COORDINATOR_NOT_AVAILABLE, and still 2 s later (the
    creation of __consumer_offsets with 3 replicas is refused while 2 brokers are registered); a broker's log
    says why in Kafka's words ("internal topic creation will fail until the cluster size meets this
    replication factor requirement"); Metadata shows no __consumer_offsets;
  - a third broker joins: __consumer_offsets appears in Metadata with no FindCoordinator sent after the join
    (the brokers try the creation again when a broker registers): 50 partitions, each with 3 distinct
    replicas and an ISR of all 3, leaders spread 17/17/16; FindCoordinator then names a broker on every
    broker;
  - a librdkafka (confluent-kafka) group consumer on an RF 3 topic reads the 90 records produced, commits
    synchronously (no error); a second consumer of the group, started after 60 more records, reads exactly
    those 60 (it resumed from the commit).
Ends with `cluster-replication-default: N passed, N failed`; exit status 1 on any failure.
Usage: replication_default.py [--seed N] [--deadline SECONDS]
Read next: server/groups.c (create_offsets_topic, groups_follow), server/config.c, groups.py.
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

PREFIX = '/gregor'
OFFSETS = '__consumer_offsets'
TOPIC = 'rd3'
PARTITIONS = 3
GROUP = 'rd-group'
COORDINATOR_NOT_AVAILABLE = 15
KAFKA_WORDS = 'internal topic creation will fail until the cluster size meets this replication factor requirement'
figures = []


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500', 'auto.create.topics.enable=false']


def find(b, key):
    with k.Conn(b.bootstrap, timeout=5) as c:
        r = c.request('FindCoordinator', 3, {'key': key, 'key_type': 0})
    return r['error_code'], r['node_id']


def offsets_layout(b):
    """{partition: (leader, replicas, isr)} of __consumer_offsets in b's Metadata v12, or None when absent."""
    with k.Conn(b.bootstrap, timeout=5) as c:
        m = k.metadata(c, [OFFSETS], version=12, allow_auto=False)
    for t in m['topics']:
        if t['name'] == OFFSETS and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], list(p['replica_nodes']), list(p['isr_nodes']))
                    for p in t['partitions']}
    return None


def t_two(run, etcd, bs, st):
    eq('two brokers: FindCoordinator at each answers COORDINATOR_NOT_AVAILABLE',
       {1: COORDINATOR_NOT_AVAILABLE, 2: COORDINATOR_NOT_AVAILABLE}, {b.node_id: find(b, GROUP)[0] for b in bs})
    time.sleep(2.0)
    eq('and still 2 s later', {1: COORDINATOR_NOT_AVAILABLE, 2: COORDINATOR_NOT_AVAILABLE},
       {b.node_id: find(b, GROUP)[0] for b in bs})
    check(f'a broker logs why, in Kafka\'s words ("{KAFKA_WORDS}")',
          any(KAFKA_WORDS in b.log_tail(2000) for b in bs), bs[0].log_tail(10))
    check(f'{OFFSETS} does not exist', all(offsets_layout(b) is None for b in bs))
    st['two'] = True


def t_join(run, etcd, bs, st):
    t0 = time.monotonic()
    bs.append(run.broker(3, overrides=overrides(etcd)))
    lay = h.wait_until(lambda: (lambda x: x if x and len(x) == 50 and all(v[0] >= 0 for v in x.values()) else None)(
        offsets_layout(bs[0])), 30, f'{OFFSETS} with 50 led partitions')
    figures.append(f'{OFFSETS} led in every partition {time.monotonic() - t0:.1f} s after the third broker started')
    ok(f'the third broker joined: {OFFSETS} was created with no FindCoordinator sent since')
    eq('50 partitions, each with 3 distinct replicas', {3}, {len(set(v[1])) for v in lay.values()})
    lay = h.wait_until(lambda: (lambda x: x if x and all(sorted(v[2]) == sorted(v[1]) for v in x.values())
                                else None)(offsets_layout(bs[0])), 30, 'every ISR of 3')
    ok('every partition\'s ISR is its 3 replicas')
    eq('leaders spread 17/17/16', [16, 17, 17], sorted(sum(1 for v in lay.values() if v[0] == n) for n in (1, 2, 3)))
    coords = h.wait_until(lambda: (lambda r: r if all(x[0] == 0 for x in r.values()) else None)(
        {b.node_id: find(b, GROUP) for b in bs}), 20, 'FindCoordinator answers on every broker')
    eq('FindCoordinator names the same broker on every broker', 1, len({v[1] for v in coords.values()}))
    st['joined'] = True


def consumer(bs):
    from confluent_kafka import Consumer
    return Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': GROUP,
                     'enable.auto.commit': False, 'auto.offset.reset': 'earliest', 'session.timeout.ms': 6000,
                     'heartbeat.interval.ms': 500, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})


def produce(bs, values):
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all', 'linger.ms': 5,
                  'message.timeout.ms': 20000, 'log_level': 2})
    errors = []
    for i, v in enumerate(values):
        p.produce(TOPIC, value=v.encode(), partition=i % PARTITIONS,
                  on_delivery=lambda err, msg: err and errors.append(str(err)))
        p.poll(0)
    p.flush(30)
    return errors


def read(c, n, settle=1.5, limit=40):
    got, end = [], time.monotonic() + limit
    while len(got) < n and time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
    end = time.monotonic() + settle
    while time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
    return got


def t_group(run, etcd, bs, st):
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': TOPIC, 'num_partitions': PARTITIONS,
                                                      'replication_factor': 3, 'assignments': [], 'configs': []}],
                                          'timeout_ms': 15000, 'validate_only': False})['topics'][0]
    eq(f'CreateTopics {TOPIC}: {PARTITIONS} partitions, replication factor 3', (0, 3),
       (r['error_code'], r['replication_factor']))
    first = [f'first-{i}' for i in range(90)]
    eq('90 records produced (acks=all)', [], produce(bs, first)[:3])
    c = consumer(bs)
    c.subscribe([TOPIC])
    try:
        got = read(c, len(first))
        eq('a group consumer reads the 90', sorted(first), sorted(got))
        err = None
        try:
            c.commit(asynchronous=False)
        except Exception as e:  # noqa: BLE001 - the commit's error is the check
            err = str(e)
        eq('its synchronous commit succeeds', None, err)
    finally:
        c.close()
    second = [f'second-{i}' for i in range(60)]
    eq('60 more records produced', [], produce(bs, second)[:3])
    c = consumer(bs)
    c.subscribe([TOPIC])
    try:
        got = read(c, len(second))
    finally:
        c.close()
    eq('a restarted consumer of the group resumes from the commit: exactly the 60 new records',
       sorted(second), sorted(got))


def main():
    seed, deadline = h.cli(deadline_s=150.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-replication-default') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2)]
        section(f'two brokers: no {OFFSETS} at factor 3', t_two, run, etcd, bs, st)
        if 'two' in st:
            section('a third broker joins', t_join, run, etcd, bs, st)
        if 'joined' in st:
            section('a group consumer commits and resumes', t_group, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-replication-default: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
