"""lifecycle.py: a 3-broker cluster through its life (issue #19, stage 1): big topics, a topic deleted while
one of its brokers is down, and a rolling restart under load. Same setup as e2e.py (etcd and three gregor
brokers on the host with INTERNAL and EXTERNAL listeners, run as root through harness.py, seeded, bounded).

What it checks (broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 500):
  - the named wait: a CreateTopics of 1,000 partitions is sent through broker 1 and, without waiting for its
    answer, each broker's Metadata is polled; the moment it shows this broker leading some partitions, a
    Produce (acks=-1) to the last of them goes to it. The broker may not have made that partition's log yet
    (the replica manager makes 1,000 logs a bounded batch per pass): the Produce waits until the log is made
    (server/logwait.h) and succeeds, never UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER; a Fetch
    sent just before it (no long poll) answers NONE (empty while the log is not made);
  - the 1,000-partition CreateTopics answers NONE within its timeout, with 1,000 leaders spread 334/333/333
    (StripedReplicaPlacer), the same on every broker; the time is reported;
  - the `__consumer_offsets` shape: a 50-partition topic with cleanup.policy=compact, spread 17/17/16;
  - delete while down: a 6-partition topic with records, one broker (not the controller) stopped (SIGTERM),
    the topic deleted and re-created under the same name (its partitions on the two live brokers), new
    records produced, the broker restarted: its old directories (the old topic id, unknown to etcd) are
    deleted (the stray-log rule, cluster/replicas.h) and a consumer reads exactly the new topic's records;
  - a rolling restart: a librdkafka producer (acks=all, idempotent) and a consumer (assign) run on a
    6-partition topic while each broker in turn gets SIGTERM, restarts on the same ports and leads its
    partitions again; every acknowledged record is read back, once, in per-partition offset order. Reported
    per restart: how long its partitions had no leader in Metadata, and the longest gap between two acks on
    them;
  - the same at replication factor 3 with min.insync.replicas 2 (issue #20): each broker in turn gets
    SIGTERM (controlled shutdown hands its leaderships over), restarts and is back in all 6 ISRs before the
    next; no delivery error, every acknowledged record read back once at its acknowledged offset. Reported
    per restart: the time from SIGTERM to back in every ISR and the longest produce stall (the longest gap
    between two acks on one partition).
Ends with `cluster-lifecycle: N passed, N failed`; exit status 1 on any failure.
Usage: lifecycle.py [--seed N] [--deadline SECONDS]
Read next: e2e.py, server/logwait.h, cluster/replicas.h, cluster/placement.h.
"""
import os
import sys
import threading
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
BIG = 'lc-1000'
BIG_PARTITIONS = 1000
BIG_TIMEOUT_MS = 60000
figures = []


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            f'broker.session.timeout.ms={SESSION_MS}', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false']


def parts(b, topic, timeout=5):
    """{partition: (leader, leader_epoch, error)} of `topic` in b's Metadata v12, or None when absent."""
    with k.Conn(b.bootstrap, timeout=timeout) as c:
        m = k.metadata(c, [topic], version=12, allow_auto=False)
    for t in m['topics']:
        if t['name'] == topic and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], p['leader_epoch'], p['error_code'])
                    for p in t['partitions']}
    return None


def isrs(b, topic):
    """{partition: (leader, replicas, isr)} of `topic` in b's Metadata v12, or None (absent, or no answer)."""
    try:
        with k.Conn(b.bootstrap, timeout=5) as c:
            m = k.metadata(c, [topic], version=12, allow_auto=False)
    except Exception:  # noqa: BLE001 - a broker restarting: not yet
        return None
    for t in m['topics']:
        if t['name'] == topic and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], sorted(p['replica_nodes']), sorted(p['isr_nodes']))
                    for p in t['partitions']}
    return None


def try_parts(b, topic):
    try:
        return parts(b, topic)
    except Exception:  # noqa: BLE001 - a broker restarting: not yet
        return None


controller_of = h.controller_of


def spread(pp, bs):
    return sorted((sum(1 for v in pp.values() if v[0] == b.node_id) for b in bs), reverse=True)


def create(b, name, n, configs=None, timeout_ms=30000, rf=-1):
    cfg = [{'name': kk, 'value': v} for kk, v in (configs or {}).items()]
    with k.Conn(b.bootstrap, timeout=timeout_ms / 1000 + 10) as c:
        r = c.request('CreateTopics', 7, {
            'topics': [{'name': name, 'num_partitions': n, 'replication_factor': rf, 'configs': cfg}],
            'timeout_ms': timeout_ms, 'validate_only': False}, timeout=timeout_ms / 1000 + 10)
    return r['topics'][0]['error_code']


def early_produce(bs, pending, results, stop):
    """Polls each broker's Metadata of BIG; as soon as it shows the broker leading partitions, sends a Fetch
    (no long poll) to the second highest and one Produce (acks=-1) to the highest of them (likely not made
    yet) and records their error codes."""
    try:
        conns = {b.node_id: k.Conn(b.bootstrap, timeout=40) for b in bs}
        while pending and not stop.is_set():
            for b in list(bs):
                if b.node_id not in pending:
                    continue
                pp = try_parts(b, BIG)
                mine = sorted(p for p, v in (pp or {}).items() if v[0] == b.node_id)
                if not mine:
                    continue
                p = mine[-1]
                f = k.fetch(conns[b.node_id], BIG, mine[-2] if len(mine) > 1 else p, 0)
                results[('fetch', b.node_id)] = f['responses'][0]['partitions'][0]['error_code']
                t0 = time.monotonic()
                r = k.produce(conns[b.node_id], BIG, p, k.build_batch([(b'k', b'early')]), timeout_ms=30000)
                results[b.node_id] = (p, len(pp), r['error_code'], time.monotonic() - t0)
                pending.discard(b.node_id)
            time.sleep(0.005)
        for c in conns.values():
            c.close()
    except Exception as e:  # noqa: BLE001 - reported by the caller
        results['exception'] = repr(e)


def t_big(run, etcd, bs, st):
    pending = {b.node_id for b in bs}
    results, stop = {}, threading.Event()
    th = threading.Thread(target=early_produce, args=(bs, pending, results, stop), daemon=True)
    th.start()
    t0 = time.monotonic()
    code = create(bs[0], BIG, BIG_PARTITIONS, timeout_ms=BIG_TIMEOUT_MS)
    took = time.monotonic() - t0
    eq(f'CreateTopics of {BIG_PARTITIONS} partitions through broker 1 answers NONE ({took:.2f} s)', 0, code)
    check(f'  within its timeout ({BIG_TIMEOUT_MS} ms)', took * 1000 < BIG_TIMEOUT_MS, f'{took:.2f} s')
    figures.append(f'CreateTopics of {BIG_PARTITIONS} partitions on 3 brokers answered in {took:.2f} s')

    def made():
        return sum(1 for b in bs for d in os.listdir(b.data_dir) if d.startswith(BIG + '-'))
    h.wait_until(lambda: made() == BIG_PARTITIONS, 60, '1,000 partition directories', interval=0.02)
    took_dirs = time.monotonic() - t0
    ok(f'1,000 partition directories across the three log directories ({took_dirs:.2f} s after the request)')
    figures.append(f'the {BIG_PARTITIONS} local logs made on their leaders {took_dirs:.2f} s after the request')
    th.join(40)
    stop.set()
    check('the early producer ran without an exception', 'exception' not in results, results.get('exception'))
    for b in bs:
        r = results.get(b.node_id)
        check(f'broker {b.node_id}: a Produce sent the moment Metadata showed its leadership succeeds',
              r is not None and r[2] == 0, repr(r))
        eq(f'broker {b.node_id}: a Fetch sent then (no long poll) answers NONE', 0,
           results.get(('fetch', b.node_id)))
        if r:
            figures.append(f'broker {b.node_id}: early Produce to {BIG}-{r[0]} (Metadata showed {r[1]} '
                           f'partitions) answered {r[2]} in {r[3] * 1000:.0f} ms')
    pp1 = parts(bs[0], BIG)
    check('at the answer broker 1 shows a leader for every partition',
          pp1 is not None and len(pp1) == BIG_PARTITIONS and all(v[0] >= 0 for v in pp1.values()))
    eq('1,000 leaders spread 334/333/333', [334, 333, 333], spread(pp1, bs))
    h.wait_until(lambda: all(try_parts(b, BIG) == pp1 for b in bs), 10, 'every broker shows the same leaders')
    ok('every broker shows the same 1,000 leaders and epochs')


def t_offsets_shape(run, etcd, bs, st):
    name = 'lc-offsets-shape'
    t0 = time.monotonic()
    eq('CreateTopics of 50 partitions, cleanup.policy=compact', 0,
       create(bs[1], name, 50, configs={'cleanup.policy': 'compact'}))
    figures.append(f'CreateTopics of 50 compacted partitions answered in {time.monotonic() - t0:.2f} s')
    pp = parts(bs[1], name)
    eq('50 leaders spread 17/17/16', [17, 17, 16], spread(pp, bs))


def produce_values(bs, topic, values, idempotent=False):
    """Produces (partition, value) pairs with acks=all; returns {value: (partition, offset)} and errors."""
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all',
                  'enable.idempotence': idempotent, 'linger.ms': 5, 'message.timeout.ms': 30000,
                  'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
    acked, errors = {}, []

    def cb(err, msg):
        if err:
            errors.append(str(err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())
    for part, value in values:
        p.produce(topic, value=value.encode(), partition=part, on_delivery=cb)
        p.poll(0)
    p.flush(40)
    return acked, errors


def consumer(bs, topic, partitions):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'lc-unused',
                  'enable.auto.commit': False, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2,
                  'fetch.wait.max.ms': 100})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    return c


def read_all(bs, topic, partitions, want, timeout=30):
    """{partition: [(offset, value)]}: reads from the start until `want` records, then a moment more."""
    c = consumer(bs, topic, partitions)
    out = {p: [] for p in partitions}
    n, end, quiet = 0, time.monotonic() + timeout, None
    try:
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is None or m.error():
                if n >= want:
                    quiet = quiet or time.monotonic()
                    if time.monotonic() - quiet > 1.0:
                        break
                continue
            quiet = None
            out[m.partition()].append((m.offset(), m.value().decode()))
            n += 1
    finally:
        c.close()
    return out


def t_delete_while_down(run, etcd, bs, st):
    name, n = 'lc-del', 6
    eq('CreateTopics lc-del (6 partitions)', 0, create(bs[0], name, n))
    old_acked, errs = produce_values(bs, name, [(i % n, f'old-{i}') for i in range(60)])
    eq('60 records of the old topic acknowledged', (60, []), (len(old_acked), errs[:3]))
    ctl = controller_of(bs)
    victim = next(b for b in bs if b.node_id != ctl)
    others = [b for b in bs if b is not victim]
    held = sorted(d for d in os.listdir(victim.data_dir) if d.startswith(name + '-'))
    check(f'broker {victim.node_id} holds partitions of the old topic', len(held) > 0, repr(held))
    eq(f'SIGTERM broker {victim.node_id}: exits 0', 0, victim.stop())
    from confluent_kafka.admin import AdminClient
    a = AdminClient({'bootstrap.servers': others[0].bootstrap})
    err = None
    try:
        a.delete_topics([name], operation_timeout=15)[name].result(20)
    except Exception as e:  # noqa: BLE001
        err = str(e)
    eq(f'DeleteTopics while broker {victim.node_id} is down', None, err)
    h.wait_until(lambda: all(try_parts(b, name) is None for b in others), 10, 'topic gone from Metadata')
    eq('re-created under the same name while it is down', 0, create(others[1], name, n))
    pp = parts(others[0], name)
    eq('the new topic is led by the two live brokers only', {b.node_id for b in others},
       {v[0] for v in pp.values()})
    new_acked, errs = produce_values(others, name, [(i % n, f'new-{i}') for i in range(30)])
    eq('30 records of the new topic acknowledged', (30, []), (len(new_acked), errs[:3]))
    victim.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)

    h.wait_until(lambda: not [d for d in os.listdir(victim.data_dir) if d.startswith(name + '-')], 15,
                 f'broker {victim.node_id} drops the old topic\'s directories')
    ok(f'restarted, broker {victim.node_id} deleted its {len(held)} directories of the old topic (stray logs)')
    got = read_all(bs, name, range(n), len(new_acked))
    values = sorted(v for p in got for _, v in got[p])
    eq('a consumer reads exactly the new topic\'s records', sorted(new_acked), values)


class Load:
    """A librdkafka producer (acks=all, idempotent) writing a numbered sequence over the partitions and a
    consumer (assign) reading them, each on a thread, until stopped."""

    def __init__(self, bs, topic, partitions):
        self.bs, self.topic, self.partitions = bs, topic, partitions
        self.acked = {}       # value -> (partition, offset)
        self.ack_times = []   # (monotonic time, partition) of every ack
        self.errors = []
        self.read = {p: [] for p in range(partitions)}
        self.stop = threading.Event()
        self.produced = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def start(self):
        for t in self.threads:
            t.start()

    def _produce(self):
        from confluent_kafka import Producer
        p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in self.bs), 'acks': 'all',
                      'enable.idempotence': True, 'linger.ms': 2, 'message.timeout.ms': 60000,
                      'topic.metadata.refresh.interval.ms': 500, 'retry.backoff.ms': 50, 'log_level': 2})

        def cb(err, msg):
            with self.lock:
                if err:
                    self.errors.append(str(err))
                else:
                    self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
                    self.ack_times.append((time.monotonic(), msg.partition()))
        i = 0
        while not self.stop.is_set():
            try:
                p.produce(self.topic, value=f'r{i}'.encode(), partition=i % self.partitions, on_delivery=cb)
                i += 1
            except BufferError:
                pass
            p.poll(0.005)
        p.flush(60)
        self.produced = i

    def _consume(self):
        c = consumer(self.bs, self.topic, range(self.partitions))
        try:
            while not self.stop.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    self.read[m.partition()].append((m.offset(), m.value().decode()))
        finally:
            c.close()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(70)

    def max_gap(self, t0, t1, partitions):
        """The longest time within [t0, t1] without an ack on one of `partitions` (per partition)."""
        gap = 0.0
        for p in partitions:
            with self.lock:
                ts = [t for t, q in self.ack_times if q == p and t0 <= t <= t1]
            ts = [t0] + ts + [t1]
            gap = max([gap] + [b - a for a, b in zip(ts, ts[1:])])
        return gap


def t_rolling(run, etcd, bs, st):
    name, n = 'lc-roll', 6
    eq('CreateTopics lc-roll (6 partitions)', 0, create(bs[0], name, n))
    pp0 = parts(bs[0], name)
    load = Load(bs, name, n)
    load.start()
    h.wait_until(lambda: len(load.acked) >= 200, 20, 'the producer under way')
    for b in bs:
        mine = sorted(p for p, v in pp0.items() if v[0] == b.node_id)
        others = [o for o in bs if o is not b]
        leaderless, t_gone = {}, {}
        t0 = time.monotonic()
        done = threading.Event()

        def watch():
            while not done.is_set():
                pp = try_parts(others[0], name)
                now = time.monotonic()
                for p in mine:
                    if pp is None:
                        continue
                    if pp[p][0] != b.node_id and p not in t_gone:
                        t_gone[p] = now
                    elif pp[p][0] == b.node_id and p in t_gone:
                        leaderless[p] = leaderless.get(p, 0) + now - t_gone.pop(p)
                time.sleep(0.02)
        w = threading.Thread(target=watch, daemon=True)
        w.start()
        status = b.stop()
        b.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)
        h.wait_until(lambda: all((lambda pp: pp is not None and all(pp[p][0] == b.node_id for p in mine))(
            try_parts(o, name)) for o in bs), 20, f'broker {b.node_id} leads its partitions again')
        t1 = time.monotonic()
        h.wait_until(lambda: not t_gone, 2, 'the watcher saw the leaders back')
        done.set()
        w.join(5)
        h.wait_until(lambda: all(any(t > t1 and q == p for t, q in load.ack_times[-200:]) for p in mine), 20,
                     f'acks on broker {b.node_id}\'s partitions after the restart')
        t2 = time.monotonic()
        eq(f'broker {b.node_id}: SIGTERM exits 0, restarted, leads its {len(mine)} partitions again', 0, status)
        window = max(leaderless.values()) if leaderless else 0.0
        gap = load.max_gap(t0, t2, mine)
        figures.append(f'rolling restart of broker {b.node_id}: {t1 - t0:.2f} s from SIGTERM to leading again; '
                       f'its partitions leaderless in Metadata {window:.2f} s; longest gap between two acks on '
                       f'them {gap:.2f} s')
    time.sleep(0.5)
    load.finish()
    eq('no delivery error', [], load.errors[:3])
    check(f'{len(load.acked)} records acknowledged across the three restarts', len(load.acked) > 500)
    got = read_all(bs, name, range(n), len(load.acked), timeout=40)
    values = [v for p in got for _, v in got[p]]
    eq('every acknowledged record read back exactly once', sorted(load.acked), sorted(values))
    in_order = all([o for o, _ in got[p]] == sorted(o for o, _ in got[p]) and
                   [load.acked[v][1] for _, v in got[p] if v in load.acked] ==
                   [o for o, v in got[p] if v in load.acked] and
                   [int(v[1:]) for _, v in got[p]] == sorted(int(v[1:]) for _, v in got[p])
                   for p in got)
    check('per partition: offsets as acknowledged and the sequence in order', in_order)
    live = [v for p in load.read for _, v in load.read[p]]
    check('the consumer running through the restarts read every acknowledged record it reached, in order',
          all([o for o, _ in load.read[p]] == sorted(set(o for o, _ in load.read[p])) for p in load.read)
          and set(live) <= set(load.acked), f'{len(live)} read')


def t_rolling_rf3(run, etcd, bs, st):
    name, n = 'lc-roll3', 6
    eq('CreateTopics lc-roll3 (6 partitions, replication factor 3, min.insync.replicas 2)', 0,
       create(bs[0], name, n, configs={'min.insync.replicas': '2'}, rf=3))
    ids = sorted(b.node_id for b in bs)

    def full_isr(among):
        def pred():
            lay = [isrs(o, name) for o in among]
            return all(x is not None and len(x) == n and all(v[2] == ids and v[0] >= 0 for v in x.values())
                       for x in lay)
        return pred
    h.wait_until(full_isr(bs), 20, 'every ISR of 3')
    load = Load(bs, name, n)
    load.start()
    h.wait_until(lambda: len(load.acked) >= 200, 20, 'the producer under way')
    for b in bs:
        t0 = time.monotonic()
        status = b.stop()
        b.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)
        h.wait_until(full_isr(bs), 60, f'broker {b.node_id} back in every ISR')
        t1 = time.monotonic()
        h.wait_until(lambda: all(any(t > t1 and q == p for t, q in load.ack_times[-400:]) for p in range(n)), 20,
                     'acks on every partition after the restart')
        t2 = time.monotonic()
        eq(f'broker {b.node_id}: SIGTERM exits 0, restarted, back in all 6 ISRs', 0, status)
        gap = load.max_gap(t0, t2, range(n))
        figures.append(f'RF 3 rolling restart of broker {b.node_id}: {t1 - t0:.2f} s from SIGTERM to back in '
                       f'every ISR; longest produce stall (gap between two acks on one partition) {gap:.2f} s')
    time.sleep(0.5)
    load.finish()
    eq('no delivery error (no non-retriable error)', [], load.errors[:3])
    check(f'{len(load.acked)} records acknowledged across the three restarts', len(load.acked) > 500)
    got = read_all(bs, name, range(n), len(load.acked), timeout=40)
    values = [v for p in got for _, v in got[p]]
    eq('every acknowledged record read back exactly once (none lost)', sorted(load.acked), sorted(values))
    in_order = all([o for o, _ in got[p]] == sorted(o for o, _ in got[p]) and
                   [load.acked[v][1] for _, v in got[p] if v in load.acked] ==
                   [o for o, v in got[p] if v in load.acked] for p in got)
    check('per partition: offsets as acknowledged', in_order)


def main():
    seed, deadline = h.cli(deadline_s=360.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-lifecycle') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('1,000 partitions, and a Produce the moment a leader shows', t_big, run, etcd, bs, st)
        section('the __consumer_offsets shape: 50 compacted partitions', t_offsets_shape, run, etcd, bs, st)
        section('delete a topic while a broker is down, re-create it, restart', t_delete_while_down, run, etcd,
                bs, st)
        section('rolling restart under an idempotent producer and a consumer', t_rolling, run, etcd, bs, st)
        section('rolling restart at replication factor 3, min.insync.replicas 2', t_rolling_rf3, run, etcd, bs, st)
        for b in bs:
            b.stop()
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-lifecycle: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
