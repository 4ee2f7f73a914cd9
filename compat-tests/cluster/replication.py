"""replication.py: replication factor 3 end to end (issue #20): etcd and three gregor brokers on the host
(harness.py: everything started is stopped at the end), seeded and
bounded in time.

What it checks:
  - an RF 3 topic of 3 partitions with min.insync.replicas=2: librdkafka (confluent-kafka) produces N keyed
    records with acks=all, each acknowledged; every one is read back exactly once in offset order;
  - the followers copy the leaders' logs: once the high watermark is the log end offset everywhere, the three
    replicas of each partition hold the same batches byte for byte (replicacheck.py), and the ISR stays the
    three replicas (Metadata v12 on every broker);
  - kill -9 the leader of partition 0: a new leader from the ISR with a higher leader epoch; acks=all produce
    goes on (time to the first acknowledged record reported); every record acknowledged before and after is
    read back; the dead broker leaves the ISR;
  - restarted, the broker fetches again and rejoins the ISR of every partition; the replicas agree again;
  - /metrics after the first produce (issue #22): each broker's replicationbytesin_total is exactly the bytes
    of the batches on disk of the partitions it follows, its replicationbytesout_total at least twice those of
    the partitions it leads (two followers each fetched them; a dropped answer may add), and
    requests_total{request="FetchFollower"} is not 0;
  - a Fetch naming a follower's replica id at offset 0 (below the high watermark) sent to a leader: logged and
    counted as a high watermark invariant violation, answered, the leader keeps running (it aborted before),
    the ISR stays whole.
Ends with `cluster-replication: N passed, N failed`; exit status 1 on any failure.
Usage: replication.py [--seed N] [--deadline SECONDS]
Read next: cluster/fetcher.h, cluster/roles.h, partition/replica.c, replicacheck.py.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import replicacheck  # noqa: E402
import testkit  # noqa: E402  (compat-tests/lib: the counted checks every suite uses)
from testkit import check, eq, section  # noqa: E402

PREFIX = '/gregor'
TOPIC = 'rf3'
PARTS = 3
figures = []


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false',
            'replica.lag.time.max.ms=5000', 'replica.fetch.backoff.ms=200', 'offsets.topic.replication.factor=1']


def layout(b):
    """{partition: (leader, leader epoch, replicas, isr)} of TOPIC in b's Metadata v12, or None."""
    try:
        with k.Conn(b.bootstrap, timeout=5) as c:
            m = k.metadata(c, [TOPIC], version=12, allow_auto=False)
    except Exception:  # noqa: BLE001 - broker down or not yet
        return None
    for t in m['topics']:
        if t['name'] == TOPIC and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], p['leader_epoch'], sorted(p['replica_nodes']),
                                           sorted(p['isr_nodes'])) for p in t['partitions']}
    return None


def wait_layout(bs, pred, timeout, what):
    return h.wait_until(lambda: (lambda ls: ls[0] if all(x is not None and len(x) == PARTS for x in ls) and
                                 all(x == ls[0] for x in ls) and pred(ls[0]) else None)([layout(b) for b in bs]),
                        timeout, what)


def create(b):
    topic = {'name': TOPIC, 'num_partitions': PARTS, 'replication_factor': 3, 'assignments': [],
             'configs': [{'name': 'min.insync.replicas', 'value': '2'}]}
    with k.Conn(b.bootstrap, timeout=30) as c:
        return c.request('CreateTopics', 7, {'topics': [topic], 'timeout_ms': 15000, 'validate_only': False})[
            'topics'][0]


def produce(bs, values, timeout=40):
    """Produces `values` round-robin over the partitions with acks=all; returns ({value: (partition, offset)},
    [errors], seconds to the first acknowledgement)."""
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all',
                  'enable.idempotence': True, 'linger.ms': 5, 'message.timeout.ms': int(timeout * 1000),
                  'topic.metadata.refresh.interval.ms': 500, 'retry.backoff.ms': 100, 'log_level': 2})
    acked, errors, first = {}, [], []
    t0 = time.monotonic()

    def cb(err, msg):
        if err:
            errors.append(str(err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())
            if not first:
                first.append(time.monotonic() - t0)

    for i, v in enumerate(values):
        p.produce(TOPIC, value=v.encode(), partition=i % PARTS, on_delivery=cb)
        p.poll(0)
    p.flush(timeout + 5)
    return acked, errors, (first[0] if first else None)


def consume(bs, want, timeout=30):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'replication-unused',
                  'enable.auto.commit': False, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTS)])
    out = {p: [] for p in range(PARTS)}
    n, end = 0, time.monotonic() + timeout
    try:
        while n < want and time.monotonic() < end:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out[m.partition()].append((m.offset(), m.value().decode()))
            n += 1
        while True:
            m = c.poll(0.5)
            if m is None:
                break
            if not m.error():
                out[m.partition()].append((m.offset(), m.value().decode()))
    finally:
        c.close()
    return out


def read_back(label, bs, acked):
    got = consume(bs, len(acked))
    values = [v for p in got for _, v in got[p]]
    eq(f'{label}: every acknowledged record read back exactly once', sorted(acked), sorted(values))
    check(f'{label}: offsets in order per partition',
          all([o for o, _ in got[p]] == sorted(o for o, _ in got[p]) for p in got))


def end_offsets(b):
    """{partition: (high watermark, log end offset)} at b for the partitions it leads (ListOffsets latest)."""
    lay = layout(b) or {}
    out = {}
    with k.Conn(b.bootstrap, timeout=5) as c:
        for p, (leader, _, _, _) in lay.items():
            if leader != b.node_id:
                continue
            r = c.request('ListOffsets', 4, {'replica_id': -1, 'isolation_level': 0, 'topics': [
                {'name': TOPIC, 'partitions': [{'partition_index': p, 'current_leader_epoch': -1,
                                                'timestamp': -1}]}]})
            out[p] = r['topics'][0]['partitions'][0]['offset']
    return out


def replicas_agree(label, bs):
    """Waits until every replica of every partition holds the leader's high watermark, then compares them."""
    lay = layout(next(b for b in bs if b.alive())) or {}
    hw = {}
    for b in bs:
        if b.alive():
            hw.update(end_offsets(b))

    def caught_up():
        for p, (leader, _, replicas, _) in lay.items():
            for r in replicas:
                d = os.path.join(bs[r - 1].data_dir, f'{TOPIC}-{p}')
                bl, _ = replicacheck.batches(d, hw.get(p, 0))
                if not bl or bl[-1][1] + 1 < hw.get(p, 0):
                    return False
        return True
    try:
        h.wait_until(caught_up, 20, f'{label}: every replica holds the high watermark')
    except h.HarnessError as e:
        check(str(e), False)
        return
    for p, (leader, _, replicas, _) in lay.items():
        dirs = {r: os.path.join(bs[r - 1].data_dir, f'{TOPIC}-{p}') for r in replicas}
        bad, lines = replicacheck.compare(dirs, hw.get(p, 0))
        eq(f'{label}: partition {p}: its {len(replicas)} replicas agree up to the high watermark {hw.get(p)}',
           (0, []), (bad, lines[:-1] if not bad else lines[:4]))


def scrape(b):
    """{(name, frozenset(labels)): value} of b's /metrics (its admin listener file, harness.py)."""
    import http.client
    import re
    with open(os.path.join(b.dir, 'admin')) as f:
        host, port = f.read().strip().rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request('GET', '/metrics')
        text = c.getresponse().read().decode()
    finally:
        c.close()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if m and not line.startswith('#'):
            out[(m.group(1), frozenset(re.findall(r'([a-zA-Z_]+)="([^"]*)"', m.group(3) or '')))] = float(m.group(4))
    return out


def replication_bytes(label, bs, lay):
    """Each broker's replication byte counters against the batches on disk (the replicas agree up to hw)."""
    hw = {}
    for b in bs:
        hw.update(end_offsets(b))
    for b in bs:
        follows = leads = 0
        for p, (leader, _, replicas, _) in lay.items():
            bl, _ = replicacheck.batches(os.path.join(b.data_dir, f'{TOPIC}-{p}'), hw.get(p, 0))
            n = sum(len(x[2]) for x in bl)
            if leader == b.node_id:
                leads += n
            elif b.node_id in replicas:
                follows += n
        m = scrape(b)
        bi = m.get(('kafka_server_brokertopicmetrics_replicationbytesin_total', frozenset()))
        bo = m.get(('kafka_server_brokertopicmetrics_replicationbytesout_total', frozenset()))
        eq(f'{label}: broker {b.node_id}: replicationbytesin_total = the bytes of the partitions it follows',
           follows, bi)
        check(f'{label}: broker {b.node_id}: replicationbytesout_total {bo} >= 2 x {leads} bytes it leads',
              bo is not None and leads > 0 and bo >= 2 * leads, str(bo))
        ff = sum(v for (n, ls), v in m.items()
                 if n == 'kafka_network_requestmetrics_requests_total' and ('request', 'FetchFollower') in ls)
        check(f'{label}: broker {b.node_id}: requests_total{{request="FetchFollower"}} counted', ff > 0, str(ff))


def t_produce(run, etcd, bs, st):
    r = create(bs[0])
    eq('CreateTopics rf 3 min.insync.replicas=2: NONE', 0, r['error_code'])
    lay = wait_layout(bs, lambda l: all(v[0] >= 0 and len(v[3]) == 3 for v in l.values()), 15,
                      'every broker shows 3 leaders with ISR 3')
    acked, errors, _ = produce(bs, [f'a{i}' for i in range(3000)])
    eq('3000 records acknowledged with acks=all', (3000, []), (len(acked), errors[:3]))
    st['acked'] = dict(acked)
    read_back('after produce', bs, st['acked'])
    replicas_agree('after produce', bs)
    replication_bytes('after produce', bs, lay)
    time.sleep(6)  # past replica.lag.time.max.ms: a follower that fetches stays in the ISR
    lay = wait_layout(bs, lambda l: True, 5, 'layout')
    eq('ISR still the three replicas after replica.lag.time.max.ms', {p: [1, 2, 3] for p in range(PARTS)},
       {p: v[3] for p, v in lay.items()})
    st['lay'] = lay


def t_spoofed_follower_fetch(run, etcd, bs, st):
    """A Fetch v12 naming a follower's replica id at offset 0 (no broker epoch: v12 has none) sent to the
    leader: the follower's log end offset as the leader knows it falls below the high watermark. The leader
    logs and counts the invariant violation and answers; it must not abort (it did: an assert), and the real
    follower's next fetch puts its state back (the ISR stays whole, produce goes on)."""
    lay = st['lay']
    leader, _, replicas, _ = lay[0]
    follower = next(r for r in replicas if r != leader)
    lb = bs[leader - 1]
    with k.Conn(lb.bootstrap, timeout=10) as c:
        r = c.request('Fetch', 12, {
            'replica_id': follower, 'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 1 << 20,
            'isolation_level': 0, 'session_id': 0, 'session_epoch': -1,
            'topics': [{'topic': TOPIC, 'partitions': [{
                'partition': 0, 'fetch_offset': 0, 'current_leader_epoch': -1, 'last_fetched_epoch': -1,
                'log_start_offset': 0, 'partition_max_bytes': 1024}]}]})
        eq(f'spoofed follower Fetch (replica {follower}, offset 0) to leader {leader}: answered NONE', 0,
           r['responses'][0]['partitions'][0]['error_code'])
        m = k.metadata(c, [TOPIC], version=12, allow_auto=False)
    check(f'leader {leader} answers Metadata after it', m['topics'][0]['error_code'] == 0)
    time.sleep(1.0)
    check(f'leader {leader} still running', lb.alive())
    with open(lb.proc.log_path, 'rb') as f:
        text = f.read().decode('utf-8', 'replace')
    check(f'leader {leader} logged the violation against replica {follower}',
          f'high watermark invariant violated: {TOPIC}-0 hw' in text and
          f'> replica {follower} log end offset 0' in text)
    acked, errors, _ = produce(bs, [f's{i}' for i in range(300)])
    eq('300 more records acknowledged with acks=all after it', (300, []), (len(acked), errors[:3]))
    st['acked'].update(acked)
    lay2 = wait_layout(bs, lambda l: all(v[3] == [1, 2, 3] for v in l.values()), 15, 'ISR whole')
    check('ISR still the three replicas of every partition', bool(lay2))


def t_kill_leader(run, etcd, bs, st):
    lay = st['lay']
    victim = lay[0][0]
    epoch0 = lay[0][1]
    t0 = time.monotonic()
    bs[victim - 1].kill9()
    live = [b for b in bs if b.node_id != victim]
    lay2 = wait_layout(live, lambda l: l[0][0] not in (-1, victim) and victim not in l[0][3], 20,
                       'a new leader for partition 0 from the ISR')
    figures.append(f'kill -9 of leader {victim}: new leader {lay2[0][0]} at epoch {lay2[0][1]} after '
                   f'{time.monotonic() - t0:.1f} s')
    check(f'partition 0: new leader {lay2[0][0]} at a higher epoch ({epoch0} -> {lay2[0][1]})', lay2[0][1] > epoch0)
    acked, errors, first = produce(live, [f'b{i}' for i in range(1500)])
    figures.append(f'first acks=all acknowledgement {first:.2f} s after the produce started, '
                   f'{time.monotonic() - t0:.1f} s after the kill' if first else 'no acknowledgement')
    eq('1500 more records acknowledged with acks=all (min.insync.replicas 2 of 2 live)', (1500, []),
       (len(acked), errors[:3]))
    st['acked'].update(acked)
    read_back('after the leader\'s kill', live, st['acked'])
    bs[victim - 1].start()
    lay3 = wait_layout(bs, lambda l: all(v[3] == [1, 2, 3] for v in l.values()), 30,
                       f'broker {victim} back in every ISR')
    check(f'broker {victim} restarted: back in the ISR of every partition', bool(lay3))
    replicas_agree('after the restart', bs)


def main():
    seed, deadline = h.cli(deadline_s=180.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-replication') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('RF 3: produce acks=all, read back, replicas agree', t_produce, run, etcd, bs, st)
        if 'lay' in st:
            section('a Fetch naming a follower with offset 0: logged, counted, no abort', t_spoofed_follower_fetch,
                    run, etcd, bs, st)
            section('kill -9 a leader, produce on, restart it', t_kill_leader, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-replication: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
