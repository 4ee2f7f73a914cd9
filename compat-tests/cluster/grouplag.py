"""grouplag.py: consumer-group lag series in a 3-broker cluster (issue #22, server/metrics_groups.c): etcd and
three gregor brokers through harness.py (each with its admin listener on a free port), seeded and bounded.

Topic glc (3 partitions, replication factor 1: one led by each broker), N_p records produced to partition p
at its leader, group glc-g commits K_p on every partition at its coordinator C (generation -1: an Empty
group). Expected values are computed here from what was produced and committed:
  - only C's /metrics has series of the group (sum() over brokers counts it once): members 0, every
    partition's kafka_consumergroup_current_offset = K_p (the coordinator knows every commit), the topic's
    current_offset_sum = sum K_p;
  - kafka_consumergroup_lag and gregor_consumergroup_lag_records N_p - K_p for every partition, the two led
    by the other brokers from their leaders' partition summaries (remote_lag.py tests those in depth), and
    the topic's lag_sum;
  - /v1/groups/glc-g/lag at C: the three partitions with hw, log start, lag_records and the headroom records;
    at the other brokers 404 "group not coordinated by this broker".
Ends with `cluster-grouplag: N passed, N failed`; exit status 1 on any failure.
Usage: grouplag.py [--seed N] [--deadline SECONDS]
Read next: server/metrics_groups.h, groups.py.
"""
import http.client
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, section  # noqa: E402

TOPIC, GROUP = 'glc', 'glc-g'
FAMILIES = {'kafka_consumergroup_' + f for f in ('current_offset', 'current_offset_sum', 'lag', 'lag_sum', 'members')} | \
    {'gregor_consumergroup_lag_records'}  # server/metrics_groups.c's (other files add other group families)
N = {0: 6, 1: 9, 2: 4}
K = {0: 2, 1: 5, 2: 1}


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', 'gregor.metadata.etcd.prefix=/gregor',
            'broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500', 'auto.create.topics.enable=false',
            'offsets.topic.replication.factor=1', 'offsets.topic.num.partitions=6']


def admin(b):
    with open(os.path.join(b.dir, 'admin')) as f:
        return f.read().strip()


def http_get(b, path):
    host, port = admin(b).rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request('GET', path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def group_series(b):
    """{(name, frozenset(labels)): value} of GROUP's samples of FAMILIES on b's /metrics."""
    st, body = http_get(b, '/metrics')
    out = {}
    for line in body.decode().splitlines():
        m = re.match(r'^((?:kafka|gregor)_consumergroup_[a-z_]+)\{(.*)\} (\S+)$', line)
        if m and m.group(1) in FAMILIES:
            labels = frozenset(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            if ('consumergroup', GROUP) in labels:
                out[(m.group(1), labels)] = float(m.group(3))
    return out


def try_(fn):
    try:
        return fn()
    except Exception:  # noqa: BLE001 - a broker starting
        return None


def coordinator(bs):
    with k.Conn(bs[0].bootstrap, timeout=5) as c:
        r = c.request('FindCoordinator', 3, {'key': GROUP, 'key_type': 0})
    return r['node_id'] if r['error_code'] == 0 else None


def leaders(b):
    with k.Conn(b.bootstrap, timeout=5) as c:
        m = k.metadata(c, [TOPIC], allow_auto=False)
    t = m['topics'][0]
    return {p['partition_index']: p['leader_id'] for p in t['partitions']} if t['error_code'] == 0 else None


def t_lag(run, etcd, bs, st):
    byid = {b.node_id: b for b in bs}
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        eq(f'CreateTopics {TOPIC} (3 partitions)', 0, k.create_topic(c, TOPIC, 3)['error_code'])
    h.wait_until(lambda: all((try_(lambda: leaders(b)) or {}).keys() == {0, 1, 2} and -1 not in leaders(b).values()
                             for b in bs), 20, 'every broker knows the three leaders')
    lead = leaders(bs[0])
    eq('one partition led by each broker', [1, 2, 3], sorted(lead.values()))
    for p, n in N.items():
        with k.Conn(byid[lead[p]].bootstrap, timeout=10) as c:
            r = k.produce(c, TOPIC, p, k.build_batch([(None, b'v%d' % i) for i in range(n)]))
            eq(f'produce {n} records to {TOPIC}-{p} at its leader', 0, r['error_code'])
    h.wait_until(lambda: try_(lambda: coordinator(bs)) is not None, 30, 'FindCoordinator names a coordinator')
    cid = coordinator(bs)
    cb = byid[cid]

    def commit():
        with k.Conn(cb.bootstrap, timeout=10) as c:
            r = c.request('OffsetCommit', 8, {
                'group_id': GROUP, 'generation_id_or_member_epoch': -1, 'member_id': '',
                'topics': [{'name': TOPIC, 'partitions': [{'partition_index': p, 'committed_offset': K[p],
                                                           'committed_metadata': ''} for p in N]}]})
        return [x['error_code'] for x in r['topics'][0]['partitions']]
    h.wait_until(lambda: try_(commit) == [0, 0, 0], 30, 'the commit of K_p on every partition at the coordinator')
    local = [p for p in N if lead[p] == cid]
    eq('the coordinator leads exactly one partition of the topic', 1, len(local))
    lp = local[0]

    def L(**kw):
        return frozenset(kw.items())
    want = {('kafka_consumergroup_members', L(consumergroup=GROUP)): 0,
            ('kafka_consumergroup_current_offset_sum', L(consumergroup=GROUP, topic=TOPIC)): sum(K.values()),
            ('kafka_consumergroup_lag_sum', L(consumergroup=GROUP, topic=TOPIC)): sum(N[p] - K[p] for p in N)}
    for p in N:
        want[('kafka_consumergroup_current_offset', L(consumergroup=GROUP, topic=TOPIC, partition=str(p)))] = K[p]
        want[('kafka_consumergroup_lag', L(consumergroup=GROUP, topic=TOPIC, partition=str(p)))] = N[p] - K[p]
        want[('gregor_consumergroup_lag_records', L(consumergroup=GROUP, topic=TOPIC, partition=str(p)))] = \
            N[p] - K[p]
    got = {}
    for b in bs:
        got[b.node_id] = group_series(b)
    eq(f'the coordinator (broker {cid}): exactly the committed offsets and the lag of every partition',
       sorted((n, sorted(lab), v) for (n, lab), v in want.items()),
       sorted((n, sorted(lab), v) for (n, lab), v in got[cid].items()))
    eq('the other brokers: no series of the group', {b.node_id: {} for b in bs if b.node_id != cid},
       {i: s for i, s in got.items() if i != cid})
    stc, body = http_get(cb, f'/v1/groups/{GROUP}/lag')
    parts = []
    for p in N:
        known = True  # the remote two from their leaders' summaries
        parts.append({'topic': TOPIC, 'partition': p, 'committed_offset': K[p],
                      'high_watermark': N[p] if known else None, 'log_start_offset': 0 if known else None,
                      'lag_records': N[p] - K[p] if known else None})
    got_j = json.loads(body)
    # the lag in bytes/seconds and headroom: the headroom records (committed - log start 0) everywhere, lag
    # bytes known everywhere (remote_lag.py checks their values); then the rest exactly
    tfields = ('lag_bytes', 'lag_seconds', 'retention_headroom_records', 'retention_headroom_seconds')
    tv = [{k: gp.pop(k, 'absent') for k in tfields} for gp in got_j.get('partitions', [])]
    eq('/v1/groups/glc-g/lag at the coordinator: headroom records of every partition',
       [K[p] for p in N], [t['retention_headroom_records'] for t in tv])
    eq('/v1/groups/glc-g/lag at the coordinator: lag bytes known where another broker leads too',
       [True for p in N if p != lp], [isinstance(t['lag_bytes'], int) for t, p in zip(tv, N) if p != lp])
    eq('/v1/groups/glc-g/lag at the coordinator: exact, every partition known', (200, {
        'group': GROUP, 'state': 'Empty', 'members': 0, 'partitions': parts}), (stc, got_j))
    for b in bs:
        if b.node_id != cid:
            s, body = http_get(b, f'/v1/groups/{GROUP}/lag')
            eq(f'/v1/groups/glc-g/lag at broker {b.node_id}: 404, not coordinated here',
               (404, 'group not coordinated by this broker'), (s, json.loads(body).get('error')))


def main():
    seed, deadline = h.cli(deadline_s=120.0)
    t0 = time.monotonic()
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-grouplag') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        check('three brokers serve their admin listener', all(try_(lambda b=b: admin(b)) for b in bs))
        section('group lag series from the coordinator only', t_lag, run, etcd, bs, {})
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-grouplag: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
