"""netaudit/run.py: the write-path workload of netaudit/run.sh. Argument `work` (the workload) or `after`
(after a restart: the log start and end offsets `work` left, and producer ids above every one handed out).
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
B = tk.broker()
DATA = os.path.join(os.environ['BROKER_DIR'], 'data')
STATE = os.path.join(os.environ['BROKER_DIR'], 'netaudit.json')
STORAGE_ERROR = 56
COORDINATOR_LOAD_IN_PROGRESS = 14


def delete_records(c, topic, offsets, timeout_ms=30000):
    resp = c.request('DeleteRecords', 2, {'topics': [{'name': topic, 'partitions': [
        {'partition_index': p, 'offset': o} for p, o in offsets.items()]}], 'timeout_ms': timeout_ms})
    return {p['partition_index']: p for p in resp['topics'][0]['partitions']}


def init_pid(c):
    r = c.request('InitProducerId', 4, {'transactional_id': None, 'transaction_timeout_ms': 60000})
    return r['error_code'], r['producer_id']


def earliest(c, topic, p):
    return k.list_offsets(c, topic, p, -2)['offset']


def work():
    state = {}
    with k.Conn(B, timeout=30.0) as c:
        tk.eq('create topic roll (2 partitions)', 0, k.create_topic(c, 'roll', 2)['error_code'])
        tk.eq('create topic ret (retention.ms 1000)', 0,
              k.create_topic(c, 'ret', 1, {'retention.ms': '1000'})['error_code'])
        ends = {}
        bad = 0
        for i in range(150):
            for p in (0, 1):
                r = k.produce(c, 'roll', p, k.build_batch([(b'k%d' % i, b'%04d' % i * 250)]), acks=-1)
                bad += r['error_code'] != 0
                ends[p] = r['base_offset'] + 1
        tk.eq('300 acks=-1 produces answered without error', 0, bad)
        segs = len([f for f in os.listdir(os.path.join(DATA, 'roll-0')) if f.endswith('.log')])
        tk.check(f'partition 0 rolled many times ({segs} segments)', segs >= 20, f'{segs} segments')
        # DeleteRecords: half-way, then the high watermark (-1).
        r = delete_records(c, 'roll', {0: 75, 1: 40})
        tk.eq('DeleteRecords to 75 / 40: errors', (0, 0), (r[0]['error_code'], r[1]['error_code']))
        tk.eq('DeleteRecords to 75 / 40: low watermarks', (75, 40), (r[0]['low_watermark'], r[1]['low_watermark']))
        tk.eq('ListOffsets earliest after DeleteRecords', (75, 40), (earliest(c, 'roll', 0), earliest(c, 'roll', 1)))
        r = delete_records(c, 'roll', {1: -1}, timeout_ms=0)
        tk.eq('DeleteRecords to the high watermark (-1, timeout 0)', (0, ends[1]),
              (r[1]['error_code'], r[1]['low_watermark']))
        # A checkpoint write that fails: the answer says so and nothing moves.
        blocker = os.path.join(DATA, 'log-start-offset-checkpoint.tmp')
        os.mkdir(blocker)
        r = delete_records(c, 'roll', {0: 100})
        tk.eq('DeleteRecords with the checkpoint unwritable: KAFKA_STORAGE_ERROR, low watermark -1',
              (STORAGE_ERROR, -1), (r[0]['error_code'], r[0]['low_watermark']))
        tk.eq('log start offset unchanged after the failed DeleteRecords', 75, earliest(c, 'roll', 0))
        os.rmdir(blocker)
        r = delete_records(c, 'roll', {0: 100})
        tk.eq('DeleteRecords again once the checkpoint is writable', (0, 100),
              (r[0]['error_code'], r[0]['low_watermark']))
        # Retention (every second here) deletes every segment of `ret`, the active one too (its roll).
        for i in range(20):
            r = k.produce(c, 'ret', 0, k.build_batch([(b'r%d' % i, b'%04d' % i * 250)], base_timestamp=1000 + i),
                          acks=-1)
            bad += r['error_code'] != 0
        tk.eq('20 produces to ret with timestamps long expired', 0, bad)
        ret_end, deadline = 0, time.monotonic() + 10
        while time.monotonic() < deadline:
            ret_end = k.list_offsets(c, 'ret', 0, -1)['offset']
            if earliest(c, 'ret', 0) == ret_end:
                break
            time.sleep(0.2)
        tk.eq('retention emptied ret (log start offset = log end offset, active segment rolled)',
              (ret_end, 20), (earliest(c, 'ret', 0), ret_end))
        # Producer ids: three blocks, saved on the I/O pool.
        ids = []
        errors = 0
        for _ in range(2100):
            e, pid = init_pid(c)
            if e:
                errors += 1
            else:
                ids.append(pid)
        tk.eq('2,100 InitProducerIds without error', 0, errors)
        tk.check('producer ids unique and increasing', all(a < b for a, b in zip(ids, ids[1:])),
                 f'first {ids[:3]} last {ids[-3:]}')
        # The next block's save fails: once the block in use is spent, Kafka's retriable error.
        blocker = os.path.join(DATA, 'producer-id-block.tmp')
        os.mkdir(blocker)
        got, last = None, ids[-1]
        for _ in range(1200):
            e, pid = init_pid(c)
            if e:
                got = e
                break
            last = pid
        tk.eq('InitProducerId when the next block cannot be saved: COORDINATOR_LOAD_IN_PROGRESS',
              COORDINATOR_LOAD_IN_PROGRESS, got)
        os.rmdir(blocker)
        pid, deadline = None, time.monotonic() + 10
        while pid is None and time.monotonic() < deadline:
            e, p = init_pid(c)
            if e == 0:
                pid = p
            else:
                time.sleep(0.06)  # Kafka's 50 ms backoff after a failed block allocation
        tk.check('InitProducerId answers again (a higher id) once the block can be saved',
                 pid is not None and pid > last, f'pid {pid} last {last}')
        state = {'ends': ends, 'starts': {'0': 100, '1': ends[1]}, 'last_pid': max(pid or 0, last)}
    with open(STATE, 'w') as f:
        json.dump(state, f)


def after():
    with open(STATE) as f:
        st = json.load(f)
    with k.Conn(B, timeout=30.0) as c:
        for p in (0, 1):
            tk.eq(f'partition {p}: log start offset kept across the restart', st['starts'][str(p)],
                  earliest(c, 'roll', p))
            tk.eq(f'partition {p}: log end offset kept across the restart', st['ends'][str(p)],
                  k.list_offsets(c, 'roll', p, -1)['offset'])
        e, pid = init_pid(c)
        tk.check('InitProducerId after the restart: above every id handed out', e == 0 and pid > st['last_pid'],
                 f'error {e} pid {pid} last {st["last_pid"]}')


tk.run(sys.argv[1], {'work': work, 'after': after}[sys.argv[1]])
tk.finish()
