"""metrics/caughtup.py: a group caught up on a transactional topic does not look late (Gregor's own families).

Against the broker of compat-tests/metrics/run.sh (BROKER; ADMIN its admin listener). Topic cu (1 partition):
N records in one committed transaction (two batches), so the COMMIT marker is at offset N and the high
watermark N + 1. Group cu-g commits N (the marker's offset: a read_committed consumer that read every record
commits last record + 1) three times; group cu-lag commits N - 5. Expected values, computed here:
  cu-g:   kafka_consumergroup_lag = (N + 1) - N = 1 (kafka_exporter's hw - committed, kept);
          gregor_consumergroup_lag_records 0, lag_bytes 0, lag_seconds 0 (nothing readable left: only the
          marker lies between N and the high watermark); /v1/groups/cu-g/lag likewise;
          gregor_consumergroup_status 1 (OK: Burrow's first rule, current lag 0, with the lag taken against
          the caught-up offset N);
  cu-lag: kafka_consumergroup_lag = lag_records = (N + 1) - (N - 5) = 6 (records left: as before), lag_bytes
          > 0.
Then one plain record after the marker (offset N + 1, high watermark N + 2): cu-g's lag_records = (N + 2) - N
= 2, kafka_consumergroup_lag 2 (a readable record past it: lag again). Prints "RESULT p f x".
"""
import http.client
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402

N = 1000
TOPIC = 'cu'
TXN = 'cu-txn'


def http_get(admin, path):
    host, port = admin.rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request('GET', path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def scrape(admin):
    st, body = http_get(admin, '/metrics')
    if st != 200:
        raise RuntimeError(f'/metrics answered {st}')
    out = {}
    for line in body.decode().splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            continue
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def commit(c, group, offset):
    body = {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '', 'group_instance_id': None,
            'topics': [{'name': TOPIC, 'partitions': [{'partition_index': 0, 'committed_offset': offset,
                                                       'committed_metadata': ''}]}]}
    for _ in range(100):  # the group coordinator starts with the first group request
        c.request('FindCoordinator', 3, {'key': group, 'key_type': 0})
        err = c.request('OffsetCommit', 8, body)['topics'][0]['partitions'][0]['error_code']
        if err not in (14, 15):  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
            break
        time.sleep(0.05)
    tk.eq(f'{group} commits {offset}', 0, err)


def transaction(c, n):
    """n records in one committed transaction (two batches) to cu-0; waits for the marker."""
    end = time.monotonic() + 10
    while c.request('FindCoordinator', 3, {'key': TXN, 'key_type': 1})['error_code'] and time.monotonic() < end:
        time.sleep(0.1)
    while True:
        r = c.request('InitProducerId', 4, {'transactional_id': TXN, 'transaction_timeout_ms': 60000})
        if r['error_code'] not in (14, 15, 51) or time.monotonic() > end:
            break
        time.sleep(0.1)
    tk.eq('InitProducerId for a transactional id', 0, r['error_code'])
    pid, epoch = r['producer_id'], r['producer_epoch']
    r = c.request('AddPartitionsToTxn', 3, {
        'v3_and_below_transactional_id': TXN, 'v3_and_below_producer_id': pid,
        'v3_and_below_producer_epoch': epoch, 'v3_and_below_topics': [{'name': TOPIC, 'partitions': [0]}]})
    tk.eq('AddPartitionsToTxn cu-0', 0,
          r['results_by_topic_v3_and_below'][0]['results_by_partition'][0]['partition_error_code'])
    half = n // 2
    for seq, k in ((0, half), (half, n - half)):
        b = kr.build_batch([(None, b'x%d' % (seq + i)) for i in range(k)], attributes_extra=0x10,
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        tk.eq(f'a transactional batch of {k} records', 0,
              kr.produce(c, TOPIC, 0, b, transactional_id=TXN)['error_code'])
    tk.eq('EndTxn commit', 0, c.request('EndTxn', 3, {'transactional_id': TXN, 'producer_id': pid,
                                                       'producer_epoch': epoch, 'committed': True})['error_code'])
    end = time.monotonic() + 10
    while kr.high_watermark(tk.broker(), TOPIC) < n + 1 and time.monotonic() < end:  # the marker follows
        time.sleep(0.05)
    tk.eq(f'high watermark {n + 1}: the records and the COMMIT marker at {n}', n + 1,
          kr.high_watermark(tk.broker(), TOPIC))


def main():
    admin = os.environ['ADMIN']
    L = lambda g: frozenset({('consumergroup', g), ('topic', TOPIC), ('partition', '0')})  # noqa: E731
    G = lambda g: frozenset({('consumergroup', g)})  # noqa: E731
    with kr.Conn(tk.broker()) as c:
        tk.eq('topic cu created', 0, kr.create_topic(c, TOPIC, partitions=1)['error_code'])
        transaction(c, N)
        hw = N + 1
        for i in range(3):
            commit(c, 'cu-g', N)
            commit(c, 'cu-lag', N - 5)
            if i < 2:
                time.sleep(0.3)
        m = scrape(admin)
        tk.eq('cu-g: kafka_consumergroup_lag = hw - committed = 1 (kafka_exporter)', hw - N,
              m.get(('kafka_consumergroup_lag', L('cu-g'))))
        tk.eq('cu-g: gregor_consumergroup_lag_records 0 (only the marker is left)', 0,
              m.get(('gregor_consumergroup_lag_records', L('cu-g'))))
        tk.eq('cu-g: gregor_consumergroup_lag_bytes 0', 0, m.get(('gregor_consumergroup_lag_bytes', L('cu-g'))))
        tk.eq('cu-g: gregor_consumergroup_lag_seconds 0', 0,
              m.get(('gregor_consumergroup_lag_seconds', L('cu-g'))))
        tk.eq('cu-g: gregor_consumergroup_status OK (1)', 1, m.get(('gregor_consumergroup_status', G('cu-g'))))
        tk.eq('cu-lag: kafka_consumergroup_lag = lag_records = hw - (N - 5) = 6', (hw - (N - 5), hw - (N - 5)),
              (m.get(('kafka_consumergroup_lag', L('cu-lag'))),
               m.get(('gregor_consumergroup_lag_records', L('cu-lag')))))
        tk.check('cu-lag: lag_bytes > 0', (m.get(('gregor_consumergroup_lag_bytes', L('cu-lag'))) or 0) > 0)
        st, body = http_get(admin, '/v1/groups/cu-g/lag')
        p = json.loads(body)['partitions'][0] if st == 200 else {}
        tk.eq('/v1/groups/cu-g/lag: high_watermark N + 1, lag_records 0, lag_bytes 0, lag_seconds 0',
              (200, hw, 0, 0, 0), (st, p.get('high_watermark'), p.get('lag_records'), p.get('lag_bytes'),
                                   p.get('lag_seconds')))
        tk.eq('a plain record after the marker', 0,
              kr.produce(c, TOPIC, 0, kr.build_batch([(None, b'plain')]))['error_code'])
        m = scrape(admin)
        tk.eq('cu-g after it: lag_records = kafka_consumergroup_lag = (N + 2) - N = 2', (2, 2),
              (m.get(('gregor_consumergroup_lag_records', L('cu-g'))),
               m.get(('kafka_consumergroup_lag', L('cu-g')))))
        tk.check('cu-g after it: lag_bytes > 0', (m.get(('gregor_consumergroup_lag_bytes', L('cu-g'))) or 0) > 0)
    tk.finish()


main()
