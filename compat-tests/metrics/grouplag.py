"""metrics/grouplag.py: consumer-group lag in records on one broker (issue #22, server/metrics_groups.c).

Against the broker of compat-tests/metrics/run.sh (BROKER; ADMIN its admin listener). Topic gl (2
partitions): 3 + 4 records to partition 0 in two batches, 5 to partition 1; group gl-g joins (one member,
checked in kafka_consumergroup_members), commits K = 2 on partition 0 only, then leaves (no members). Every
expected value is computed here from what was produced and committed, never read back from the broker:
  kafka_consumergroup_current_offset   p0 = K, p1 = -1 (kafka_exporter emits the -1 of a partition without
                                        a commit)
  kafka_consumergroup_lag              p0 = N0 - K, p1 = -1
  kafka_consumergroup_current_offset_sum = K + (-1) (kafka_exporter sums every value it emits)
  kafka_consumergroup_lag_sum          = N0 - K (the -1 skipped)
  kafka_consumergroup_members          = 0 once it left (1 while joined)
  gregor_consumergroup_lag_records     p0 = N0 - K, none for p1 (no commit)
A topic the group never committed to (gl2) has no series of the group. /v1/groups/gl-g/lag is compared as a
whole JSON value (lag_bytes as the page's, headroom records K and K - D, seconds 0 once deleted). DeleteRecords of partition 0 up to D (K < D < N0) makes lag_records = N0 - D (hw - log
start) while kafka_consumergroup_lag stays N0 - K. A group id that needs URL encoding ("g l/x%", committed
with generation -1: an Empty group that never had members) is looked up decoded; an unknown group gets 404
with a JSON error, a group id over 4096 bytes 400. A group id that is not UTF-8 (raw bytes on the wire) is
labelled with U+FFFD for each bad byte, so the page stays valid for Prometheus. Prints "RESULT p f x".
"""
import http.client
import json
import os
import re
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402

RETRIABLE = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def http_get(admin, path):
    host, port = admin.rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request('GET', path)
        r = c.getresponse()
        return r.status, r.getheader('content-type'), r.read()
    finally:
        c.close()


def scrape(admin):
    """{(name, frozenset(labels)): value} of the consumer-group families of /metrics."""
    st, _, body = http_get(admin, '/metrics')
    if st != 200:
        raise RuntimeError(f'/metrics answered {st}')
    try:
        body.decode('utf-8')
        out = {'utf8': True}
    except UnicodeDecodeError:
        out = {'utf8': False}
    text = body.decode('utf-8', 'surrogateescape')
    for line in text.splitlines():
        if not line.startswith(('kafka_consumergroup_', 'gregor_consumergroup_lag_records',
                                'gregor_consumergroup_lag_bytes')):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$', line)
        if not m:
            raise ValueError(f'not a sample line: {line!r}')
        labels = frozenset((k, v.replace('\\"', '"').replace('\\\\', '\\'))
                           for k, v in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2)))
        out[(m.group(1), labels)] = float(m.group(3))
    return out, text


def jparse(body):
    """The JSON value of `body`, or {'not json': the first bytes} (a check then fails instead of the script)."""
    try:
        return json.loads(body)
    except ValueError:
        return {'not json': body[:80]}


def retried(fn):
    deadline = time.monotonic() + 20
    while True:
        r = fn()
        if r['error_code'] not in RETRIABLE or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def commit(c, group, gen, member, topic, partition, offset):
    r = retried(lambda: (lambda t: {'error_code': t['topics'][0]['partitions'][0]['error_code']})(
        c.request('OffsetCommit', 8, {
            'group_id': group, 'generation_id_or_member_epoch': gen, 'member_id': member,
            'topics': [{'name': topic, 'partitions': [{'partition_index': partition, 'committed_offset': offset,
                                                       'committed_metadata': ''}]}]})))
    return r['error_code']


def L(**kw):
    return frozenset(kw.items())


def main():
    broker, admin = tk.broker(), os.environ['ADMIN']
    G, T = 'gl-g', 'gl'
    N0, N1, K, D = 7, 5, 2, 5
    with kr.Conn(broker) as c:
        tk.eq('topic gl (2 partitions) created', 0, kr.create_topic(c, T, partitions=2)['error_code'])
        tk.eq('topic gl2 created', 0, kr.create_topic(c, 'gl2', partitions=1)['error_code'])
        for part, sizes in ((0, (3, 4)), (1, (N1,))):
            for n in sizes:
                b = kr.build_batch([(None, b'r%d' % i) for i in range(n)])
                tk.eq(f'produce {n} to {T}-{part}', 0, kr.produce(c, T, part, b)['error_code'])
        tk.eq('gl2 gets a record', 0, kr.produce(c, 'gl2', 0, kr.build_batch([(None, b'x')]))['error_code'])
        join = {'group_id': G, 'session_timeout_ms': 10000, 'rebalance_timeout_ms': 10000, 'member_id': '',
                'protocol_type': 'consumer', 'protocols': [{'name': 'range', 'metadata': b''}]}
        r = retried(lambda: c.request('JoinGroup', 5, join, timeout=20))
        tk.eq('JoinGroup v5: MEMBER_ID_REQUIRED first', 79, r['error_code'])
        join['member_id'] = r['member_id']
        r = c.request('JoinGroup', 5, join, timeout=20)  # the initial rebalance delay (3 s) passes here
        tk.eq('JoinGroup v5 with the member id', 0, r['error_code'])
        member, gen = r['member_id'], r['generation_id']
        r = c.request('SyncGroup', 3, {'group_id': G, 'generation_id': gen, 'member_id': member,
                                       'assignments': [{'member_id': member, 'assignment': b''}]}, timeout=20)
        tk.eq('SyncGroup', 0, r['error_code'])
        tk.eq(f'commit {K} on {T}-0 as the member', 0, commit(c, G, gen, member, T, 0, K))
        m, _ = scrape(admin)
        tk.eq('members 1 while joined', 1, m.get(('kafka_consumergroup_members', L(consumergroup=G))))
        r = c.request('LeaveGroup', 4, {'group_id': G, 'members': [{'member_id': member}]})
        tk.eq('LeaveGroup', (0, 0), (r['error_code'], r['members'][0]['error_code']))
        tk.eq('an admin commit (generation -1) makes group "g l/x%"', 0, commit(c, 'g l/x%', -1, '', T, 1, 3))
        tk.eq('an admin commit makes group b"bad\\xffid" (not UTF-8)', 0, commit(c, b'bad\xffid', -1, '', T, 0, 1))

    m, text = scrape(admin)
    p0, p1 = L(consumergroup=G, topic=T, partition='0'), L(consumergroup=G, topic=T, partition='1')
    gt = L(consumergroup=G, topic=T)
    want = [
        ('kafka_consumergroup_members', L(consumergroup=G), 0),
        ('kafka_consumergroup_current_offset', p0, K),
        ('kafka_consumergroup_current_offset', p1, -1),
        ('kafka_consumergroup_lag', p0, N0 - K),
        ('kafka_consumergroup_lag', p1, -1),
        ('kafka_consumergroup_current_offset_sum', gt, K - 1),
        ('kafka_consumergroup_lag_sum', gt, N0 - K),
        ('gregor_consumergroup_lag_records', p0, N0 - K),
        ('gregor_consumergroup_lag_records', p1, None),
    ]
    for name, labels, v in want:
        tk.eq(f'{name}{dict(labels)}', v, m.get((name, labels)))
    tk.eq('no series of the group for gl2, which it never committed to', [],
          [k for k in m if k != 'utf8' and ('consumergroup', G) in k[1] and ('topic', 'gl2') in k[1]])
    for fam in ('current_offset', 'current_offset_sum', 'lag', 'lag_sum', 'members'):
        typ = 'untyped' if fam.endswith('_sum') else 'gauge'  # promtool refuses a gauge named *_sum
        tk.eq(f'# TYPE kafka_consumergroup_{fam} {typ} once', 1,
              text.count(f'# TYPE kafka_consumergroup_{fam} {typ}\n'))
    tk.eq('# TYPE gregor_consumergroup_lag_records gauge once', 1,
          text.count('# TYPE gregor_consumergroup_lag_records gauge\n'))
    o = L(consumergroup='g l/x%', topic=T, partition='1')
    tk.eq('group "g l/x%": members 0, lag on gl-1 = N1 - 3, gl-0 -1', (0, N1 - 3, -1),
          (m.get(('kafka_consumergroup_members', L(consumergroup='g l/x%'))), m.get(('kafka_consumergroup_lag', o)),
           m.get(('kafka_consumergroup_lag', L(consumergroup='g l/x%', topic=T, partition='0')))))

    tk.eq('the page is UTF-8; group b"bad\\xffid" is labelled with U+FFFD (Prometheus refuses invalid UTF-8)',
          (True, 0), (m.get('utf8'), m.get(('kafka_consumergroup_members', L(consumergroup='bad\ufffdid')))))

    def lag_json(group):
        st, ctype, body = http_get(admin, '/v1/groups/' + urllib.parse.quote(group, safe='') + '/lag')
        return st, ctype, jparse(body)

    st, ctype, body = http_get(admin, '/v1/groups/' + G + '/lag')
    tk.check('/v1/groups/gl-g/lag: numbers with at most 12 significant digits (no binary tails)',
             not re.search(rb'[0-9.]{14,}', body), body[:300])
    st, ctype, j = lag_json(G)
    tk.eq('/v1/groups/gl-g/lag: 200 application/json', (200, 'application/json'), (st, ctype))
    # the lag in bytes and seconds and the headroom (storage/lag.h), then the rest exactly
    tp = (j.get('partitions') or [{}])[0]
    tv = {k: tp.pop(k, 'absent') for k in ('lag_bytes', 'lag_seconds', 'retention_headroom_records',
                                           'retention_headroom_seconds')}
    tk.eq('/v1/groups/gl-g/lag: lag_bytes as the page\'s gregor_consumergroup_lag_bytes, headroom records = K',
          (m.get(('gregor_consumergroup_lag_bytes', p0)), K), (tv['lag_bytes'], tv['retention_headroom_records']))
    tk.check('/v1/groups/gl-g/lag: lag_seconds > 0 (K < the log end) and headroom seconds within the default '
             '7 days', isinstance(tv['lag_seconds'], float) and tv['lag_seconds'] > 0 and
             isinstance(tv['retention_headroom_seconds'], float) and
             0 < tv['retention_headroom_seconds'] <= 7 * 86400, tv)
    tk.eq('/v1/groups/gl-g/lag: exact', {
        'group': G, 'state': 'Empty', 'members': 0,
        'partitions': [{'topic': T, 'partition': 0, 'committed_offset': K, 'high_watermark': N0,
                        'log_start_offset': 0, 'lag_records': N0 - K}]}, j)
    st, _, j = lag_json('g l/x%')
    tk.eq('/v1/groups/g%20l%2Fx%25/lag: the decoded group', (200, 'g l/x%', [(T, 1, 3, N1, 0, N1 - 3)]),
          (st, j.get('group'), [(p['topic'], p['partition'], p['committed_offset'], p['high_watermark'],
                                 p['log_start_offset'], p['lag_records']) for p in j.get('partitions', [])]))
    st, _, body = http_get(admin, '/v1/groups/bad%FFid/lag')
    tk.eq('/v1/groups/bad%FFid/lag: 200, the id in JSON with U+FFFD', (200, 'bad\ufffdid', N0 - 1),
          (st, jparse(body).get('group'), (jparse(body).get('partitions') or [{}])[0].get('lag_records')))
    st, ctype, j = lag_json('no-such-group')
    tk.eq('unknown group: 404 with a JSON error', (404, 'application/json', 'unknown group'),
          (st, ctype, j.get('error')))
    st, _, j = lag_json('x' * 5000)
    tk.eq('a group id over 4096 bytes: 400', (400, True), (st, 'error' in j))
    st, _, _ = http_get(admin, '/v1/groups/gl-g/lagx')
    tk.eq('/v1/groups/gl-g/lagx: 404', 404, st)

    with kr.Conn(broker) as c:
        r = c.request('DeleteRecords', 2, {'topics': [{'name': T, 'partitions': [{'partition_index': 0, 'offset': D}]}],
                                           'timeout_ms': 10000})
        p = r['topics'][0]['partitions'][0]
        tk.eq(f'DeleteRecords {T}-0 before {D}', (0, D), (p['error_code'], p['low_watermark']))
    m, _ = scrape(admin)
    tk.eq('after DeleteRecords past K: lag_records = hw - log start', N0 - D,
          m.get(('gregor_consumergroup_lag_records', p0)))
    tk.eq('and kafka_consumergroup_lag stays hw - committed', N0 - K, m.get(('kafka_consumergroup_lag', p0)))
    st, _, j = lag_json(G)
    tp = (j.get('partitions') or [{}])[0]
    tv = {k: tp.pop(k, 'absent') for k in ('lag_bytes', 'lag_seconds', 'retention_headroom_records',
                                           'retention_headroom_seconds')}
    tk.eq('/v1/groups/gl-g/lag after DeleteRecords: headroom records K - D (already deleted), seconds 0',
          (K - D, 0.0), (tv['retention_headroom_records'], tv['retention_headroom_seconds']))
    tk.eq('/v1/groups/gl-g/lag after DeleteRecords: exact', {
        'group': G, 'state': 'Empty', 'members': 0,
        'partitions': [{'topic': T, 'partition': 0, 'committed_offset': K, 'high_watermark': N0,
                        'log_start_offset': D, 'lag_records': N0 - D}]}, j)
    tk.finish()


main()
