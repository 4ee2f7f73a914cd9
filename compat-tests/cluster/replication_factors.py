"""replication_factors.py: replication factors in cluster mode and on a single node (issue #20). A cluster
takes a replication factor above 1 as Kafka does (the former switch gregor.cluster.replication.enable was
removed: a broker given it logs that it was removed and starts); a single-node broker refuses one. Two runs,
each bounded in time and seeded (harness.py: everything started is stopped at the end).

Cluster (etcd and three gregor brokers on the host, default.replication.factor=2; broker 3 is given the
removed key):
  - broker 3 logs that gregor.cluster.replication.enable was removed, and runs;
  - CreateTopics of 6 partitions with replication factor 3 answers NONE with factor 3; every broker's
    Metadata (v12) then shows each partition with 3 distinct replicas, the ISR equal to them (all assigned
    replicas), the leader its first replica, and the leaders spread 2 per broker;
  - replication factor 4 over three brokers: INVALID_REPLICATION_FACTOR with Kafka 4's message
    ("Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached
    because only 3 broker(s) are registered.");
  - replication factor -1: default.replication.factor (2 replicas per partition);
  - a manual assignment [[1, 2], [2, 3]] is created as given; [[1, 1]] and [[1, 2], [3]] are refused with
    INVALID_REPLICA_ASSIGNMENT and Kafka's words;
  - min.insync.replicas=0 on an RF 3 topic: INVALID_CONFIG.
Single node (one broker, no etcd; replaces the former "setting off" run):
  - replication factor 3: INVALID_REPLICATION_FACTOR with Kafka 4's words for a one-broker cluster; factor 1
    is created with one replica; the refused topic was not created;
  - a broker with default.replication.factor=2, or with offsets.topic.replication.factor=3 set, refuses to
    start, naming the setting (offsets.topic.replication.factor left unset means 1 there: the broker above
    started with Kafka's default 3 in its table).
Ends with `cluster-replication-factors: N passed, N failed`; exit status 1 on any failure.
Usage: replication_factors.py [--seed N] [--deadline SECONDS]
Read next: server/config.c, cluster/topic_writer_etcd.c, cluster/topic_writer_local.c,
server/handlers/topic_layout.c.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402  (compat-tests/lib: the counted checks every suite uses)
from testkit import check, eq, section  # noqa: E402

PREFIX = '/gregor'
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
REMOVED = 'gregor.cluster.replication.enable'


def overrides(etcd, extra=()):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false'] + list(extra)


def create(b, name, partitions=-1, rf=-1, assignments=None, configs=None):
    """One CreateTopics v7 through broker b; returns the topic's result."""
    topic = {'name': name, 'num_partitions': partitions, 'replication_factor': rf,
             'assignments': [{'partition_index': i, 'broker_ids': ids} for i, ids in enumerate(assignments or [])],
             'configs': [{'name': n, 'value': v} for n, v in (configs or {}).items()]}
    with k.Conn(b.bootstrap, timeout=30) as c:
        return c.request('CreateTopics', 7, {'topics': [topic], 'timeout_ms': 15000, 'validate_only': False})[
            'topics'][0]


def layout(b, name):
    """{partition: (leader, replicas, isr)} of `name` in b's Metadata v12, or None when absent."""
    try:
        with k.Conn(b.bootstrap, timeout=5) as c:
            m = k.metadata(c, [name], version=12, allow_auto=False)
    except Exception:  # noqa: BLE001 - not yet
        return None
    for t in m['topics']:
        if t['name'] == name and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], list(p['replica_nodes']), list(p['isr_nodes']))
                    for p in t['partitions']}
    return None


def all_show(bs, name, partitions):
    return h.wait_until(lambda: (lambda ls: ls[0] if all(x is not None and len(x) == partitions for x in ls) and
                                 all(x == ls[0] for x in ls) else None)([layout(b, name) for b in bs]),
                        10, f'every broker shows {name}')


def t_removed_key(run, etcd, bs, st):
    check('broker 3, given the removed key, logs that it was removed and runs',
          f'{REMOVED} was removed' in bs[2].log_tail(400) and bs[2].proc.alive(), bs[2].log_tail(20))


def t_rf3(run, etcd, bs, st):
    r = create(bs[0], 'rf3', 6, 3)
    eq('CreateTopics rf 3, 6 partitions: NONE', (0, None), (r['error_code'], r['error_message']))
    eq('the answer gives replication factor 3 and 6 partitions', (3, 6),
       (r['replication_factor'], r['num_partitions']))
    lay = all_show(bs, 'rf3', 6)
    eq('every partition: 3 distinct replicas', {3}, {len(set(v[1])) for v in lay.values()})
    eq('every partition: the ISR is every assigned replica', True,
       all(sorted(v[2]) == sorted(v[1]) for v in lay.values()))
    eq('every partition: led by its first replica', True, all(v[0] == v[1][0] for v in lay.values()))
    eq('leaders spread: 2 per broker', {1: 2, 2: 2, 3: 2},
       {n: sum(1 for v in lay.values() if v[0] == n) for n in (1, 2, 3)})


def t_refusals_on(run, etcd, bs, st):
    r = create(bs[1], 'rf4', 1, 4)
    eq('rf 4 over three brokers: INVALID_REPLICATION_FACTOR with Kafka 4\'s message',
       (INVALID_REPLICATION_FACTOR, 'Unable to replicate the partition 4 time(s): The target replication factor '
        'of 4 cannot be reached because only 3 broker(s) are registered.'),
       (r['error_code'], r['error_message']))
    r = create(bs[2], 'twice', assignments=[[1, 1]])
    eq('assignment [[1, 1]]: INVALID_REPLICA_ASSIGNMENT, Kafka\'s words',
       (INVALID_REPLICA_ASSIGNMENT, 'The manual partition assignment includes the broker 1 more than once.'),
       (r['error_code'], r['error_message']))
    r = create(bs[0], 'ragged', assignments=[[1, 2], [3]])
    eq('assignment [[1, 2], [3]]: INVALID_REPLICA_ASSIGNMENT, Kafka\'s words',
       (INVALID_REPLICA_ASSIGNMENT, 'The manual partition assignment includes a partition with 1 replica(s), '
        'but this is not consistent with previous partitions, which have 2 replica(s).'),
       (r['error_code'], r['error_message']))
    r = create(bs[0], 'badmin', 1, 3, configs={'min.insync.replicas': '0'})
    eq('min.insync.replicas=0: INVALID_CONFIG', INVALID_CONFIG, r['error_code'])
    check('nothing of the refused topics was created',
          all(layout(bs[0], n) is None for n in ('rf4', 'twice', 'ragged', 'badmin')))


def t_defaults_on(run, etcd, bs, st):
    r = create(bs[0], 'rfdefault', 2)
    eq('rf -1 with default.replication.factor=2: NONE, factor 2', (0, 2), (r['error_code'], r['replication_factor']))
    lay = all_show(bs, 'rfdefault', 2)
    eq('each partition has 2 distinct replicas, all in the ISR', {(2, 2)},
       {(len(set(v[1])), len(v[2])) for v in lay.values()})
    r = create(bs[1], 'manual', assignments=[[1, 2], [2, 3]])
    eq('assignment [[1, 2], [2, 3]]: NONE, factor 2', (0, 2), (r['error_code'], r['replication_factor']))
    lay = all_show(bs, 'manual', 2)
    eq('created as assigned, led by the first replica',
       {0: (1, [1, 2]), 1: (2, [2, 3])}, {p: (v[0], v[1]) for p, v in lay.items()})


def t_single(run, etcd, bs, st):
    r = create(bs[0], 'one3', 2, 3)
    eq('single node: rf 3 is INVALID_REPLICATION_FACTOR with Kafka 4\'s words for one broker',
       (INVALID_REPLICATION_FACTOR, 'Unable to replicate the partition 3 time(s): The target replication factor '
        'of 3 cannot be reached because only 1 broker(s) are registered.'), (r['error_code'], r['error_message']))
    r = create(bs[0], 'one1', 3, 1)
    eq('single node: rf 1 is created', (0, 1), (r['error_code'], r['replication_factor']))
    lay = all_show(bs, 'one1', 3)
    eq('one replica per partition, in the ISR', {(1, 1)}, {(len(v[1]), len(v[2])) for v in lay.values()})
    check('one3 was not created', layout(bs[0], 'one3') is None)


def t_refuses_start(run, etcd, bs, st):
    for i, (key, value) in enumerate((('default.replication.factor', 2), ('offsets.topic.replication.factor', 3))):
        b = run.broker(5 + i, overrides=['auto.create.topics.enable=false', f'{key}={value}'], start=False)
        try:
            b.start(timeout=20)
            check(f'single node, {key}={value}: the broker refuses to start', False)
        except h.HarnessError as e:
            check(f'single node, {key}={value}: the broker refuses to start, naming it',
                  f'{key} must be 1 on a single-node broker' in str(e), str(e)[-300:])


def main():
    seed, deadline = h.cli(deadline_s=120.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline / 2, label='cluster-replication-factors') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd, ['default.replication.factor=2'] +
                                                ([f'{REMOVED}=true'] if i == 3 else []))) for i in (1, 2, 3)]
        section('cluster: the removed switch', t_removed_key, run, etcd, bs, st)
        section('cluster: an RF 3 topic', t_rf3, run, etcd, bs, st)
        section('cluster: refusals', t_refusals_on, run, etcd, bs, st)
        section('cluster: default factor and manual assignment', t_defaults_on, run, etcd, bs, st)
    with h.Run(seed=seed, deadline_s=deadline / 2, label='single-node-replication-factors') as run:
        bs = [run.broker(1, overrides=['auto.create.topics.enable=false'])]
        section('single node: one replica', t_single, run, None, bs, st)
        section('single node: a factor above 1 in the config', t_refuses_start, run, None, bs, st)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-replication-factors: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
