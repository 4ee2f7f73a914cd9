"""metrics/lagtime.py: lag in bytes and seconds and retention headroom (issue #22, "Lag, four ways").

Against the broker of compat-tests/metrics/run.sh (BROKER, ADMIN):
- topic lt1 (default configs, one segment): three batches of 5 records (b1, b2, b3) produced with pauses of
  1.1 s, so each batch's start is in the broker's sample history (one sample per second of appends). Groups
  commit (OffsetCommit v8, no generation): glt at K = 7 (inside b2), gstart at 2 (inside b1), gend at 15 (the
  log end). Expected lag bytes come from the batches' own lengths: len(b2) + len(b3), the whole log, 0; lag
  seconds within 0.3 s of the real age of b2's append (bounded by the times around its Produce); headroom
  records = K - log start (0); headroom seconds with retention.ms 7 days and no retention.bytes: the active
  segment holds K, so 7 days less the age of its max timestamp (the batches' own timestamps), within 1 s.
- topic lt2 (retention.ms 3000, segment.bytes 100: every batch its own segment): group gret commits 0 in
  the first segment; headroom seconds = (that segment's max timestamp + 3 s - now), within 0.3 s; after
  that deadline, 0. The group's min headroom line equals its partition's.
Prints "RESULT p f x".
"""
import http.client
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402


def scrape(admin):
    """(wall clock before, after, {(name, frozenset(labels)): value}) of one GET /metrics."""
    host, port = admin.rsplit(':', 1)
    t0 = time.time()
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request('GET', '/metrics')
        body = c.getresponse().read().decode()
    finally:
        c.close()
    t1 = time.time()
    out = {}
    for line in body.splitlines():
        if not line or line.startswith('#'):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return t0, t1, out


def commit(c, group, topic, offset):
    deadline = time.monotonic() + 10
    while True:  # the first group request starts the coordinator (__consumer_offsets): retry while loading
        r = c.request('OffsetCommit', 8, {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '',
                                          'group_instance_id': None, 'topics': [{'name': topic, 'partitions': [
                                              {'partition_index': 0, 'committed_offset': offset,
                                               'committed_metadata': ''}]}]})
        code = r['topics'][0]['partitions'][0]['error_code']
        if code not in (14, 15, 16) or time.monotonic() > deadline:
            return code
        time.sleep(0.1)


def labels(group, topic):
    return frozenset({('consumergroup', group), ('topic', topic), ('partition', '0')})


def near(name, expected, got, tol):
    tk.check(f'{name}: {expected:.3f} within {tol}', got is not None and abs(got - expected) <= tol,
             f'got {got}')


def main():
    broker = tk.broker()
    admin = os.environ['ADMIN']
    with kr.Conn(broker) as c:
        # lt2 first: its retention deadline runs while lt1's pauses pass.
        tk.eq('topic lt2 created', 0, kr.create_topic(c, 'lt2', configs={
            'retention.ms': '3000', 'segment.bytes': '100'})['error_code'])
        r1 = kr.build_batch([(None, b'r' * 60)])
        tk.eq('lt2: first batch', 0, kr.produce(c, 'lt2', 0, r1)['error_code'])
        r1_max_ts = int.from_bytes(r1[35:43], 'big')  # the header's max timestamp (build_batch: now)
        time.sleep(0.3)  # the spare file for the roll (asked for at half of segment.bytes) is made meanwhile
        tk.eq('lt2: second batch (a new segment)', 0,
              kr.produce(c, 'lt2', 0, kr.build_batch([(None, b's' * 60)]))['error_code'])
        tk.eq('gret commits 0 on lt2', 0, commit(c, 'gret', 'lt2', 0))
        t0, t1, m = scrape(admin)
        segs = m.get(('kafka_log_log_numlogsegments', frozenset({('topic', 'lt2'), ('partition', '0')})))
        tk.eq('lt2 has 2 segments (so offset 0 is in a sealed one)', 2, segs)
        hs = m.get(('gregor_consumergroup_retention_headroom_seconds', labels('gret', 'lt2')))
        # max(0, maxTimestamp(S_0) + retention.ms - now), now between t0 and t1
        near('gret headroom seconds before the deadline', (r1_max_ts + 3000) / 1000 - (t0 + t1) / 2, hs,
             0.3 + (t1 - t0) / 2)
        tk.eq('gret min headroom = its one partition\'s', hs,
              m.get(('gregor_consumergroup_min_retention_headroom_seconds', frozenset({('consumergroup', 'gret')}))))

        tk.eq('topic lt1 created', 0, kr.create_topic(c, 'lt1')['error_code'])
        batches, sent = [], []
        for i in range(3):
            if i:
                time.sleep(1.1)
            b = kr.build_batch([(b'k%d' % j, b'v' * (20 + 7 * i)) for j in range(5)])
            before = time.time()
            p = kr.produce(c, 'lt1', 0, b)
            tk.eq(f'lt1: batch {i + 1} appended at {5 * i}', (0, 5 * i), (p['error_code'], p['base_offset']))
            sent.append((before, time.time()))
            batches.append(b)
        for g, k in (('glt', 7), ('gstart', 2), ('gend', 15)):
            tk.eq(f'{g} commits {k} on lt1', 0, commit(c, g, 'lt1', k))
    time.sleep(0.5)
    t0, t1, m = scrape(admin)
    sizes = [len(b) for b in batches]
    tk.eq('lag bytes of K = 7 (inside batch 2): len(b2) + len(b3)', sizes[1] + sizes[2],
          m.get(('gregor_consumergroup_lag_bytes', labels('glt', 'lt1'))))
    tk.eq('lag bytes of 2 (inside batch 1): the whole log', sum(sizes),
          m.get(('gregor_consumergroup_lag_bytes', labels('gstart', 'lt1'))))
    tk.eq('lag bytes at the log end: 0', 0, m.get(('gregor_consumergroup_lag_bytes', labels('gend', 'lt1'))))
    # batch 2 was appended between sent[1][0] and sent[1][1]; the scrape read the clock between t0 and t1
    lo, hi = t0 - sent[1][1], t1 - sent[1][0]
    ls = m.get(('gregor_consumergroup_lag_seconds', labels('glt', 'lt1')))
    tk.check(f'lag seconds of K = 7: the age of batch 2, in [{lo:.3f}, {hi:.3f}] +- 0.3', ls is not None and
             lo - 0.3 <= ls <= hi + 0.3, f'got {ls}')
    lo, hi = t0 - sent[0][1], t1 - sent[0][0]
    ls = m.get(('gregor_consumergroup_lag_seconds', labels('gstart', 'lt1')))
    tk.check(f'lag seconds of 2: the age of batch 1, in [{lo:.3f}, {hi:.3f}] +- 0.3', ls is not None and
             lo - 0.3 <= ls <= hi + 0.3, f'got {ls}')
    tk.eq('lag seconds at the log end: 0', 0, m.get(('gregor_consumergroup_lag_seconds', labels('gend', 'lt1'))))
    tk.eq('headroom records of K = 7: K - log start 0', 7,
          m.get(('gregor_consumergroup_retention_headroom_records', labels('glt', 'lt1'))))
    # k = n (one segment), retention.bytes -1: min(T_roll + 7 d, maxTimestamp(S_n) + 7 d - now) = the latter
    b3_max_ts = int.from_bytes(batches[2][35:43], 'big')
    hs = m.get(('gregor_consumergroup_retention_headroom_seconds', labels('glt', 'lt1')))
    near('headroom seconds of K = 7: 7 days less the age of the active segment\'s max timestamp',
         (b3_max_ts + 604800000) / 1000 - (t0 + t1) / 2, hs, 1.0)
    mins = {g: m.get(('gregor_consumergroup_min_retention_headroom_seconds', frozenset({('consumergroup', g)})))
            for g in ('glt', 'gstart', 'gend', 'gret')}
    tk.check('a min headroom line for every group with commits', all(v is not None for v in mins.values()),
             str(mins))

    # lt2 past its deadline: headroom 0 (retention may already have deleted the segment: 0 too, c < log start)
    wait = (r1_max_ts + 3000) / 1000 + 0.2 - time.time()
    if wait > 0:
        time.sleep(wait)
    _, _, m = scrape(admin)
    tk.eq('gret headroom seconds after the deadline: 0', 0,
          m.get(('gregor_consumergroup_retention_headroom_seconds', labels('gret', 'lt2'))))
    tk.eq('gret min headroom after the deadline: 0', 0,
          m.get(('gregor_consumergroup_min_retention_headroom_seconds', frozenset({('consumergroup', 'gret')}))))
    tk.check('no value is NaN', not any(isinstance(v, float) and math.isnan(v) for v in m.values()))
    tk.finish()


main()
