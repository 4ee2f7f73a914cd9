"""diskfull/run.py: the Python steps of diskfull/run.sh (issue 26, defect 3), with the raw client.
  fill    group use (creates __consumer_offsets), two 6 MiB filler topics, then acks=-1 produces to `main`
          until KAFKA_STORAGE_ERROR; every acknowledged batch (offset, seq) goes to diskfull.json
  verify  after the restart: every partition served, every acknowledged record read back at its offset with
          its content (verify_end: the same once DeleteTopics removed filler2)
  free    DeleteRecords of `filler` frees space; produces to `main` are acknowledged again; `main` fills the
          disk again until KAFKA_STORAGE_ERROR; DeleteTopics of `filler2` frees space; produces are
          acknowledged again; every acknowledged record is read back
"""
import json
import os
import sys
import time

import kafka_raw as k
import testkit as tk

F = k.field
k.API_KEYS.setdefault('DeleteRecords', 21)
k.SCHEMAS.setdefault('DeleteRecords', (2, [
    F('topics', [F('name', 'string', '0+'),
                 F('partitions', [F('partition_index', 'int32', '0+'), F('offset', 'int64', '0+')], '0+')], '0+'),
    F('timeout_ms', 'int32', '0+', default=30000),
], [
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', [F('name', 'string', '0+'),
                 F('partitions', [F('partition_index', 'int32', '0+'), F('low_watermark', 'int64', '0+'),
                                  F('error_code', 'int16', '0+')], '0+')], '0+'),
]))
k.API_KEYS.setdefault('DeleteTopics', 20)
k.SCHEMAS.setdefault('DeleteTopics', (4, [  # first flexible version
    F('topic_names', '[string]', '0+'), F('timeout_ms', 'int32', '0+', default=30000),
], [
    F('throttle_time_ms', 'int32', '1+'),
    F('responses', [F('name', 'string', '0+'), F('error_code', 'int16', '0+')], '0+'),
]))
B = tk.broker()
STATE = os.path.join(os.environ['BROKER_DIR'], 'diskfull.json')
STORAGE_ERROR = 56
RECORDS_PER_BATCH = 4
VALUE_BYTES = 16384


def value(seq, i):
    head = b'%08d:%d:' % (seq, i)
    return head + bytes((seq * 7 + i + j) % 251 for j in range(VALUE_BYTES - len(head)))


def batch(seq):
    return k.build_batch([(b'k%d' % seq, value(seq, i)) for i in range(RECORDS_PER_BATCH)])


def fill():
    acked, errors = [], {}
    with k.Conn(B, timeout=30.0) as c:
        r = c.request('FindCoordinator', 3, {'key': 'diskfull-group', 'key_type': 0})
        tk.eq('FindCoordinator (creates __consumer_offsets)', 0, r['error_code'])
        for t in ('filler', 'filler2', 'main'):
            tk.eq(f'create topic {t}', 0, k.create_topic(c, t, 1)['error_code'])
        filler_bad = 0
        for t in ('filler', 'filler2'):
            for i in range(6 * 1024 * 1024 // (RECORDS_PER_BATCH * VALUE_BYTES)):
                filler_bad += k.produce(c, t, 0, batch(100000 + i), acks=-1)['error_code'] != 0
        tk.eq('6 MiB each into filler and filler2 (acks=-1)', 0, filler_bad)
        storage_errors = 0
        for seq in range(4000):  # 4000 x 64 KiB: far more than the file system holds
            r = k.produce(c, 'main', 0, batch(seq), acks=-1)
            if r['error_code'] == 0:
                acked.append([r['base_offset'], seq])
                continue
            errors[r['error_code']] = errors.get(r['error_code'], 0) + 1
            if r['error_code'] == STORAGE_ERROR:
                storage_errors += 1
                if storage_errors >= 3:  # a few more, each answered
                    break
        tk.check(f'produce until KAFKA_STORAGE_ERROR: {len(acked)} batches acknowledged, errors {errors}',
                 storage_errors >= 3 and len(acked) > 20, f'errors {errors}')
        tk.check('only KAFKA_STORAGE_ERROR answers', set(errors) == {STORAGE_ERROR}, f'errors {errors}')
    with open(STATE, 'w') as f:
        json.dump({'acked': acked}, f)


def read_all(c, topic, start):
    out, off = {}, start
    end = k.list_offsets(c, topic, 0, -1)['offset']
    while off < end:
        p = k.fetch(c, topic, 0, off, partition_max_bytes=4 << 20)['responses'][0]['partitions'][0]
        if p['error_code']:
            raise RuntimeError(f'Fetch {topic} at {off}: error {p["error_code"]}')
        recs = k.records_of(p)
        if not recs:
            break
        for r in recs:
            out[r['offset']] = r['value']
        off = recs[-1]['offset'] + 1
    return out, end


def check_acked(c, acked, label):
    got, end = read_all(c, 'main', 0)
    missing = bad = 0
    for base, seq in acked:
        for i in range(RECORDS_PER_BATCH):
            v = got.get(base + i)
            if v is None:
                missing += 1
            elif v != value(seq, i):
                bad += 1
    n = len(acked) * RECORDS_PER_BATCH
    tk.eq(f'{label}: every acknowledged record ({n}) read back at its offset with its content',
          (0, 0), (missing, bad))
    return end


def verify(topics=('main', 'filler', 'filler2', '__consumer_offsets')):
    with open(STATE) as f:
        acked = json.load(f)['acked']
    with k.Conn(B, timeout=30.0) as c:
        md = k.metadata(c, list(topics), allow_auto=False)
        errs = {t['name']: (t['error_code'], sorted({p['error_code'] for p in t['partitions']})) for t in md['topics']}
        tk.eq(f'after the restart: {", ".join(topics)} served (topic and partition errors)',
              {t: (0, [0]) for t in topics}, errs)
        check_acked(c, acked, 'after the restart')


def produce_after_freeing(c, acked, seq, label):
    """20 acks=-1 batches to main, retried while the freed files are still being unlinked."""
    ok, deadline, errors = 0, time.monotonic() + 20, {}
    while ok < 20 and time.monotonic() < deadline:
        r = k.produce(c, 'main', 0, batch(seq), acks=-1)
        if r['error_code'] == 0:
            acked.append([r['base_offset'], seq])
            ok += 1
            seq += 1
        else:
            errors[r['error_code']] = errors.get(r['error_code'], 0) + 1
            time.sleep(0.2)  # the freed files are unlinked by the housekeeping thread
    tk.eq(f'{label}: 20 more batches acknowledged (errors meanwhile {errors})', 20, ok)
    return seq


def free():
    with open(STATE) as f:
        acked = json.load(f)['acked']
    with k.Conn(B, timeout=30.0) as c:
        r = c.request('DeleteRecords', 2, {'topics': [{'name': 'filler', 'partitions': [
            {'partition_index': 0, 'offset': -1}]}], 'timeout_ms': 30000})
        p = r['topics'][0]['partitions'][0]
        hwm = k.list_offsets(c, 'filler', 0, -1)['offset']
        tk.eq('DeleteRecords of the filler on the full disk: no error, low watermark = high watermark',
              (0, hwm), (p['error_code'], p['low_watermark']))
        seq = produce_after_freeing(c, acked, 10000, 'after DeleteRecords')
        # Full again: then DeleteTopics of filler2 frees space.
        storage_errors, refill = 0, 0
        while storage_errors == 0 and refill < 2000:
            r = k.produce(c, 'main', 0, batch(seq), acks=-1)
            if r['error_code'] == 0:
                acked.append([r['base_offset'], seq])
                refill += 1
                seq += 1
            else:
                storage_errors += r['error_code'] == STORAGE_ERROR
        tk.check(f'main fills the disk again ({refill} batches, then KAFKA_STORAGE_ERROR)', storage_errors == 1)
        r = c.request('DeleteTopics', 1, {'topic_names': ['filler2'], 'timeout_ms': 30000})
        tk.eq('DeleteTopics of filler2 on the full disk', [('filler2', 0)],
              [(t['name'], t['error_code']) for t in r['responses']])
        produce_after_freeing(c, acked, seq, 'after DeleteTopics')
        check_acked(c, acked, 'after freeing space')
    with open(STATE, 'w') as f:
        json.dump({'acked': acked}, f)


if __name__ == '__main__':
    tk.run(sys.argv[1], {'fill': fill, 'verify': verify, 'free': free,
                         'verify_end': lambda: verify(('main', 'filler', '__consumer_offsets'))}[sys.argv[1]])
    tk.finish()
