"""groups.py: consumer groups across a 3-broker cluster (issue #19, "Groups across the cluster"): etcd and three
gregor brokers on the host (INTERNAL and EXTERNAL listeners on free loopback ports), as in e2e.py; runs as
root through harness.py, seeded and bounded in time.

What it checks (broker.session.timeout.ms 3000, so a lease lives 3 s; offsets.topic.num.partitions 50;
offsets.topic.replication.factor 1, set here: this suite checks single-replica coordinators, whose group is
unavailable while their broker is down; replication_default.py runs the default 3):
  - the first FindCoordinator on each of the three brokers (sent while etcd is paused, so the three
    creations race) answers COORDINATOR_NOT_AVAILABLE and has __consumer_offsets created once (one "created __consumer_offsets" log line over the three brokers):
    50 single-replica partitions whose leaders are spread 17/17/16 over the brokers, the same topic id and
    leaders on every broker;
  - for 20 group names, FindCoordinator v3 (one key) and v4 (the 20 keys batched) on every broker names the
    same broker, with that broker's EXTERNAL endpoint, and it is the Metadata leader of partition
    abs(hashCode(group)) % 50 (Java's String.hashCode and Kafka's Utils.abs, computed here);
  - three librdkafka (confluent-kafka) consumers in one group on a 12-partition topic led by the three
    brokers: 4 partitions each, every record produced after the assignment read exactly once, commits land
    at the coordinator (OffsetFetch there returns them), OffsetFetch and Heartbeat at another broker get
    NOT_COORDINATOR;
  - an OffsetCommit for a topic none of whose partitions the coordinator holds is accepted and fetched back;
  - kill -9 the group's coordinator: FindCoordinator at the others answers COORDINATOR_NOT_AVAILABLE until it
    is back; restarted, it loads the group again (OffsetFetch equal to before, COORDINATOR_LOAD_IN_PROGRESS
    at most meanwhile) and a new consumer of the group reads only the records produced after the commit.
Ends with `cluster-groups: N passed, N failed`; exit status 1 on any failure.
Usage: groups.py [--seed N] [--deadline SECONDS]
Read next: server/groups.c, coordinator/ownership.c, e2e.py.
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
from testkit import check, eq, fail, ok, section  # noqa: E402,F401

SESSION_MS = 3000
PREFIX = '/gregor'
OFFSETS = '__consumer_offsets'
OFFSETS_PARTITIONS = 50
TOPIC = 'groups-12'
PARTITIONS = 12
GROUP = 'cluster-group'
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
NAMES = [f'group-{i}' for i in range(18)] + ['', 'ünïcode-grüppe']  # 20 names, one empty, one non-ASCII
figures = []


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            f'broker.session.timeout.ms={SESSION_MS}', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', 'offsets.topic.replication.factor=1']


def java_hash(s):
    """Java's String.hashCode: over UTF-16 code units, 32-bit signed arithmetic."""
    units = s.encode('utf-16-be')
    hv = 0
    for i in range(0, len(units), 2):
        hv = (31 * hv + int.from_bytes(units[i:i + 2], 'big')) & 0xffffffff
    return hv - (1 << 32) if hv >= 1 << 31 else hv


def partition_for(group, n=OFFSETS_PARTITIONS):
    hv = java_hash(group)
    return (0 if hv == -(1 << 31) else abs(hv)) % n  # Kafka's Utils.abs


def find(b, key, version=3):
    with k.Conn(b.bootstrap, timeout=5) as c:
        r = c.request('FindCoordinator', version, {'key': key, 'key_type': 0})
    return r['error_code'], r['node_id'], f"{r['host']}:{r['port']}"


def find_batch(b, keys):
    with k.Conn(b.bootstrap, timeout=5) as c:
        r = c.request('FindCoordinator', 4, {'key_type': 0, 'coordinator_keys': keys})
    return {x['key']: (x['error_code'], x['node_id'], f"{x['host']}:{x['port']}") for x in r['coordinators']}


def try_find(b, key):
    try:
        return find(b, key)
    except Exception:  # noqa: BLE001 - a broker restarting
        return None


def offsets_parts(b):
    """{partition: (leader, replicas)} of __consumer_offsets in b's Metadata (None when absent) and its id."""
    with k.Conn(b.bootstrap, timeout=5) as c:
        m = k.metadata(c, [OFFSETS], version=12, allow_auto=False)
    for t in m['topics']:
        if t['name'] == OFFSETS and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], tuple(p['replica_nodes'])) for p in t['partitions']}, \
                t['topic_id']
    return None, None


def offset_fetch(b, group, partitions=range(PARTITIONS)):
    """(top-level error, {partition: committed offset}) from OffsetFetch v6 at b."""
    with k.Conn(b.bootstrap, timeout=5) as c:
        r = c.request('OffsetFetch', 6, {'group_id': group,
                                         'topics': [{'name': TOPIC, 'partition_indexes': list(partitions)}]})
    offs = {p['partition_index']: p['committed_offset'] for t in r['topics'] for p in t['partitions']}
    return r['error_code'], offs


def heartbeat(b, group):
    with k.Conn(b.bootstrap, timeout=5) as c:
        return c.request('Heartbeat', 3, {'group_id': group, 'generation_id': 1, 'member_id': 'm',
                                          'group_instance_id': None})['error_code']


def t_find(run, etcd, bs, st):
    # etcd paused (SIGSTOP) while the three first requests arrive: each broker answers at once, sees no
    # __consumer_offsets and has its topic writer send the creation txn; resumed, one txn wins and the others
    # find the topic exists (TOPIC_ALREADY_EXISTS), whatever the brokers' scheduling on a loaded machine
    etcd.pause()
    try:
        first = {}
        for b in bs:
            try:
                first[b.node_id] = find(b, NAMES[0])[0]
            except Exception as e:  # noqa: BLE001
                first[b.node_id] = str(e)
    finally:
        etcd.resume()
    eq('the first FindCoordinator on every broker (etcd paused): COORDINATOR_NOT_AVAILABLE at once',
       {b.node_id: COORDINATOR_NOT_AVAILABLE for b in bs}, first)
    t0 = time.monotonic()
    h.wait_until(lambda: all((try_find(b, NAMES[0]) or (-1,))[0] == 0 for b in bs), 20,
                 'FindCoordinator answers on every broker')
    figures.append(f'first FindCoordinator to a coordinator on every broker: {time.monotonic() - t0:.2f} s')
    pp, tid = offsets_parts(bs[0])
    check(f'{OFFSETS} exists with {OFFSETS_PARTITIONS} partitions', pp is not None and len(pp) == OFFSETS_PARTITIONS,
          repr(pp and len(pp)))
    if not pp:
        return
    eq('every partition has one replica, its leader', {(v[0],) for v in pp.values()} if pp else None,
       {v[1] for v in pp.values()})
    counts = sorted(sum(1 for v in pp.values() if v[0] == n) for n in (1, 2, 3))
    eq('leaders spread 16/17/17 over the three brokers', [16, 17, 17], counts)
    for b in bs[1:]:
        eq(f'broker {b.node_id}: the same {OFFSETS} (id and leaders)', (pp, tid), offsets_parts(b))
    created = 0
    for b in bs:
        with open(b.proc.log_path, 'rb') as f:
            created += f.read().decode('utf-8', 'replace').count(f'created {OFFSETS} with')
    eq(f'{OFFSETS} created once over the three brokers (one "created {OFFSETS}" log line)', 1, created)
    addr = {b.node_id: b.bootstrap for b in bs}
    want = {g: (0, pp[partition_for(g)][0], addr[pp[partition_for(g)][0]]) for g in NAMES}
    for b in bs:
        got = {g: find(b, g) for g in NAMES}
        eq(f'broker {b.node_id}: FindCoordinator v3 for 20 groups names the leader of abs(hash) % 50 '
           'at its EXTERNAL endpoint', want, got)
        eq(f'broker {b.node_id}: FindCoordinator v4 with the 20 keys batched, the same', want, find_batch(b, NAMES))
    eq('the 20 groups have coordinators on all three brokers', {1, 2, 3}, {v[1] for v in want.values()})
    st['offsets'] = pp


def consumer(bs, **extra):
    from confluent_kafka import Consumer
    conf = {'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': GROUP,
            'enable.auto.commit': False, 'auto.offset.reset': 'earliest', 'session.timeout.ms': 6000,
            'heartbeat.interval.ms': 500, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2}
    conf.update(extra)
    return Consumer(conf)


def produce(bs, values):
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all',
                  'linger.ms': 5, 'message.timeout.ms': 20000, 'log_level': 2})
    errors = []
    for i, v in enumerate(values):
        p.produce(TOPIC, value=v.encode(), partition=i % PARTITIONS,
                  on_delivery=lambda err, msg: err and errors.append(str(err)))
        p.poll(0)
    p.flush(30)
    return errors


def coordinator_of(bs, group):
    for b in bs:
        r = try_find(b, group)
        if r and r[0] == 0:
            return next(x for x in bs if x.node_id == r[1])
    return None


def t_group(run, etcd, bs, st):
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        eq(f'CreateTopics {TOPIC} ({PARTITIONS} partitions)', 0, k.create_topic(c, TOPIC, PARTITIONS)['error_code'])
    cs = [consumer(bs) for _ in range(3)]
    for c in cs:
        c.subscribe([TOPIC])
    got, t0 = [], time.monotonic()

    def poll_all(t=0.1):
        for c in cs:
            m = c.poll(t)
            if m is not None and not m.error():
                got.append((m.partition(), m.offset(), m.value().decode()))
    try:
        def assigned():
            poll_all()
            return all(len(c.assignment()) == 4 for c in cs)
        h.wait_until(assigned, 40, 'three consumers with 4 partitions each', interval=0)
        parts = [sorted(tp.partition for tp in c.assignment()) for c in cs]
        eq('three consumers, 4 partitions each, together the 12', sorted(range(PARTITIONS)),
           sorted(p for ps in parts for p in ps))
        figures.append(f'group of three consumers assigned in {time.monotonic() - t0:.1f} s')
        n = 600
        values = [f'first-{i}' for i in range(n)]
        eq(f'{n} records produced', [], produce(bs, values)[:3])
        end = time.monotonic() + 30
        while len(got) < n and time.monotonic() < end:
            poll_all()
        for _ in range(10):
            poll_all()
        eq('every record read exactly once by the group', sorted(values), sorted(v for _, _, v in got))
        for c in cs:
            c.commit(asynchronous=False)
    finally:
        for c in cs:
            c.close()
    hw = {}
    for p, o, _ in got:
        hw[p] = max(hw.get(p, 0), o + 1)
    coord = coordinator_of(bs, GROUP)
    check(f'group {GROUP} has a coordinator', coord is not None)
    if coord is None:
        return
    eq(f'broker {coord.node_id} coordinates {GROUP}: it leads partition {partition_for(GROUP)} of {OFFSETS}',
       st['offsets'][partition_for(GROUP)][0], coord.node_id)
    eq(f'OffsetFetch at the coordinator (broker {coord.node_id}): the committed positions', (0, hw),
       offset_fetch(coord, GROUP))
    for b in bs:
        if b is coord:
            continue
        eq(f'OffsetFetch at broker {b.node_id}: NOT_COORDINATOR', NOT_COORDINATOR, offset_fetch(b, GROUP)[0])
        eq(f'Heartbeat at broker {b.node_id}: NOT_COORDINATOR', NOT_COORDINATOR, heartbeat(b, GROUP))
    st['committed'] = hw


def t_remote_topic(run, etcd, bs, st):
    """A commit for a topic none of whose partitions the coordinator holds (topics are the cluster's)."""
    name = 'groups-1'
    with k.Conn(bs[1].bootstrap, timeout=30) as c:
        eq(f'CreateTopics {name} (1 partition)', 0, k.create_topic(c, name, 1)['error_code'])
    with k.Conn(bs[0].bootstrap, timeout=5) as c:
        t = [t for t in k.metadata(c, [name], version=12, allow_auto=False)['topics'] if t['name'] == name][0]
    leader = t['partitions'][0]['leader_id']
    group = next(g for g in NAMES if g and st['offsets'][partition_for(g)][0] != leader)
    coord = next(b for b in bs if b.node_id == st['offsets'][partition_for(group)][0])
    with k.Conn(coord.bootstrap, timeout=10) as c:
        r = c.request('OffsetCommit', 8, {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '',
                                          'group_instance_id': None, 'topics': [{'name': name, 'partitions': [
                                              {'partition_index': 0, 'committed_offset': 42,
                                               'committed_metadata': 'm'}]}]})
        code = r['topics'][0]['partitions'][0]['error_code']
        f = c.request('OffsetFetch', 6, {'group_id': group, 'topics': [{'name': name, 'partition_indexes': [0]}]})
    eq(f'OffsetCommit of {name}/0 (led by broker {leader}) at {group}\'s coordinator, broker {coord.node_id}',
       0, code)
    eq('OffsetFetch there returns it', (0, 42), (f['error_code'], f['topics'][0]['partitions'][0]['committed_offset']))


def t_kill_coordinator(run, etcd, bs, st):
    coord = coordinator_of(bs, GROUP)
    others = [b for b in bs if b is not coord]
    before = offset_fetch(coord, GROUP)
    t0 = time.monotonic()
    coord.kill9()

    def unavailable():
        return all((try_find(b, GROUP) or (-1,))[0] == COORDINATOR_NOT_AVAILABLE for b in others)
    h.wait_until(unavailable, SESSION_MS / 1000 + 10, 'COORDINATOR_NOT_AVAILABLE on the others')
    ok(f'kill -9 the coordinator (broker {coord.node_id}): the others answer COORDINATOR_NOT_AVAILABLE '
       f'after {time.monotonic() - t0:.1f} s')
    time.sleep(1.0)
    check('and still 1 s later (nobody else takes the group over)', unavailable())
    for b in others:
        eq(f'OffsetFetch at broker {b.node_id} meanwhile: NOT_COORDINATOR', NOT_COORDINATOR,
           offset_fetch(b, GROUP)[0])
    t1 = time.monotonic()
    coord.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)
    h.wait_until(lambda: all((try_find(b, GROUP) or (-1, -1))[:2] == (0, coord.node_id) for b in bs), 20,
                 f'broker {coord.node_id} coordinates {GROUP} again')
    codes = set()

    def loaded():
        r = offset_fetch(coord, GROUP)
        codes.add(r[0])
        return r if r[0] == 0 else None
    after = h.wait_until(loaded, 20, 'the group loaded again')
    ok(f'restarted, broker {coord.node_id} coordinates {GROUP} again after {time.monotonic() - t1:.1f} s')
    check('meanwhile at most COORDINATOR_LOAD_IN_PROGRESS', codes <= {0, COORDINATOR_LOAD_IN_PROGRESS}, repr(codes))
    eq('OffsetFetch after the restart equals before the kill', before, after)
    values = [f'second-{i}' for i in range(120)]
    eq('120 more records produced', [], produce(bs, values)[:3])
    c = consumer(bs)
    c.subscribe([TOPIC])
    got = []
    try:
        end = time.monotonic() + 40
        while len(got) < len(values) and time.monotonic() < end:
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
    eq('a new consumer of the group resumes at the committed offsets: only the records produced after',
       sorted(values), sorted(got))


def main():
    seed, deadline = h.cli(deadline_s=150.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-groups') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('FindCoordinator across the cluster', t_find, run, etcd, bs, st)
        if 'offsets' in st:
            section('a group of three librdkafka consumers', t_group, run, etcd, bs, st)
            section('a commit for a topic the coordinator holds no partition of', t_remote_topic, run, etcd, bs, st)
        if 'committed' in st:
            section('kill -9 the coordinator, restart it', t_kill_coordinator, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-groups: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
