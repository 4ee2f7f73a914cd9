"""remote_lag.py: a group's lag for partitions other brokers lead, from their partition summaries (issue #22
"In a cluster"; cluster/remote_summary.h, server/metrics_remote.h): etcd and three gregor brokers through
harness.py (admin listeners on free ports), seeded and bounded.

Topic rl (3 partitions, replication factor 1: one led by each broker). Each partition p gets two Produce
batches at its leader, 1.2 s apart: K_p records, then M_p records whose batch is B_p bytes (so the broker's
append history has a sample at offset K_p: lag bytes are then exactly B_p, storage/lag.h). Group rl-g commits
K_p on every partition at its coordinator A; group rl-ok commits N_p = K_p + M_p (caught up) on the two
partitions B and C lead. Expected values come from what was produced and committed:
  - A's scrape, for every partition (the two led by B and C included): kafka_consumergroup_lag and
    gregor_consumergroup_lag_records M_p, lag_sum sum M_p, gregor_consumergroup_lag_bytes B_p,
    lag_seconds within [age - 0.5, age + 3] of the second batch's age, retention_headroom_records K_p,
    retention_headroom_seconds >= 7 days - their age (retention.ms's default, no size limit); rl-ok's status OK (1)
    (evaluated from B's and C's high watermarks: NOTFOUND without them);
  - summed over the three brokers each (group, partition) counts once; B and C emit no series of the groups;
  - /v1/groups/rl-g/lag at A: high watermark, log start, lag records and bytes, headroom for all three;
  - B SIGSTOPped: A's next scrape answers within 0.5 s + margin, leaves B's partition out (lag, lag_records,
    lag_bytes), and gregor_metrics_remote_partition_errors_total rises by 1 (B's one partition); after
    SIGCONT the partition comes back; `promtool check metrics` passes the coordinator's cluster-mode page;
  - DeleteRecords to X = K_p + 1 on C's partition: rl-g's records_lost_total on A rises by X - K_p = 1 (from
    the rise of C's summarized log start), rl-ok's stays 0, lag_records becomes N_p - X;
  - topic rlf (RF 3) led by another broker with a follower replica on A: DeleteRecords past rl-g's commit
    counts X - K once on A (its follower's start hook does not count, the leader's summary does);
  - topic rlt: 10 records in one committed transaction on a partition led by a broker other than group rl-t's
    coordinator (COMMIT marker at 10, high watermark 11), rl-t commits 10 three times: on its coordinator
    kafka_consumergroup_lag 1 (hw - committed) but lag_records, lag_bytes, lag_seconds 0 and status OK (1),
    from the leader's summarized caught-up offset (cluster/part_summary.h).
Ends with `cluster-remote-lag: N passed, N failed`; exit status 1 on any failure.
Usage: remote_lag.py [--seed N] [--deadline SECONDS]
Read next: cluster/remote_summary.h, grouplag.py.
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import grouplag as gl  # noqa: E402
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, section  # noqa: E402

TOPIC, GROUP, OKG = 'rl', 'rl-g', 'rl-ok'
K = {0: 3, 1: 5, 2: 2}
M = {0: 4, 1: 2, 2: 6}
ERRS = 'gregor_metrics_remote_partition_errors_total'
WEEK = 7 * 24 * 3600.0


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', 'gregor.metadata.etcd.prefix=/gregor',
            'broker.session.timeout.ms=10000', 'broker.heartbeat.interval.ms=500', 'auto.create.topics.enable=false',
            'offsets.topic.replication.factor=1', 'offsets.topic.num.partitions=6']


def scrape(b):
    """({(name, frozenset(labels)): value} of every sample, seconds the GET took) of b's /metrics."""
    t = time.monotonic()
    st, body = gl.http_get(b, '/metrics')
    took = time.monotonic() - t
    out = {}
    for line in body.decode().splitlines():
        m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        if m:
            labels = frozenset(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ''))
            out[(m.group(1), labels)] = float(m.group(3))
    return out, took


def L(**kw):
    return frozenset(kw.items())


def PL(group, p):
    return L(consumergroup=group, topic=TOPIC, partition=str(p))


def of_groups(series):
    return {key: v for key, v in series.items() if any(lab in key[1] for lab in
                                                         (('consumergroup', GROUP), ('consumergroup', OKG)))}


def t_remote(run, etcd, bs, st):
    byid = {b.node_id: b for b in bs}
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        eq(f'CreateTopics {TOPIC} (3 partitions)', 0, k.create_topic(c, TOPIC, 3)['error_code'])
    h.wait_until(lambda: all((gl.try_(lambda: leaders(b)) or {}).keys() == {0, 1, 2} and
                             -1 not in leaders(b).values() for b in bs), 20, 'every broker knows the three leaders')
    lead = leaders(bs[0])
    eq('one partition led by each broker', [1, 2, 3], sorted(lead.values()))
    size = {}
    for rnd in (0, 1):
        if rnd:
            time.sleep(1.2)  # the second batch gets its own sample in the leader's append history
        for p in K:
            n = K[p] if rnd == 0 else M[p]
            batch = k.build_batch([(None, b'r%d-%d-%d' % (rnd, p, i) * (p + 1)) for i in range(n)])
            size[p] = len(batch)
            with k.Conn(byid[lead[p]].bootstrap, timeout=10) as c:
                eq(f'produce {n} records ({len(batch)} bytes) to {TOPIC}-{p} at its leader', 0,
                   k.produce(c, TOPIC, p, batch)['error_code'])
        t_second = time.time()
    h.wait_until(lambda: gl.try_(lambda: coordinator(bs, GROUP)) is not None, 30, 'FindCoordinator answers')
    cid = coordinator(bs, GROUP)
    a = byid[cid]
    remote = sorted(p for p in K if lead[p] != cid)
    eq('the coordinator of rl-g leads one partition, two are led elsewhere', 2, len(remote))

    def commit(group, offsets):
        def go():
            with k.Conn(a.bootstrap, timeout=10) as c:
                r = c.request('OffsetCommit', 8, {
                    'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '',
                    'topics': [{'name': TOPIC, 'partitions': [
                        {'partition_index': p, 'committed_offset': o, 'committed_metadata': ''}
                        for p, o in offsets.items()]}]})
            return [x['error_code'] for x in r['topics'][0]['partitions']]
        return go
    # rl-ok must have the same coordinator: pick the group id among rl-ok, rl-ok1, ... that A coordinates
    global OKG
    for i in range(200):
        name = OKG if i == 0 else f'rl-ok{i}'
        if gl.try_(lambda name=name: coordinator(bs, name)) == cid:
            OKG = name
            break
    check(f'a caught-up group coordinated by broker {cid} too ({OKG})', coordinator(bs, OKG) == cid)
    h.wait_until(lambda: gl.try_(commit(GROUP, K)) == [0, 0, 0], 30, f'{GROUP} commits K_p at its coordinator')
    h.wait_until(lambda: gl.try_(commit(OKG, {p: K[p] + M[p] for p in remote})) == [0, 0], 30,
                 f'{OKG} commits N_p on the two remote partitions')

    time.sleep(2.0)  # the records age: lag seconds is then about 2 s
    got, took = scrape(a)
    age = time.time() - t_second
    for p in K:
        where = 'here' if p not in remote else f'at broker {lead[p]}'
        eq(f'kafka_consumergroup_lag {TOPIC}-{p} (led {where}) = N - K', M[p],
           got.get(('kafka_consumergroup_lag', PL(GROUP, p))))
        eq(f'gregor_consumergroup_lag_records {TOPIC}-{p} = N - K', M[p],
           got.get(('gregor_consumergroup_lag_records', PL(GROUP, p))))
        eq(f'gregor_consumergroup_lag_bytes {TOPIC}-{p} = the second batch\'s {size[p]} bytes', size[p],
           got.get(('gregor_consumergroup_lag_bytes', PL(GROUP, p))))
        sec = got.get(('gregor_consumergroup_lag_seconds', PL(GROUP, p)))
        check(f'gregor_consumergroup_lag_seconds {TOPIC}-{p} {sec} within [{age - 0.5:.2f}, {age + 3:.2f}]',
              sec is not None and age - 0.5 <= sec <= age + 3)
        eq(f'gregor_consumergroup_retention_headroom_records {TOPIC}-{p} = K', K[p],
           got.get(('gregor_consumergroup_retention_headroom_records', PL(GROUP, p))))
        hs = got.get(('gregor_consumergroup_retention_headroom_seconds', PL(GROUP, p)))
        check(f'retention_headroom_seconds {TOPIC}-{p} {hs} >= 7 days - the records\' age',
              hs is not None and hs >= WEEK - age - 5)
    eq('kafka_consumergroup_lag_sum = sum of N - K', sum(M.values()),
       got.get(('kafka_consumergroup_lag_sum', L(consumergroup=GROUP, topic=TOPIC))))
    eq(f'status of {OKG} (caught up on the two remote partitions): OK (1)', 1,
       got.get(('gregor_consumergroup_status', L(consumergroup=OKG))))
    eq(f'{ERRS} at the coordinator: 0 so far', 0, got.get((ERRS, L())))
    st_, page = gl.http_get(a, '/metrics')
    pt = subprocess.run(['promtool', 'check', 'metrics'], input=page, capture_output=True, timeout=30)
    eq('promtool check metrics on the coordinator\'s cluster-mode page: no problem', (0, b''),
       (pt.returncode, pt.stdout + pt.stderr))
    others = {b.node_id: of_groups(scrape(b)[0]) for b in bs if b.node_id != cid}
    eq('the other brokers: no series of the groups', {i: {} for i in others}, others)
    total = sum(v for (n, lab), v in of_groups(got).items() if n == 'kafka_consumergroup_lag' and
                ('consumergroup', GROUP) in lab)
    eq('sum over the brokers of kafka_consumergroup_lag: each partition once', sum(M.values()), total)
    s, body = gl.http_get(a, f'/v1/groups/{GROUP}/lag')
    j = json.loads(body)
    rows = [{f: r.get(f) for f in ('partition', 'high_watermark', 'log_start_offset', 'lag_records', 'lag_bytes',
                                   'retention_headroom_records')} for r in j.get('partitions', [])]
    eq('/v1/groups/rl-g/lag at the coordinator: every partition known', (200, [
        {'partition': p, 'high_watermark': K[p] + M[p], 'log_start_offset': 0, 'lag_records': M[p],
         'lag_bytes': size[p], 'retention_headroom_records': K[p]} for p in K]), (s, rows))

    b = byid[lead[remote[0]]]
    rp = remote[0]
    time.sleep(1.1)  # past the once-per-second interval: the next scrape asks b again
    b.proc.pause()
    try:
        got2, took2 = scrape(a)
    finally:
        b.proc.resume()
    check(f'with broker {b.node_id} stopped the scrape answers within 0.5 s + margin ({took2:.2f} s)', took2 < 2.5)
    eq(f'{TOPIC}-{rp} (led by the stopped broker) left out: no lag, lag_records, lag_bytes',
       [None, None, None], [got2.get((f, PL(GROUP, rp))) for f in (
           'kafka_consumergroup_lag', 'gregor_consumergroup_lag_records', 'gregor_consumergroup_lag_bytes')])
    other = remote[1]
    eq(f'{TOPIC}-{other} (the other remote leader answered) still there', M[other],
       got2.get(('kafka_consumergroup_lag', PL(GROUP, other))))
    eq(f'{ERRS} rose by the stopped broker\'s partitions (1)', 1, got2.get((ERRS, L()), 0) - got.get((ERRS, L()), 0))

    def back():
        g, _ = scrape(a)
        return g.get(('kafka_consumergroup_lag', PL(GROUP, rp))) == M[rp]
    t = time.monotonic()
    while not back() and time.monotonic() - t < 15:
        time.sleep(0.5)
    check(f'{TOPIC}-{rp} back after SIGCONT (lag N - K again) within 15 s', back())

    # records lost: DeleteRecords past rl-g's commit on the other remote partition, at its leader; the
    # coordinator counts it from the rise of that leader's summarized log start (X - K), rl-ok nothing
    x = K[other] + 1
    with k.Conn(byid[lead[other]].bootstrap, timeout=10) as c:
        r = c.request('DeleteRecords', 2, {'topics': [{'name': TOPIC, 'partitions': [
            {'partition_index': other, 'offset': x}]}], 'timeout_ms': 10000})
    dp = r['topics'][0]['partitions'][0]
    eq(f'DeleteRecords {TOPIC}-{other} to {x} at its leader', (0, x), (dp['error_code'], dp['low_watermark']))
    lost = ('gregor_consumergroup_records_lost_total', L(consumergroup=GROUP, topic=TOPIC))
    before = got.get(lost)
    time.sleep(1.1)  # past the interval: the next scrape asks that leader again
    got3, _ = scrape(a)
    eq(f'records_lost_total{{{GROUP},{TOPIC}}} at the coordinator: 0, then X - K = 1', (0, 1),
       (before, got3.get(lost)))
    eq(f'records_lost_total{{{OKG},{TOPIC}}}: 0 (its commit is past X)', 0,
       got3.get(('gregor_consumergroup_records_lost_total', L(consumergroup=OKG, topic=TOPIC))))
    eq(f'lag_records {TOPIC}-{other} = N - X after the deletion', K[other] + M[other] - x,
       got3.get(('gregor_consumergroup_lag_records', PL(GROUP, other))))
    others = {b.node_id: of_groups(scrape(b)[0]) for b in bs if b.node_id != cid}
    eq('the other brokers: still no series of the groups (the loss counted once)', {i: {} for i in others},
       others)

    # counted once when the coordinator holds a follower replica: topic rlf (RF 3) led by another broker,
    # A a follower; DeleteRecords at the leader moves A's own log start too (storage's start hook fires on
    # the follower: not counted), the leader's summary counts X - K once
    ft, fl = 'rlf', lead[other]
    third = [i for i in byid if i not in (fl, cid)][0]
    with k.Conn(a.bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{
            'name': ft, 'num_partitions': -1, 'replication_factor': -1, 'configs': [],
            'assignments': [{'partition_index': 0, 'broker_ids': [fl, cid, third]}]}],
            'timeout_ms': 15000, 'validate_only': False})['topics'][0]
    eq(f'CreateTopics {ft}: replicas [{fl}, {cid}, {third}], led by {fl}', 0, r['error_code'])

    def isr_full():
        with k.Conn(a.bootstrap, timeout=5) as c:
            m = k.metadata(c, [ft], version=12, allow_auto=False)
        p0 = m['topics'][0]['partitions'][0] if m['topics'][0]['error_code'] == 0 else None
        return p0 and p0['leader_id'] == fl and sorted(p0['isr_nodes']) == sorted(byid)
    h.wait_until(lambda: gl.try_(isr_full), 30, f'{ft}-0 led by {fl} with all three in its ISR')
    with k.Conn(byid[fl].bootstrap, timeout=10) as c:
        eq(f'produce 5 records to {ft}-0 (acks=all)', 0,
           k.produce(c, ft, 0, k.build_batch([(None, b'f%d' % i) for i in range(5)]))['error_code'])

    def commit_f():
        with k.Conn(a.bootstrap, timeout=10) as c:
            r = c.request('OffsetCommit', 8, {
                'group_id': GROUP, 'generation_id_or_member_epoch': -1, 'member_id': '',
                'topics': [{'name': ft, 'partitions': [{'partition_index': 0, 'committed_offset': 2,
                                                        'committed_metadata': ''}]}]})
        return r['topics'][0]['partitions'][0]['error_code']
    eq(f'{GROUP} commits 2 on {ft}-0', 0, commit_f())
    time.sleep(1.1)
    g4, _ = scrape(a)
    eq(f'lag_records {ft}-0 = 5 - 2 from its leader {fl}', 3,
       g4.get(('gregor_consumergroup_lag_records', L(consumergroup=GROUP, topic=ft, partition='0'))))
    with k.Conn(byid[fl].bootstrap, timeout=10) as c:
        r = c.request('DeleteRecords', 2, {'topics': [{'name': ft, 'partitions': [
            {'partition_index': 0, 'offset': 4}]}], 'timeout_ms': 10000})
    eq(f'DeleteRecords {ft}-0 to 4 at its leader', 0, r['topics'][0]['partitions'][0]['error_code'])
    lsf = ('kafka_log_log_logstartoffset', L(topic=ft, partition='0'))
    h.wait_until(lambda: scrape(a)[0].get(lsf) == 4, 15, f'the follower replica on {cid} follows the log start 4')
    time.sleep(1.1)
    g5, _ = scrape(a)
    eq(f'records_lost_total{{{GROUP},{ft}}}: 4 - 2 = 2, counted once (follower hook not counted)', 2,
       g5.get(('gregor_consumergroup_records_lost_total', L(consumergroup=GROUP, topic=ft))))


def t_txn(run, etcd, bs):
    """A partition led by another broker that ends with a COMMIT marker: its leader's summary carries the
    caught-up offset (the records' end N, the high watermark N + 1), so a group committed at N shows
    kafka_consumergroup_lag 1 but lag_records, lag_bytes, lag_seconds 0 and status OK (1) on its
    coordinator."""
    byid = {b.node_id: b for b in bs}
    tt, grp, tid, n = 'rlt', 'rl-t', 'rl-txn', 10
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        eq(f'CreateTopics {tt} (3 partitions)', 0, k.create_topic(c, tt, 3)['error_code'])

    def lead_of():
        with k.Conn(bs[0].bootstrap, timeout=5) as c:
            m = k.metadata(c, [tt], allow_auto=False)
        t = m['topics'][0]
        d = {q['partition_index']: q['leader_id'] for q in t['partitions']} if t['error_code'] == 0 else {}
        return d if d.keys() == {0, 1, 2} and -1 not in d.values() else None
    lead = h.wait_until(lambda: gl.try_(lead_of), 20, f'{tt} has three leaders')
    cid = h.wait_until(lambda: gl.try_(lambda: coordinator(bs, grp)), 30, f'FindCoordinator {grp}')
    p = next(q for q in sorted(lead) if lead[q] != cid)

    def find_tc():
        with k.Conn(bs[0].bootstrap, timeout=5) as c:
            r = c.request('FindCoordinator', 3, {'key': tid, 'key_type': 1})
        return r['node_id'] if r['error_code'] == 0 else None
    tc = byid[h.wait_until(lambda: gl.try_(find_tc), 60, 'the transaction coordinator')]

    def init():
        with k.Conn(tc.bootstrap, timeout=10) as c:
            r = c.request('InitProducerId', 4, {'transactional_id': tid, 'transaction_timeout_ms': 60000})
        return r if r['error_code'] == 0 else None
    r = h.wait_until(lambda: gl.try_(init), 60, 'InitProducerId')
    pid, epoch = r['producer_id'], r['producer_epoch']
    with k.Conn(tc.bootstrap, timeout=10) as c:
        r = c.request('AddPartitionsToTxn', 3, {
            'v3_and_below_transactional_id': tid, 'v3_and_below_producer_id': pid,
            'v3_and_below_producer_epoch': epoch, 'v3_and_below_topics': [{'name': tt, 'partitions': [p]}]})
    eq(f'AddPartitionsToTxn {tt}-{p}', 0,
       r['results_by_topic_v3_and_below'][0]['results_by_partition'][0]['partition_error_code'])
    b = k.build_batch([(None, b'x%d' % i) for i in range(n)], attributes_extra=0x10, producer_id=pid,
                      producer_epoch=epoch, base_sequence=0)
    with k.Conn(byid[lead[p]].bootstrap, timeout=10) as c:
        eq(f'{n} transactional records to {tt}-{p} at its leader {lead[p]} (coordinator of {grp}: {cid})', 0,
           k.produce(c, tt, p, b, transactional_id=tid)['error_code'])
    with k.Conn(tc.bootstrap, timeout=10) as c:
        eq('EndTxn commit', 0, c.request('EndTxn', 3, {'transactional_id': tid, 'producer_id': pid,
                                                        'producer_epoch': epoch, 'committed': True})['error_code'])
    h.wait_until(lambda: gl.try_(lambda: k.high_watermark(byid[lead[p]].bootstrap, tt, p)) == n + 1, 15,
                 f'the COMMIT marker at {n}: high watermark {n + 1}')

    def commit():
        with k.Conn(byid[cid].bootstrap, timeout=10) as c:
            r = c.request('OffsetCommit', 8, {
                'group_id': grp, 'generation_id_or_member_epoch': -1, 'member_id': '',
                'topics': [{'name': tt, 'partitions': [{'partition_index': p, 'committed_offset': n,
                                                        'committed_metadata': ''}]}]})
        return r['topics'][0]['partitions'][0]['error_code'] == 0
    for i in range(3):
        h.wait_until(lambda: gl.try_(commit), 30, f'{grp} commits {n} (the marker\'s offset)')
        time.sleep(1.1)  # a summary refresh (at most once per second per leader) between commits
    m, _ = scrape(byid[cid])
    PT = L(consumergroup=grp, topic=tt, partition=str(p))
    eq(f'{grp} on its coordinator: kafka_consumergroup_lag 1, lag_records 0, lag_bytes 0, lag_seconds 0, '
       f'status OK (1)', (1, 0, 0, 0, 1),
       (m.get(('kafka_consumergroup_lag', PT)), m.get(('gregor_consumergroup_lag_records', PT)),
        m.get(('gregor_consumergroup_lag_bytes', PT)), m.get(('gregor_consumergroup_lag_seconds', PT)),
        m.get(('gregor_consumergroup_status', L(consumergroup=grp)))))


def leaders(b):
    with k.Conn(b.bootstrap, timeout=5) as c:
        m = k.metadata(c, [TOPIC], allow_auto=False)
    t = m['topics'][0]
    return {p['partition_index']: p['leader_id'] for p in t['partitions']} if t['error_code'] == 0 else None


def coordinator(bs, group):
    with k.Conn(bs[0].bootstrap, timeout=5) as c:
        r = c.request('FindCoordinator', 3, {'key': group, 'key_type': 0})
    return r['node_id'] if r['error_code'] == 0 else None


def main():
    seed, deadline = h.cli(deadline_s=120.0)
    t0 = time.monotonic()
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-remote-lag') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        check('three brokers serve their admin listener', all(gl.try_(lambda b=b: gl.admin(b)) for b in bs))
        section('lag of partitions led elsewhere, from their leaders\' summaries', t_remote, run, etcd, bs, {})
        section('a group caught up at a remote partition\'s COMMIT marker', t_txn, run, etcd, bs)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-remote-lag: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
