"""metrics/status.py: Burrow's status and records lost to retention on /metrics (issue #22).

Against the broker of compat-tests/metrics/run.sh (BROKER, BROKER_DIR; ADMIN = its admin host:port):
- group st-ok commits the log end offset three times while records arrive between commits:
  gregor_consumergroup_status{consumergroup="st-ok"} 1 (OK: the lag is 0);
- group st-stall commits offset 2 three times, 1 s apart, while 5 records arrive before each commit (lag
  3, 8, 13): STALL, reported as ERR, 3 (scraped within the window's span, so not STOP);
- topic st-lost gets 20 records; st-lost-a commits 7, st-lost-b commits 13, st-lost-c commits 16;
  DeleteRecords to 12: records_lost_total{st-lost-a,st-lost} = 12 - 7 = 5, b and c none, and the log line
  msg="retention deleted past committed offset" group=st-lost-a topic=st-lost partition=0 records_lost=5; then
  DeleteRecords to 15: a gains 15 - 12 = 3 (8 in all), b gains 15 - 13 = 2, c still none.
Expected values are computed here from what the test produced and committed. Prints "RESULT p f x".
"""
import http.client
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402

STATUS = 'gregor_consumergroup_status'
LOST = 'gregor_consumergroup_records_lost_total'


def scrape(admin):
    host, port = admin.rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request('GET', '/metrics')
        r = c.getresponse()
        text = r.read().decode()
    finally:
        c.close()
    out, types = {}, {}
    for line in text.splitlines():
        m = re.match(r'^# TYPE (\S+) (\S+)$', line)
        if m:
            types[m.group(1)] = types.get(m.group(1), []) + [m.group(2)]
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            continue
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return out, types


def produce(c, topic, n):
    b = kr.build_batch([(None, b'r%d' % i) for i in range(n)])
    tk.eq(f'produce {n} records to {topic}', 0, kr.produce(c, topic, 0, b, version=9)['error_code'])


def commit(c, group, topic, offset):
    body = {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '', 'group_instance_id': None,
            'topics': [{'name': topic, 'partitions': [{'partition_index': 0, 'committed_offset': offset,
                                                       'committed_metadata': ''}]}]}
    for _ in range(100):  # the group coordinator starts with the first group request
        c.request('FindCoordinator', 3, {'key': group, 'key_type': 0})
        err = c.request('OffsetCommit', 8, body)['topics'][0]['partitions'][0]['error_code']
        if err not in (14, 15):  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
            break
        time.sleep(0.05)
    tk.eq(f'{group} commits {offset} on {topic}', 0, err)


def delete_records(c, topic, offset):
    r = c.request('DeleteRecords', 2, {'topics': [{'name': topic, 'partitions': [
        {'partition_index': 0, 'offset': offset}]}], 'timeout_ms': 10000})
    p = r['topics'][0]['partitions'][0]
    tk.eq(f'DeleteRecords {topic} to {offset}: low watermark {offset}', (0, offset), (p['error_code'],
                                                                                   p['low_watermark']))


def lost_lines(log_path):
    with open(log_path, errors='replace') as f:
        return [ln for ln in f if 'retention deleted past committed offset' in ln]


def main():
    broker = tk.broker()
    admin = os.environ['ADMIN']
    log_path = os.path.join(os.environ['BROKER_DIR'], 'broker.log')
    G = lambda g: frozenset({('consumergroup', g)})  # noqa: E731
    GT = lambda g, t: frozenset({('consumergroup', g), ('topic', t)})  # noqa: E731
    with kr.Conn(broker) as c:
        for t in ('st-ok', 'st-stall', 'st-lost'):
            tk.eq(f'topic {t} created', 0, kr.create_topic(c, t, partitions=1)['error_code'])
        end = 0
        for _ in range(3):  # st-ok: caught up at every commit
            produce(c, 'st-ok', 4)
            end += 4
            commit(c, 'st-ok', 'st-ok', end)
        for i in range(3):  # st-stall: the same offset while records arrive
            produce(c, 'st-stall', 5)
            commit(c, 'st-stall', 'st-stall', 2)
            if i < 2:
                time.sleep(1.0)
        m, types = scrape(admin)
        tk.eq('status of st-ok: OK (1)', 1, m.get((STATUS, G('st-ok'))))
        tk.eq('status of st-stall: STALL reported as ERR (3)', 3, m.get((STATUS, G('st-stall'))))
        tk.eq('# TYPE gregor_consumergroup_status gauge, once', ['gauge'], types.get(STATUS))
        tk.eq('# TYPE gregor_consumergroup_records_lost_total counter, once', ['counter'], types.get(LOST))

        produce(c, 'st-lost', 20)
        committed = {'st-lost-a': 7, 'st-lost-b': 13, 'st-lost-c': 16}
        for g, k in committed.items():
            commit(c, g, 'st-lost', k)
        before = len(lost_lines(log_path))
        l0, l1, l2 = 0, 12, 15
        delete_records(c, 'st-lost', l1)

        def gained(k, a, b):  # what issue #22 says a group at k gains when the start moves a -> b
            return b - max(k, a) if k < b else 0
        want1 = {g: gained(k, l0, l1) for g, k in committed.items()}
        m, _ = scrape(admin)
        for g in committed:
            tk.eq(f'records_lost_total of {g} (committed {committed[g]}) after the start moved {l0} -> {l1}',
                  want1[g], m.get((LOST, GT(g, 'st-lost'))))
        lines = lost_lines(log_path)[before:]
        tk.eq('one log line, for st-lost-a',
              ['group=st-lost-a topic=st-lost partition=0 records_lost=%d' % want1['st-lost-a']],
              [re.sub(r'^.*offset" ', '', ln).strip() for ln in lines])
        delete_records(c, 'st-lost', l2)
        m, _ = scrape(admin)
        for g, k in committed.items():
            want = want1[g] + gained(k, l1, l2)
            tk.eq(f'records_lost_total of {g} after the start moved {l1} -> {l2}: {want}', want,
                  m.get((LOST, GT(g, 'st-lost'))))
        lines = lost_lines(log_path)[before:]
        tk.eq('log lines for the second move: one per group that lost records',
              sorted('group=%s topic=st-lost partition=0 records_lost=%d' % (g, gained(k, l1, l2))
                     for g, k in committed.items() if gained(k, l1, l2)),
              sorted(re.sub(r'^.*offset" ', '', ln).strip() for ln in lines[1:]))
    tk.finish()


main()
