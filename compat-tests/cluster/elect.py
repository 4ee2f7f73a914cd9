"""elect.py: preferred leader election in a 3-broker cluster (issue #24; cluster/controller.h
gr_controller_elect, server/handlers/elect_leaders.c). etcd and three gregor brokers on the host
(harness.py), seeded and bounded in time; Kafka's kafka-leader-election.sh (KAFKA_BIN's, as
compat-tests/kafka-dist/get-kafka.sh makes it).

What it checks:
  - an RF 3 topic of 3 partitions assigned [1,2,3], [1,3,2], [2,3,1] (auto.leader.rebalance.enable=false):
    every partition led by its preferred replica, ISR full; records produced acks=all to each;
  - broker 1 stopped (SIGTERM, controlled shutdown): partitions 0 and 1 led by another broker; acks=all
    produce keeps working; kafka-leader-election.sh --election-type preferred on partition 0 reports
    PreferredLeaderNotAvailable while broker 1 is down;
  - broker 1 back and in every ISR: kafka-leader-election.sh --election-type preferred
    --all-topic-partitions moves leadership back: Metadata shows leaders 1, 1, 2 with partitions 0 and 1 at a
    higher leader epoch; acks=all produce still works and every acknowledged record reads back from the
    leaders; a second run on partition 0 reports the election not needed (ELECTION_NOT_NEEDED), so does an
    UNCLEAN election of a partition with a leader; partition 7 answers UNKNOWN_TOPIC_OR_PARTITION; a raw
    ElectLeaders to a broker that is not the controller answers NOT_CONTROLLER, and one naming a partition
    twice answers INVALID_REQUEST for the second;
  - the automatic rebalance: the three brokers restarted with auto.leader.rebalance.enable=true and
    leader.imbalance.check.interval.seconds=2, broker 1 last: it gets partitions 0 and 1 back by itself.
Ends with `cluster-elect: N passed, N failed`; exit status 1 on any failure.
Usage: elect.py [--seed N] [--deadline SECONDS]
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
from testkit import check, eq, section  # noqa: E402

REPO = os.environ.get('REPO', os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'differential'))
import diff  # noqa: E402  (every API's schema from protocol/schema, for the raw ElectLeaders below)

diff.install_schemas(diff.load_schemas(os.path.join(REPO, 'protocol', 'schema')))

PREFIX = '/gregor'
TOPIC = 'el'
ASSIGN = [[1, 2, 3], [1, 3, 2], [2, 3, 1]]
PREFERRED = {p: a[0] for p, a in enumerate(ASSIGN)}

def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=6000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', 'replica.lag.time.max.ms=2000', 'replica.fetch.backoff.ms=200',
            'auto.leader.rebalance.enable=false']


def tool(*args):
    return h.kafka_tool('kafka-leader-election.sh', *args, timeout=60)


def layout(bs):
    """{partition: (leader, leader_epoch, sorted isr)} from the first broker that answers, or None."""
    for b in bs:
        try:
            with k.Conn(b.bootstrap, timeout=5) as c:
                md = k.metadata(c, [TOPIC], version=12, allow_auto=False)
        except Exception:  # noqa: BLE001 - stopped or starting
            continue
        for t in md['topics']:
            if t['name'] == TOPIC and t['error_code'] == 0:
                return {p['partition_index']: (p['leader_id'], p['leader_epoch'], sorted(p['isr_nodes']))
                        for p in t['partitions']}
    return None


def produce(bs, st, tag, n=5):
    """Produces n records acks=all to each partition through its leader; notes the acknowledged ones."""
    by_id = {b.node_id: b for b in bs}
    errs = []
    for p in range(len(ASSIGN)):
        lay = h.wait_until(lambda: (lambda x: x if x and x[p][0] in by_id else None)(layout(bs)), 20,
                           f'a live leader for {TOPIC}-{p}')
        vals = [f'{tag}-{p}-{i}'.encode() for i in range(n)]
        with k.Conn(by_id[lay[p][0]].bootstrap, timeout=15) as c:
            r = k.produce(c, TOPIC, p, k.build_batch([(b'k', v) for v in vals]), acks=-1)
        if r['error_code'] == 0:
            st['acked'].setdefault(p, []).extend(vals)
        else:
            errs.append((p, r['error_code']))
    return errs


def read_back(bs, p, leader):
    by_id = {b.node_id: b for b in bs}
    out, off = [], 0
    with k.Conn(by_id[leader].bootstrap, timeout=15) as c:
        for _ in range(100):
            r = k.fetch(c, TOPIC, p, off)['responses'][0]['partitions'][0]
            recs = k.records_of(r)
            if r['error_code'] or not recs:
                break
            for rec in recs:
                out.append(rec['value'])
            off = r['high_watermark'] if off + len(recs) >= r['high_watermark'] else off + len(recs)
            if off >= r['high_watermark']:
                break
    return out


def t_setup(run, etcd, bs, st):
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{
            'name': TOPIC, 'num_partitions': -1, 'replication_factor': -1, 'configs': [],
            'assignments': [{'partition_index': p, 'broker_ids': a} for p, a in enumerate(ASSIGN)]}],
            'timeout_ms': 15000, 'validate_only': False})['topics'][0]
    eq(f'CreateTopics {TOPIC} with assignments', 0, r['error_code'])
    lay = h.wait_until(lambda: (lambda x: x if x and all(v[0] == PREFERRED[p] and v[2] == [1, 2, 3]
                                                         for p, v in x.items()) else None)(layout(bs)),
                       20, 'preferred leaders, ISR full')
    eq('every partition led by its preferred replica', PREFERRED, {p: v[0] for p, v in lay.items()})
    st['acked'] = {}
    eq('acks=all produce to every partition', [], produce(bs, st, 'a'))


def t_broker1_down(run, etcd, bs, st):
    bs[0].stop()
    lay = h.wait_until(lambda: (lambda x: x if x and all(v[0] not in (1, -1) for v in x.values()) else None)(
        layout(bs[1:])), 20, 'partitions 0 and 1 led by another broker')
    check('leadership moved off broker 1', all(v[0] != 1 for v in lay.values()), str(lay))
    st['moved'] = lay
    eq('acks=all produce with broker 1 down', [], produce(bs[1:], st, 'b'))
    rc, out = tool('--bootstrap-server', bs[1].bootstrap, '--election-type', 'preferred', '--topic', TOPIC,
                   '--partition', 0)
    check('kafka-leader-election.sh while broker 1 is down: PreferredLeaderNotAvailable for partition 0',
          'PreferredLeaderNotAvailable' in out, out[-600:])


def t_elect_back(run, etcd, bs, st):
    bs[0].start(same_ports=True)
    h.wait_until(lambda: (lambda x: x if x and all(v[2] == [1, 2, 3] for v in x.values()) else None)(
        layout(bs)), 30, 'broker 1 back in every ISR')
    before = layout(bs)
    eq('still led elsewhere before the election', {0: True, 1: True},
       {p: before[p][0] != 1 for p in (0, 1)})
    rc, out = tool('--bootstrap-server', bs[2].bootstrap, '--election-type', 'preferred',
                   '--all-topic-partitions')
    check('kafka-leader-election.sh --all-topic-partitions succeeds for el-0 and el-1',
          rc == 0 and 'Successfully completed leader election (PREFERRED)' in out and f'{TOPIC}-0' in out
          and f'{TOPIC}-1' in out, out[-600:])
    after = layout(bs)
    eq('Metadata shows the preferred leaders at once', PREFERRED, {p: v[0] for p, v in after.items()})
    eq('leader epochs of partitions 0 and 1 bumped, partition 2 unchanged', {0: True, 1: True, 2: True},
       {0: after[0][1] > before[0][1], 1: after[1][1] > before[1][1], 2: after[2][1] == before[2][1]})
    eq('acks=all produce after the election', [], produce(bs, st, 'c'))
    got = {p: read_back(bs, p, after[p][0]) for p in range(len(ASSIGN))}
    eq('every acknowledged record reads back from the leaders', {p: st['acked'][p] for p in range(len(ASSIGN))},
       {p: [v for v in got[p] if v in st['acked'][p]] for p in range(len(ASSIGN))})
    rc, out = tool('--bootstrap-server', bs[1].bootstrap, '--election-type', 'preferred', '--topic', TOPIC,
                   '--partition', 0)
    check('a second run: the election is not needed (ELECTION_NOT_NEEDED)',
          'Valid replica already elected' in out, out[-600:])
    rc, out = tool('--bootstrap-server', bs[0].bootstrap, '--election-type', 'unclean', '--topic', TOPIC,
                   '--partition', 1)
    check('--election-type unclean on a partition with a leader: not needed (ELECTION_NOT_NEEDED)',
          'Valid replica already elected' in out, out[-600:])
    rc, out = tool('--bootstrap-server', bs[0].bootstrap, '--election-type', 'preferred', '--topic', TOPIC,
                   '--partition', 7)
    check('a partition the topic does not have: UnknownTopicOrPartition',
          rc != 0 and 'UnknownTopicOrPartition' in out, out[-600:])
    with k.Conn(bs[0].bootstrap, timeout=10) as c:
        ctl = k.metadata(c, [], version=12, allow_auto=False)['controller_id']
    by_id = {b.node_id: b for b in bs}
    other = next(b for b in bs if b.node_id != ctl)
    body = {'election_type': 0, 'topic_partitions': [{'topic': TOPIC, 'partitions': [2, 2]}], 'timeout_ms': 5000}
    with k.Conn(other.bootstrap, timeout=10) as c:
        r = c.request('ElectLeaders', 2, body)
    eq(f'raw ElectLeaders to broker {other.node_id}, not the controller: NOT_CONTROLLER', (41, []),
       (r['error_code'], r['replica_election_results']))
    with k.Conn(by_id[ctl].bootstrap, timeout=10) as c:
        r = c.request('ElectLeaders', 2, body)
    eq('raw ElectLeaders to the controller naming partition 2 twice: ELECTION_NOT_NEEDED, then INVALID_REQUEST',
       (0, [(2, 84), (2, 42)]), (r['error_code'], [(p['partition_id'], p['error_code'])
                                                   for p in r['replica_election_results'][0]['partition_result']]))
    st['elected'] = True


def t_auto(run, etcd, bs, st):
    extra = ['auto.leader.rebalance.enable=true', 'leader.imbalance.check.interval.seconds=2']
    for b in bs:
        b.stop()
    for b in bs[1:]:
        b.start(extra=extra, same_ports=True)
    h.wait_until(lambda: (lambda x: x if x and all(v[0] in (2, 3) for v in x.values()) else None)(
        layout(bs[1:])), 30, 'brokers 2 and 3 lead everything')
    bs[0].start(extra=extra, same_ports=True)
    t0 = time.monotonic()
    try:
        lay = h.wait_until(lambda: (lambda x: x if x and all(v[0] == PREFERRED[p] for p, v in x.items())
                                    else None)(layout(bs)), 30, 'the rebalance moves leadership back')
    except h.HarnessError:
        lay = layout(bs)
    eq(f'the automatic rebalance gives broker 1 its partitions back ({time.monotonic() - t0:.1f} s after its '
       f'start)', PREFERRED, {p: v[0] for p, v in (lay or {}).items()})


def main():
    seed, deadline = h.cli(deadline_s=120.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-elect') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('an RF 3 topic led by its preferred replicas', t_setup, run, etcd, bs, st)
        if 'acked' in st:
            section('broker 1 down: leadership moves, preferred not available', t_broker1_down, run, etcd, bs, st)
        if 'moved' in st:
            section('broker 1 back: kafka-leader-election.sh moves leadership back', t_elect_back, run, etcd, bs,
                    st)
        if 'elected' in st:
            section('the automatic rebalance', t_auto, run, etcd, bs, st)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-elect: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
