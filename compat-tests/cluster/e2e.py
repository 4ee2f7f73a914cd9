"""e2e.py: a 3-broker cluster end to end (issue #19, stage 1): etcd (Debian's etcd-server) and three gregor
brokers on the host, each with INTERNAL and EXTERNAL listeners on free loopback ports, the member, the
controller, the replica manager and the etcd topic writer wired together (server/membership.c); runs as root
through harness.py (everything it starts is undone at the end), seeded and bounded in time.

What it checks (broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 500, so a lease lives 3 s;
offsets.topic.replication.factor 1: one replica everywhere):
  - CreateTopics of a 12-partition topic through broker 1 answers NONE once leaders exist: every broker's
    Metadata (v12, EXTERNAL) then shows 12 partitions, 4 led by each broker, leader epoch 0 everywhere, the
    same leaders and epochs and one ClusterId;
  - librdkafka (confluent-kafka) produces N keyed records with acks=all over the 12 partitions and reads them
    all back by assignment: every record exactly once, in per-partition order;
  - a raw Produce v10 to a broker that does not lead the partition: NOT_LEADER_OR_FOLLOWER with CurrentLeader
    naming the leader and its epoch;
  - a topic created with max.message.bytes=2000: every leader refuses a 3000-byte batch (MESSAGE_TOO_LARGE),
    so the record's configs reached the local partitions;
  - kill -9 a broker that is not the controller: after its lease expires its 4 partitions show leader -1 and
    leader epoch 1 on the others (time reported); the other 8 partitions keep taking produce and fetch;
    restarted, its partitions come back (leader = it, epoch 2) and every acknowledged record is read back;
  - kill -9 the controller: another broker becomes controller before the dead one's session ends (the
    controller key's own lease, controller.quorum.fetch.timeout.ms 1000 here; time reported) and marks the
    dead one's partitions offline (time to that partition-state change reported); restarted, they come back;
  - DeleteTopics through one broker: the topic leaves every broker's Metadata and its directories leave every
    log directory;
  - SIGTERM: every broker (still holding another topic's partitions) exits 0 with "stopped cleanly".
Ends with `cluster-e2e: N passed, N failed`; exit status 1 on any failure.
Usage: e2e.py [--seed N] [--deadline SECONDS]
Read next: server/membership.c, cluster/controller.h, cluster/replicas.h, harness.py.
"""
import os
import re
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402  (compat-tests/lib: the counted checks every suite uses)
from testkit import check, eq, fail, ok, section  # noqa: E402,F401

SESSION_MS = 3000
CONTROLLER_LEASE_MS = 1000  # controller.quorum.fetch.timeout.ms: the controller key's own lease
PREFIX = '/gregor'
TOPIC = 'e2e-12'
PARTITIONS = 12
NOT_LEADER_OR_FOLLOWER = 6
LEADER_NOT_AVAILABLE = 5
figures = []


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            f'broker.session.timeout.ms={SESSION_MS}', 'broker.heartbeat.interval.ms=500',
            f'controller.quorum.fetch.timeout.ms={CONTROLLER_LEASE_MS}',
            'auto.create.topics.enable=false',
            # every partition here has one replica, __consumer_offsets too (its consumers name a group): a
            # SIGTERM with etcd paused then has no leadership to hand over and exits at once (with RF 3 it
            # waits the controlled shutdown's 30 s bound, which ctl_shutdown.py checks)
            'offsets.topic.replication.factor=1']


def md(b, topics=None):
    with k.Conn(b.bootstrap, timeout=5) as c:
        return k.metadata(c, topics, version=12, allow_auto=False)


def parts(b):
    """{partition: (leader, leader_epoch, error)} of TOPIC in b's Metadata, or None when absent."""
    for t in md(b, [TOPIC])['topics']:
        if t['name'] == TOPIC and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], p['leader_epoch'], p['error_code'])
                    for p in t['partitions']}
    return None


def try_parts(b):
    try:
        return parts(b)
    except Exception:  # noqa: BLE001 - a broker restarting: not yet
        return None


def producer(bs):
    from confluent_kafka import Producer
    return Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all',
                     'enable.idempotence': False, 'linger.ms': 5, 'message.timeout.ms': 20000,
                     'topic.metadata.refresh.interval.ms': 500, 'retry.backoff.ms': 100, 'log_level': 2})


def produce(bs, records):
    """records: [(partition, key, value)]. Returns {value: (partition, offset)} of the acknowledged ones and
    the delivery errors."""
    acked, errors = {}, []
    p = producer(bs)

    def cb(err, msg):
        if err:
            errors.append(str(err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())

    for part, key, value in records:
        p.produce(TOPIC, key=key.encode(), value=value.encode(), partition=part, on_delivery=cb)
        p.poll(0)
    p.flush(30)
    return acked, errors


def consume(bs, partitions, want, timeout=30):
    """Reads `partitions` from the start by assignment until `want` records arrived; returns
    {partition: [values in offset order]}."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'e2e-unused',
                  'enable.auto.commit': False, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
    c.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
    out = {p: [] for p in partitions}
    n, end = 0, time.monotonic() + timeout
    try:
        while n < want and time.monotonic() < end:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out[m.partition()].append((m.offset(), m.value().decode()))
            n += 1
        time.sleep(0.5)  # anything beyond `want` (a duplicate) shows up too
        while True:
            m = c.poll(0.2)
            if m is None:
                break
            if not m.error():
                out[m.partition()].append((m.offset(), m.value().decode()))
    finally:
        c.close()
    return out


def check_read_back(label, bs, acked, partitions):
    got = consume(bs, partitions, len(acked))
    values = [v for p in partitions for _, v in got[p]]
    eq(f'{label}: every acknowledged record read back exactly once', sorted(acked), sorted(values))
    in_order = all([o for o, _ in got[p]] == sorted(o for o, _ in got[p]) and
                   [acked[v][1] for _, v in got[p] if v in acked] == [o for o, v in got[p] if v in acked]
                   for p in partitions)
    check(f'{label}: per-partition order and offsets as acknowledged', in_order)
    return got


def leaders(pp):
    return {p: v[0] for p, v in pp.items()}


def controller_of(bs):
    for b in bs:
        try:
            return md(b)['controller_id']
        except Exception:  # noqa: BLE001
            continue
    return -1


def t_create(run, etcd, bs, st):
    t0 = time.monotonic()
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = k.create_topic(c, TOPIC, PARTITIONS)
    took = time.monotonic() - t0
    eq(f'CreateTopics {PARTITIONS} partitions through broker 1 answers NONE ({took:.2f} s)', 0, r['error_code'])
    figures.append(f'CreateTopics of {PARTITIONS} partitions answered in {took:.2f} s')
    pp1 = parts(bs[0])
    check('at the answer broker 1 shows a leader for every partition',
          pp1 is not None and len(pp1) == PARTITIONS and all(v[0] >= 0 for v in pp1.values()), repr(pp1))
    # the others see the same once their watch delivered it (at most a moment later)
    h.wait_until(lambda: all(try_parts(b) == pp1 for b in bs), 5, 'every broker shows the same partitions')
    cids = set()
    for b in bs:
        m = md(b)
        cids.add(m['cluster_id'])
        pp = parts(b)
        counts = {n: sum(1 for v in pp.values() if v[0] == n) for n in (1, 2, 3)}
        eq(f'broker {b.node_id}: 12 partitions, 4 led by each broker', {1: 4, 2: 4, 3: 4}, counts)
        eq(f'broker {b.node_id}: leader epoch 0 and no error everywhere', {(0, 0)},
           {(v[1], v[2]) for v in pp.values()})
        eq(f'broker {b.node_id}: the same leaders and epochs as broker 1', pp1, pp)
    eq('one ClusterId on every broker', 1, len(cids))
    st['pp'] = pp1


def t_produce_consume(run, etcd, bs, st):
    rng = random.Random(st['seed'])
    n = 600
    recs = [(i % PARTITIONS, f'key-{rng.randrange(10**6)}', f'v{i}') for i in range(n)]
    acked, errors = produce(bs, recs)
    eq(f'librdkafka acks=all: {n} records acknowledged, no delivery error', (n, []), (len(acked), errors[:3]))
    check_read_back('consume', bs, acked, range(PARTITIONS))
    st['acked'] = acked


def t_not_leader(run, etcd, bs, st):
    pp = st['pp']
    for part in (0, 1, 2):
        leader = pp[part][0]
        other = next(b for b in bs if b.node_id != leader)
        with k.Conn(other.bootstrap, timeout=10) as c:
            batch = k.build_batch([(b'k', b'not-here')])
            r = k.produce(c, TOPIC, part, batch, version=10)
        eq(f'Produce partition {part} at broker {other.node_id} (leader {leader}): NOT_LEADER_OR_FOLLOWER',
           NOT_LEADER_OR_FOLLOWER, r['error_code'])
        cl = r.get('current_leader') or {}
        eq(f'  CurrentLeader names broker {leader} at epoch {pp[part][1]}', (leader, pp[part][1]),
           (cl.get('leader_id'), cl.get('leader_epoch')))


def raw_produce(b_by_id, pp, part, value):
    leader = pp[part][0]
    with k.Conn(b_by_id[leader].bootstrap, timeout=10) as c:
        r = k.produce(c, TOPIC, part, k.build_batch([(b'k', value.encode())]))
    return r['error_code'], r['base_offset']


def wait_parts(bs, pred, timeout, what):
    return h.wait_until(lambda: all((lambda pp: pp is not None and pred(pp))(try_parts(b)) for b in bs),
                        timeout, what, interval=0.05)


def t_configs(run, etcd, bs, st):
    name = 'e2e-cfg'
    with k.Conn(bs[2].bootstrap, timeout=30) as c:
        r = k.create_topic(c, name, 3, configs={'max.message.bytes': '2000'})
    eq('CreateTopics with max.message.bytes=2000 through broker 3', 0, r['error_code'])
    def led_at_broker1():  # created through broker 3: broker 1's watch brings it a moment later
        with k.Conn(bs[0].bootstrap, timeout=10) as c:
            ts = [t for t in k.metadata(c, [name], version=12, allow_auto=False)['topics'] if t['name'] == name]
        ok_ = ts and ts[0]['error_code'] == 0 and len(ts[0]['partitions']) == 3 and \
            all(p['leader_id'] >= 0 for p in ts[0]['partitions'])
        return ts[0] if ok_ else None
    t = h.wait_until(led_at_broker1, 10, f'broker 1 shows {name} with leaders')
    by_id = {b.node_id: b for b in bs}
    codes = {}

    def too_large(p):
        leader = by_id[p['leader_id']]
        with k.Conn(leader.bootstrap, timeout=10) as c:
            rp = k.produce(c, name, p['partition_index'], k.build_batch([(b'k', b'x' * 3000)]))
        codes[p['partition_index']] = rp['error_code']
        return rp['error_code'] == 10  # MESSAGE_TOO_LARGE: the record's config reached the leader's local log
    for p in t['partitions']:
        h.wait_until(lambda: too_large(p), 10, f'{name}-{p["partition_index"]} refuses 3000 bytes')
    ok(f'every leader of {name} (brokers {sorted({p["leader_id"] for p in t["partitions"]})}) applies the '
       f'record\'s max.message.bytes: MESSAGE_TOO_LARGE')


def t_kill_broker(run, etcd, bs, st):
    ctl = controller_of(bs)
    victim = next(b for b in bs if b.node_id != ctl)
    others = [b for b in bs if b is not victim]
    pp0 = st['pp']
    mine = sorted(p for p, v in pp0.items() if v[0] == victim.node_id)
    rest = sorted(p for p in pp0 if p not in mine)
    eq(f'broker {victim.node_id} (not the controller, {ctl}) leads 4 partitions', 4, len(mine))
    t0 = time.monotonic()
    victim.kill9()
    wait_parts(others, lambda pp: all(pp[p][0] == -1 for p in mine), SESSION_MS / 1000 + 10,
               f'broker {victim.node_id} partitions offline')
    took = time.monotonic() - t0
    ok(f'kill -9 broker {victim.node_id}: its partitions leaderless on the others after {took:.1f} s '
       f'(session {SESSION_MS} ms)')
    figures.append(f'kill -9 of a broker to its partitions offline in Metadata: {took:.1f} s (session {SESSION_MS} ms)')
    # Leader -1 shows as soon as the victim's registration is gone (Kafka's metadata cache answers a leader
    # without a live endpoint the same way: leader -1, the old epoch); the controller's write of the new
    # state (leader -1, epoch +1) follows. Wait for it (bounded) before checking it.
    offline = lambda pp: all(pp[p] == (-1, pp0[p][1] + 1, LEADER_NOT_AVAILABLE) for p in mine)  # noqa: E731
    try:
        wait_parts(others, offline, 10, 'the controller wrote the offline state')
    except h.HarnessError:
        pass  # the checks below show what each broker has
    for b in others:
        pp = parts(b)
        eq(f'broker {b.node_id}: offline partitions have leader -1, epoch +1, LEADER_NOT_AVAILABLE',
           {p: (-1, pp0[p][1] + 1, LEADER_NOT_AVAILABLE) for p in mine}, {p: pp[p] for p in mine})
        eq(f'broker {b.node_id}: the other 8 keep their leaders and epochs', {p: pp0[p] for p in rest},
           {p: pp[p] for p in rest})
    by_id = {b.node_id: b for b in bs}
    extra = {}
    for p in rest:
        v = f'while-down-{p}'
        code, off = raw_produce(by_id, pp0, p, v)
        if code == 0:
            extra[v] = (p, off)
    eq('produce to the 8 live partitions while it is down', len(rest), len(extra))
    acked = dict(st['acked'])
    acked.update(extra)
    live = {v: po for v, po in acked.items() if po[0] in rest}
    check_read_back('the 8 live partitions', others, live, rest)
    t1 = time.monotonic()
    victim.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)
    wait_parts(bs, lambda pp: all(pp[p][:2] == (victim.node_id, pp0[p][1] + 2) for p in mine), 15,
               f'broker {victim.node_id} leads its partitions again')
    took = time.monotonic() - t1
    ok(f'restarted, broker {victim.node_id} leads its 4 partitions again at epoch +2 after {took:.1f} s')
    figures.append(f'restart of a broker to its partitions led again: {took:.1f} s')
    check_read_back('after the restart', bs, acked, range(PARTITIONS))
    st['acked'] = acked
    st['pp'] = parts(bs[0])


def t_kill_controller(run, etcd, bs, st):
    ctl = controller_of(bs)
    check('a controller is known', ctl in (1, 2, 3), str(ctl))
    victim = next(b for b in bs if b.node_id == ctl)
    others = [b for b in bs if b is not victim]
    pp0 = st['pp']
    mine = sorted(p for p, v in pp0.items() if v[0] == victim.node_id)
    t0 = time.monotonic()
    victim.kill9()
    new = h.wait_until(lambda: (lambda c: c if c not in (-1, ctl) else None)(controller_of(others)),
                       SESSION_MS / 1000 + 10, 'a new controller in Metadata')
    took_ctl = time.monotonic() - t0
    # the controller key has its own lease (controller.quorum.fetch.timeout.ms): a new controller comes
    # before the dead one's registration (and so its partitions) lapses
    check(f'a new controller (broker {new}) in Metadata {took_ctl:.1f} s after the kill, before the session '
          f'({SESSION_MS} ms) ends', took_ctl < SESSION_MS / 1000, f'{took_ctl:.2f} s')
    figures.append(f'controller failover (kill -9 to a new controller in Metadata): {took_ctl:.1f} s '
                   f'(controller lease {CONTROLLER_LEASE_MS} ms)')
    # leader -1 at the epoch after the kill's: written by the new controller (not just the registration gone)
    wait_parts(others, lambda pp: all(pp[p][0] == -1 and pp[p][1] > pp0[p][1] for p in mine),
               SESSION_MS / 1000 + 10, 'the controller\'s partitions offline')
    took = time.monotonic() - t0
    new = controller_of(others)
    check(f'kill -9 the controller (broker {ctl}): broker {new} took over', new in {b.node_id for b in others})
    ok(f'the new controller marked broker {ctl}\'s partitions offline {took:.1f} s after the kill')
    figures.append(f'controller failover (kill -9 to the first partition-state change): {took:.1f} s '
                   f'(session {SESSION_MS} ms)')
    victim.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)
    wait_parts(bs, lambda pp: all(pp[p][0] == victim.node_id for p in mine), 15,
               f'broker {ctl} leads its partitions again')
    ok(f'restarted, broker {ctl} leads its partitions again')
    check_read_back('after the controller restart', bs, st['acked'], range(PARTITIONS))


def t_delete(run, etcd, bs, st):
    from confluent_kafka.admin import AdminClient
    a = AdminClient({'bootstrap.servers': bs[1].bootstrap})
    t0 = time.monotonic()
    err = None
    try:
        a.delete_topics([TOPIC], operation_timeout=15)[TOPIC].result(20)
    except Exception as e:  # noqa: BLE001
        err = str(e)
    eq('DeleteTopics through broker 2', None, err)
    h.wait_until(lambda: all(try_parts(b) is None for b in bs), 10, 'topic gone from every Metadata')
    ok(f'the topic left every broker\'s Metadata ({time.monotonic() - t0:.2f} s)')

    def dirs():
        return [d for b in bs for d in os.listdir(b.data_dir) if d.startswith(TOPIC + '-')]
    h.wait_until(lambda: not dirs(), 10, 'partition directories deleted')
    ok(f'its directories left every log directory ({time.monotonic() - t0:.2f} s)')


def t_sigterm(run, etcd, bs, st):
    # e2e-cfg still has partitions on them: the controller, replicas, writer and member all stop. The last two
    # stop while etcd is paused: the lease revoke then waits its 2 s with the loop running after the store
    # closed, where the broker's own timers (housekeeping: retention, the cleaner) once fired on the closed
    # store and crashed it (SIGSEGV in the cleaner's pick).
    for i, b in enumerate(bs):
        if i == 1:
            etcd.pause()
        was_controller = controller_of(bs[i:]) == b.node_id
        status = b.stop()
        with open(b.proc.log_path, 'rb') as f:
            text = f.read().decode('utf-8', 'replace')
        check(f'SIGTERM{" with etcd paused" if i else ""}: broker {b.node_id} exits 0 and logs "stopped cleanly"',
              status == 0 and 'stopped cleanly' in text, f'status {status}')
        after = text[text.rfind('signal 15: shutting down'):]
        check(f'broker {b.node_id}: its own SIGTERM is not logged as a lost controller lease',
              'its lease changed or was lost' not in after)
        if was_controller:
            check(f'broker {b.node_id}, the controller: "stops ... the broker is shutting down" at INFO',
                  re.search(r' level=info component=cluster msg="controller: node \d+ stops \(epoch \d+\): the broker is '
                            r'shutting down', after)
                  is not None)
        if i:
            check(f'broker {b.node_id}: the unanswered revoke is logged',
                  'not revoked within' in text or 'revoking lease' in text)
    etcd.resume()


def main():
    seed, deadline = h.cli(deadline_s=150.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-e2e') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('a 12-partition topic through one broker', t_create, run, etcd, bs, st)
        if 'pp' in st:
            section('librdkafka produces and consumes across three leaders', t_produce_consume, run, etcd, bs, st)
            section('Produce at a broker that does not lead', t_not_leader, run, etcd, bs, st)
            section('topic configs reach the leaders\' local logs', t_configs, run, etcd, bs, st)
        if 'acked' in st:
            section('kill -9 a broker, restart it', t_kill_broker, run, etcd, bs, st)
            section('kill -9 the controller', t_kill_controller, run, etcd, bs, st)
        section('DeleteTopics', t_delete, run, etcd, bs, st)
        section('SIGTERM', t_sigterm, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-e2e: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
