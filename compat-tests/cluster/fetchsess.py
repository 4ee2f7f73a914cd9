"""fetchsess.py: the followers' fetch sessions (KIP-227, issue #24; cluster/fetch_session_client.h) in a
3-broker cluster: etcd and three gregor brokers on the host (harness.py: each with an admin listener),
seeded and bounded in time.

What it checks:
  - an RF 3 topic of PARTS partitions, its ISR full: every leader holds exactly two fetch sessions (one per
    follower: num.replica.fetchers 1, no consumer here), both privileged, holding together twice the
    partitions it leads (gregor_fetch_sessions, gregor_fetch_session_partitions); over an idle window every
    broker's replica fetcher sends only incremental fetches (gregor_replica_fetcher_requests_total{kind}) and
    every leader counts only incremental ones (gregor_fetch_session_requests_total{kind}), with no session
    reset;
  - records produced (acks=all, 3 per partition) are replicated: every replica of every partition holds the
    leader's batches byte for byte up to the high watermark (replicacheck.py), the ISR stays full, and the
    fetchers are still incremental (an incremental answer omits the partitions without news: none is taken
    for an error or a gap);
  - leader changes: broker 3 stopped (SIGTERM), brokers 1 and 2 lead everything and still fetch from each
    other incrementally; acks=all produce goes on; restarted, it rejoins every ISR (leading nothing) and the
    replicas agree; then broker 1 stopped: broker 3 becomes a leader, broker 2 opens a new session on it
    with a full fetch (it holds one session, of the partitions it leads) and goes on incrementally; produce
    goes on; broker 1 restarted rejoins and the replicas agree again.
Ends with `cluster-fetchsess: N passed, N failed`; exit status 1 on any failure.
Usage: fetchsess.py [--seed N] [--deadline SECONDS]
Read next: cluster/fetch_session_client.h, server/fetch_session.h, metrics.py, replication.py.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import metrics as mx  # noqa: E402  (scrape, g)
import replicacheck  # noqa: E402
import testkit  # noqa: E402  (compat-tests/lib: the counted checks every suite uses)
from testkit import check, eq, section  # noqa: E402

PREFIX = '/gregor'
TOPIC = 'fsess'
PARTS = 30
FR = 'gregor_replica_fetcher_requests_total'
SR = 'gregor_fetch_session_requests_total'


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=6000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', 'replica.fetch.backoff.ms=200', 'min.insync.replicas=1']


def layout(bs):
    """{partition: (leader, replicas, isr)} of TOPIC as every live broker's Metadata shows it, None while they
    differ or it is missing."""
    ls = [mx.topics(b) for b in bs if b.alive()]
    if any(x is None or TOPIC not in x or len(x[TOPIC]) != PARTS for x in ls) or any(x != ls[0] for x in ls):
        return None
    return ls[0][TOPIC]


def counts(b):
    m = mx.scrape(b)
    return {'fetcher_full': mx.g(m, FR, kind='full'), 'fetcher_incr': mx.g(m, FR, kind='incremental'),
            'resets': mx.g(m, 'gregor_replica_fetcher_session_resets_total'),
            'sessions': mx.g(m, 'gregor_fetch_sessions'), 'sess_parts': mx.g(m, 'gregor_fetch_session_partitions'),
            'leader_full': mx.g(m, SR, kind='full'), 'leader_incr': mx.g(m, SR, kind='incremental'),
            'leader_none': mx.g(m, SR, kind='sessionless'), 'leader_err': mx.g(m, SR, kind='error')}


def produce_all(bs, lay, n=3):
    by_id = {b.node_id: b for b in bs}
    errs = {}
    for p, (leader, _, _) in sorted(lay.items()):
        with k.Conn(by_id[leader].bootstrap, timeout=10) as c:
            r = k.produce(c, TOPIC, p, k.build_batch([(b'k%d' % p, b'v' * 40)] * n), acks=-1)
        if r['error_code']:
            errs[p] = r['error_code']
    return errs


def hw_of(bs, lay):
    by_id = {b.node_id: b for b in bs}
    return {p: k.high_watermark(by_id[leader].bootstrap, TOPIC, p) for p, (leader, _, _) in lay.items()}


def replicas_agree(label, bs, lay):
    hw = hw_of(bs, lay)

    def caught_up():
        for p, (_, replicas, _) in lay.items():
            for r in replicas:
                bl, _ = replicacheck.batches(os.path.join(bs[r - 1].data_dir, f'{TOPIC}-{p}'), hw[p])
                if hw[p] and (not bl or bl[-1][1] + 1 < hw[p]):
                    return False
        return True
    try:
        h.wait_until(caught_up, 20, f'{label}: every replica holds the high watermark')
    except h.HarnessError as e:
        check(str(e), False)
        return
    bad_parts = {}
    for p, (_, replicas, _) in lay.items():
        dirs = {r: os.path.join(bs[r - 1].data_dir, f'{TOPIC}-{p}') for r in replicas}
        bad, lines = replicacheck.compare(dirs, hw[p])
        if bad:
            bad_parts[p] = lines[:4]
    eq(f'{label}: the replicas of all {len(lay)} partitions agree byte for byte up to the high watermark', {},
       bad_parts)


def t_idle(run, etcd, bs, st):
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': TOPIC, 'num_partitions': PARTS, 'replication_factor': 3,
                                                      'assignments': [], 'configs': []}],
                                          'timeout_ms': 15000, 'validate_only': False})['topics'][0]
    eq(f'CreateTopics {TOPIC}: {PARTS} partitions, RF 3', 0, r['error_code'])
    lay = h.wait_until(lambda: (lambda x: x if x and all(len(v[2]) == 3 for v in x.values()) else None)(layout(bs)),
                       30, 'the ISR full everywhere')
    st['layout'] = lay
    led = {b.node_id: sum(1 for v in lay.values() if v[0] == b.node_id) for b in bs}

    def settled():
        cs = {b.node_id: counts(b) for b in bs}
        ok = all(cs[i]['sessions'] == 2 and cs[i]['sess_parts'] == 2 * led[i] for i in cs)
        return cs if ok else None
    try:
        h.wait_until(settled, 15, 'two sessions per leader holding its partitions')
    except h.HarnessError:
        pass
    time.sleep(0.5)  # a fetch in flight at the first scrape settles
    c0 = {b.node_id: counts(b) for b in bs}
    eq('every leader holds two fetch sessions (one per follower)', {i: 2 for i in led},
       {i: c0[i]['sessions'] for i in c0})
    eq('their partitions: twice those it leads', {i: 2 * led[i] for i in led},
       {i: c0[i]['sess_parts'] for i in c0})
    time.sleep(3)
    c1 = {b.node_id: counts(b) for b in bs}
    d = {i: {x: c1[i][x] - c0[i][x] for x in c1[i]} for i in c1}
    eq('idle 3 s: no full fetch sent by any follower', {i: 0 for i in d}, {i: d[i]['fetcher_full'] for i in d})
    check('idle 3 s: every follower sent incremental fetches (at least 2 per leader per 0.5 s long poll)',
          all(d[i]['fetcher_incr'] >= 8 for i in d), str({i: d[i]['fetcher_incr'] for i in d}))
    eq('idle 3 s: every leader counted no full, sessionless or error fetch',
       {i: (0, 0, 0) for i in d}, {i: (d[i]['leader_full'], d[i]['leader_none'], d[i]['leader_err']) for i in d})
    eq('no session reset on any follower', {i: 0 for i in c1}, {i: c1[i]['resets'] for i in c1})
    st['idle'] = c1


def t_produce(run, etcd, bs, st):
    lay = st['layout']
    eq('produce acks=all, 3 records to each partition', {}, produce_all(bs, lay))
    replicas_agree('after produce', bs, lay)
    now = layout(bs)
    eq('the ISR stays full', {p: 3 for p in lay}, {p: len(v[2]) for p, v in (now or {}).items()})
    c = {b.node_id: counts(b) for b in bs}
    eq('still no full fetch and no reset after the produce', {i: (0, 0) for i in c},
       {i: (c[i]['fetcher_full'] - st['idle'][i]['fetcher_full'], c[i]['resets']) for i in c})
    st['produced'] = True


def t_leader_change(run, etcd, bs, st):
    victim = bs[2]
    live = bs[:2]
    victim.stop()
    lay = h.wait_until(lambda: (lambda x: x if x and all(v[0] in (1, 2) for v in x.values()) else None)(layout(live)),
                       30, 'the survivors lead every partition')
    c0 = {b.node_id: counts(b) for b in live}
    time.sleep(2)
    c1 = {b.node_id: counts(b) for b in live}
    check('the survivors fetch from each other incrementally',
          all(c1[i]['fetcher_incr'] - c0[i]['fetcher_incr'] >= 4 for i in c1),
          str({i: c1[i]['fetcher_incr'] - c0[i]['fetcher_incr'] for i in c1}))
    eq('produce acks=all with one broker stopped', {}, produce_all(live, lay))
    victim.start(same_ports=True)

    def rejoined():
        x = layout(bs)
        return x if x and all(len(v[2]) == 3 for v in x.values()) else None
    try:
        lay = h.wait_until(rejoined, 40, 'the restarted broker rejoins every ISR')
        check('the restarted broker rejoined every ISR', True)
    except h.HarnessError as e:
        check(str(e), False)
        return

    replicas_agree('after the restart', bs, lay)
    # broker 3 leads nothing now (no preferred election within the test): stop broker 1, so broker 3 leads
    # some partitions and broker 2 follows them: a new leader, a new connection, a new session
    b2, b3 = bs[1], bs[2]
    f0 = counts(b2)
    bs[0].stop()
    lay = h.wait_until(lambda: (lambda x: x if x and all(v[0] in (2, 3) for v in x.values()) and
                                any(v[0] == 3 for v in x.values()) else None)(layout(bs[1:])),
                       30, 'brokers 2 and 3 lead every partition, 3 some')
    led3 = sum(1 for v in lay.values() if v[0] == 3)

    def one():
        c3 = counts(b3)
        return c3 if c3['sessions'] == 1 and c3['sess_parts'] == led3 else None
    try:
        c3 = h.wait_until(one, 15, 'broker 3 holds broker 2\'s session')
    except h.HarnessError:
        c3 = counts(b3)
    eq(f'broker 3, a new leader of {led3} partitions: one session (broker 2\'s) holding them', (1, led3),
       (c3['sessions'], c3['sess_parts']))
    f1 = counts(b2)
    check('broker 2 opened it with a full fetch', f1['fetcher_full'] > f0['fetcher_full'],
          f"{f0['fetcher_full']} -> {f1['fetcher_full']}")
    time.sleep(2)
    f2 = counts(b2)
    check('and goes on incrementally', f2['fetcher_incr'] - f1['fetcher_incr'] >= 4 and
          f2['fetcher_full'] == f1['fetcher_full'],
          f"incremental +{f2['fetcher_incr'] - f1['fetcher_incr']}, full +{f2['fetcher_full'] - f1['fetcher_full']}")
    eq('produce acks=all to the new leaders', {}, produce_all(bs[1:], lay))
    bs[0].start(same_ports=True)
    try:
        lay = h.wait_until(rejoined, 40, 'broker 1 rejoins every ISR')
        check('broker 1 rejoined every ISR', True)
    except h.HarnessError as e:
        check(str(e), False)
        return
    replicas_agree('after both restarts', bs, lay)


def main():
    seed, deadline = h.cli(deadline_s=150.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-fetchsess') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('RF 3 idle: two incremental sessions per leader', t_idle, run, etcd, bs, st)
        if 'idle' in st:
            section('produce: replicated through incremental fetches', t_produce, run, etcd, bs, st)
        if 'produced' in st:
            section('a leader change and a restart', t_leader_change, run, etcd, bs, st)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-fetchsess: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
