"""metrics.py: the replica manager's and controller's families of /metrics in a 3-broker cluster (issue #22;
server/metrics_cluster.h). etcd and three gregor brokers on the host (harness.py: each with
gregor.admin.listeners=http://127.0.0.1:0 and its admin listener file), seeded and bounded in time.

Settings: replica.lag.time.max.ms 2000 (the leaders' shrink tick every 1 s), broker.session.timeout.ms 20000
(a follower stopped for a few seconds keeps its registration: the ISR change is the leaders', not a fencing).

What it checks:
  - an RF 3 topic of 6 partitions, its ISR full on every broker: the brokers' leadercount summed is the
    partition count of every topic Metadata lists, and so is the controller's globalpartitioncount summed over
    the brokers (written by the active controller only); activecontrollercount summed is 1; every
    kafka_topic_partition_leader series of the topic is written once, by the leader Metadata names, with its
    node id; underreplicatedpartitions 0 everywhere;
  - SIGSTOP of a broker that is not the controller, then records produced (acks=1) to every partition led by
    the two others: after replica.lag.time.max.ms the leaders show kafka_cluster_partition_underreplicated 1
    (ISR count 2) exactly for the partitions it followed, 0 for none, underreplicatedpartitions = that count
    per leader, and each leader's isrshrinks_total grew by at least its count;
  - SIGCONT: it catches up, the leaders' isrexpands_total grew by at least their counts and
    underreplicatedpartitions is back to 0 on all three brokers.
Ends with `cluster-metrics: N passed, N failed`; exit status 1 on any failure.
Usage: metrics.py [--seed N] [--deadline SECONDS]
Read next: server/metrics_cluster.c, cluster/roles.c (the ISR change counters).
"""
import http.client
import os
import re
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
TOPIC = 'mx'
PARTS = 6
LAG_MS = 2000


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=20000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', f'replica.lag.time.max.ms={LAG_MS}',
            'replica.fetch.backoff.ms=200']


def scrape(b):
    """{(name, frozenset(labels)): value} of b's /metrics."""
    with open(os.path.join(b.dir, 'admin')) as f:
        host, port = f.readline().strip().rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        c.request('GET', '/metrics')
        r = c.getresponse()
        text = r.read().decode()
    finally:
        c.close()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def g(m, name, **labels):
    return m.get((name, frozenset((k_, str(v)) for k_, v in labels.items())))


def topics(b):
    """{topic: {partition: (leader, replicas, isr)}} of every topic in b's Metadata v12, or None."""
    try:
        with k.Conn(b.bootstrap, timeout=5) as c:
            md = k.metadata(c, None, version=12, allow_auto=False)
    except Exception:  # noqa: BLE001 - not yet
        return None
    return {t['name']: {p['partition_index']: (p['leader_id'], sorted(p['replica_nodes']), sorted(p['isr_nodes']))
                        for p in t['partitions']} for t in md['topics'] if t['error_code'] == 0}


def t_steady(run, etcd, bs, st):
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': TOPIC, 'num_partitions': PARTS, 'replication_factor': 3,
                                                      'assignments': [], 'configs': []}],
                                          'timeout_ms': 15000, 'validate_only': False})['topics'][0]
    eq(f'CreateTopics {TOPIC}: {PARTS} partitions, RF 3', (0, PARTS, 3),
       (r['error_code'], r['num_partitions'], r['replication_factor']))

    def full():
        ls = [topics(b) for b in bs]
        if any(x is None or TOPIC not in x or len(x[TOPIC]) != PARTS for x in ls) or any(x != ls[0] for x in ls):
            return None
        lay = ls[0][TOPIC]
        return ls[0] if all(v[0] >= 0 and v[2] == v[1] and len(v[1]) == 3 for v in lay.values()) else None

    every = h.wait_until(full, 20, f'every broker shows {TOPIC} with its ISR full')
    st['layout'] = every[TOPIC]
    total = sum(len(ps) for ps in every.values())
    st['total'] = total

    def scrapes_agree():
        ms = [scrape(b) for b in bs]
        ok = (sum(g(m, 'kafka_server_replicamanager_leadercount') or 0 for m in ms) == total and
              sum(g(m, 'kafka_controller_kafkacontroller_activecontrollercount') or 0 for m in ms) == 1 and
              all(g(m, 'kafka_server_replicamanager_underreplicatedpartitions') == 0 for m in ms))
        return ms if ok else None

    try:
        ms = h.wait_until(scrapes_agree, 10, 'the scrapes show the steady state')
    except h.HarnessError:
        ms = [scrape(b) for b in bs]
    eq('leadercount summed over the brokers = every partition Metadata lists',
       total, sum(g(m, 'kafka_server_replicamanager_leadercount') for m in ms))
    eq('activecontrollercount summed = 1', 1, sum(g(m, 'kafka_controller_kafkacontroller_activecontrollercount')
                                                  for m in ms))
    eq('globalpartitioncount summed = every partition (the active controller only writes it)', total,
       sum(g(m, 'kafka_controller_kafkacontroller_globalpartitioncount') for m in ms))
    eq('globaltopiccount summed = every topic', len(every),
       sum(g(m, 'kafka_controller_kafkacontroller_globaltopiccount') for m in ms))
    eq('kafka_brokers summed = 3', 3, sum(g(m, 'kafka_brokers') or 0 for m in ms))
    eq('underreplicatedpartitions 0 on every broker', [0, 0, 0],
       [g(m, 'kafka_server_replicamanager_underreplicatedpartitions') for m in ms])
    written = {}
    for b, m in zip(bs, ms):
        for p in range(PARTS):
            v = g(m, 'kafka_topic_partition_leader', topic=TOPIC, partition=p)
            if v is not None:
                written.setdefault(p, []).append((b.node_id, int(v)))
    eq('kafka_topic_partition_leader: each partition written once, by its leader, with its id',
       {p: [(v[0], v[0])] for p, v in st['layout'].items()}, written)
    ctl = [b for b, m in zip(bs, ms) if g(m, 'kafka_controller_kafkacontroller_activecontrollercount') == 1]
    st['controller'] = ctl[0].node_id if ctl else None
    st['before'] = {b.node_id: m for b, m in zip(bs, ms)}


def t_stopped_follower(run, etcd, bs, st):
    lay = st['layout']
    victim = next(b for b in bs if b.node_id != st['controller'])
    live = [b for b in bs if b is not victim]
    followed = sorted(p for p, v in lay.items() if v[0] != victim.node_id and victim.node_id in v[1])
    st['victim'], st['live'], st['followed'] = victim, live, followed
    victim.pause()
    t0 = time.monotonic()
    by_id = {b.node_id: b for b in bs}
    for p in followed:  # the followed partitions' leaders move their log end offset: the victim falls behind
        with k.Conn(by_id[lay[p][0]].bootstrap, timeout=10) as c:
            r = k.produce(c, TOPIC, p, k.build_batch([(b'k', b'v' * 50)] * 3), acks=1)
        eq(f'produce acks=1 to {TOPIC}-{p} (leader {lay[p][0]}) with broker {victim.node_id} stopped', 0,
           r['error_code'])

    def shrunk():
        ms = {b.node_id: scrape(b) for b in live}
        under = sorted(p for p in range(PARTS) for b in live
                       if g(ms[b.node_id], 'kafka_cluster_partition_underreplicated', topic=TOPIC, partition=p) == 1)
        return ms if under == followed else None

    try:
        ms = h.wait_until(shrunk, LAG_MS / 1000 + 15, 'the leaders shrink the ISR')
    except h.HarnessError:
        ms = {b.node_id: scrape(b) for b in live}
    dt = time.monotonic() - t0
    # its last caught-up fetch arrived at most replica.fetch.wait.max.ms (500) before the stop
    check(f'the ISR shrank no sooner than replica.lag.time.max.ms less one fetch wait after the stop ({dt:.1f} s)',
          dt >= (LAG_MS - 500) / 1000 - 0.1, f'{dt:.2f} s')
    under = {}
    for b in live:
        for p in range(PARTS):
            v = g(ms[b.node_id], 'kafka_cluster_partition_underreplicated', topic=TOPIC, partition=p)
            if v is not None:
                under[p] = (b.node_id, int(v), int(g(ms[b.node_id], 'kafka_cluster_partition_insyncreplicascount',
                                                     topic=TOPIC, partition=p)))
    eq(f'kafka_cluster_partition_underreplicated 1 (ISR 2) exactly for the partitions broker {victim.node_id} '
       f'followed, by their leaders', {p: (lay[p][0], 1 if p in followed else 0, 2 if p in followed else 3)
                                        for p in lay if lay[p][0] != victim.node_id}, under)
    for b in live:
        mine = sum(1 for p in followed if lay[p][0] == b.node_id)
        eq(f'broker {b.node_id}: underreplicatedpartitions = the {mine} it leads that the stopped broker followed',
           mine, g(ms[b.node_id], 'kafka_server_replicamanager_underreplicatedpartitions'))
        grew = g(ms[b.node_id], 'kafka_server_replicamanager_isrshrinks_total') - \
            g(st['before'][b.node_id], 'kafka_server_replicamanager_isrshrinks_total')
        check(f'broker {b.node_id}: isrshrinks_total grew by at least {mine} ({grew:.0f})', grew >= mine and mine > 0,
              f'{grew}')
    st['shrunk'] = ms


def t_resumed(run, etcd, bs, st):
    victim, live, followed, lay = st['victim'], st['live'], st['followed'], st['layout']
    victim.resume()

    def healed():
        ms = {b.node_id: scrape(b) for b in bs}
        return ms if all(g(m, 'kafka_server_replicamanager_underreplicatedpartitions') == 0
                         for m in ms.values()) else None

    try:
        ms = h.wait_until(healed, 20, 'the ISR is full again')
    except h.HarnessError:
        ms = {b.node_id: scrape(b) for b in bs}
    eq('underreplicatedpartitions back to 0 on every broker', [0, 0, 0],
       [g(ms[b.node_id], 'kafka_server_replicamanager_underreplicatedpartitions') for b in bs])
    for b in live:
        mine = sum(1 for p in followed if lay[p][0] == b.node_id)
        grew = g(ms[b.node_id], 'kafka_server_replicamanager_isrexpands_total') - \
            g(st['shrunk'][b.node_id], 'kafka_server_replicamanager_isrexpands_total')
        check(f'broker {b.node_id}: isrexpands_total grew by at least {mine} ({grew:.0f})', grew >= mine and mine > 0,
              f'{grew}')
    eq('activecontrollercount summed still 1', 1,
       sum(g(m, 'kafka_controller_kafkacontroller_activecontrollercount') for m in ms.values()))


def main():
    seed, deadline = h.cli(deadline_s=90.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-metrics') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('an RF 3 topic, ISR full', t_steady, run, etcd, bs, st)
        if 'before' in st:
            section('a follower stopped: the leaders shrink', t_stopped_follower, run, etcd, bs, st)
        if 'shrunk' in st:
            section('the follower resumed: the leaders expand', t_resumed, run, etcd, bs, st)
        elif 'victim' in st:
            st['victim'].resume()
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-metrics: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
