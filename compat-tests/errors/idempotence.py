"""errors/idempotence.py: the broker side of the idempotent producer over raw sockets (BROKER in the
environment). Usage: idempotence.py before|after|expire STATE_FILE (run.sh restarts the broker with SIGTERM
between the phases, the last time with producer.id.expiration.ms=3000; the state file carries producer ids
and offsets across).

Kafka 4.1.1's rules (TransactionCoordinator.handleInitProducerId, ProducerAppendInfo, UnifiedLog):
  InitProducerId null transactional id   -> error 0, a fresh producer id (never seen before, also after a
                                             restart), epoch 0, whatever producer id/epoch the request carries
  InitProducerId "" / "txn"               -> 42 INVALID_REQUEST / 16 NOT_COORDINATOR (no FindCoordinator for
                                             a transaction made __transaction_state yet: Kafka 4.4's answer
                                             too, differential suite), producer id -1, epoch -1
  retry of one of the last 5 batches      -> error 0 with the original base offset, nothing appended (HWM same),
                                             log append time = the original's max timestamp
  sequence gap / new epoch not at 0       -> 45 OUT_OF_ORDER_SEQUENCE_NUMBER, nothing appended
  older epoch                             -> 47 INVALID_PRODUCER_EPOCH
  unknown producer                        -> any first sequence accepted
  DescribeProducers                       -> per partition: producer id, epoch, last sequence, last timestamp,
                                             coordinator epoch -1, current txn start offset -1; unknown topic
                                             or partition 3 UNKNOWN_TOPIC_OR_PARTITION
  producer.id.expiration.ms of silence      -> the producer's state is dropped: any sequence accepted again
  a retry sent on another connection right behind the original -> both answered with the same offset
"""
import json
import sys
import time

import kafka_raw as k
import testkit as tk

F = k.field
B = tk.broker()
PHASE, STATE = sys.argv[1], sys.argv[2]
TOPIC = 'idem-raw'

k.API_KEYS.setdefault('DescribeProducers', 61)
k.SCHEMAS.setdefault('DescribeProducers', (0, [
    F('topics', [F('name', 'string', '0+'), F('partition_indexes', '[int32]', '0+')], '0+'),
], [
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', [
        F('name', 'string', '0+'),
        F('partitions', [
            F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('active_producers', [
                F('producer_id', 'int64', '0+'), F('producer_epoch', 'int32', '0+'),
                F('last_sequence', 'int32', '0+', default=-1), F('last_timestamp', 'int64', '0+', default=-1),
                F('coordinator_epoch', 'int32', '0+'), F('current_txn_start_offset', 'int64', '0+', default=-1),
            ], '0+'),
        ], '0+'),
    ], '0+'),
]))


def init_pid(c, version=4, tid=None, pid=-1, epoch=-1):
    return c.request('InitProducerId', version, {'transactional_id': tid, 'producer_id': pid,
                                                 'producer_epoch': epoch})


def batch(pid, epoch, seq, n, ts, tag):
    return k.build_batch([(b'k', f'{tag}-{i}'.encode()) for i in range(n)], base_timestamp=ts,
                         timestamp_deltas=list(range(n)), producer_id=pid, producer_epoch=epoch,
                         base_sequence=seq)


def describe(c, topic=TOPIC, partitions=(0,)):
    r = c.request('DescribeProducers', 0, {'topics': [{'name': topic, 'partition_indexes': list(partitions)}]})
    return r['topics'][0]['partitions']


def before():
    ranges = k.api_version_ranges(B)
    # Kafka 4.x keeps InitProducerId v6 (KIP-939, two-phase commit) unstable and advertises 0-5.
    tk.eq('ApiVersions advertises InitProducerId 0-5, as Kafka 4.4', (0, 5), ranges.get(22))
    tk.eq('ApiVersions advertises DescribeProducers 0-0', (0, 0), ranges.get(61))
    seen = []
    with k.Conn(B) as c:
        for v in range(6):
            r = init_pid(c, v, pid=12345 if v >= 3 else -1, epoch=7 if v >= 3 else -1)
            tk.eq(f'InitProducerId v{v} null transactional id: error 0, epoch 0', (0, 0),
                  (r['error_code'], r['producer_epoch']))
            seen.append(r['producer_id'])
        tk.check('InitProducerId: every answer a new id, increasing, >= 0 (request pid/epoch ignored)',
                 seen == sorted(set(seen)) and seen[0] >= 0 and 12345 not in seen, str(seen))
        with k.Conn(B) as c6:
            c6.send('InitProducerId', 6, {'transactional_id': None})
            tk.check('InitProducerId v6 (not advertised): connection closed without a response',
                     c6.closed_by_peer(5.0))
        r = init_pid(c, 4, tid='')
        tk.eq('InitProducerId empty transactional id: 42 INVALID_REQUEST, pid -1, epoch -1', (42, -1, -1),
              (r['error_code'], r['producer_id'], r['producer_epoch']))
        r = init_pid(c, 0, tid='txn-1')
        tk.eq('InitProducerId transactional id, no transaction coordinator yet: 16 NOT_COORDINATOR, pid -1',
              (16, -1, -1),
              (r['error_code'], r['producer_id'], r['producer_epoch']))

        k.create_topic(c, TOPIC, 2)
        pid = init_pid(c)['producer_id']
        seen.append(pid)
        ts = int(time.time() * 1000)
        b0 = batch(pid, 0, 0, 3, ts, 'a')
        pr = k.produce(c, TOPIC, 0, b0)
        tk.eq('first idempotent batch: offset 0', (0, 0), (pr['error_code'], pr['base_offset']))
        pr = k.produce(c, TOPIC, 0, b0)
        tk.eq('the same batch again: error 0, the original base offset 0', (0, 0), (pr['error_code'], pr['base_offset']))
        tk.eq('duplicate: log append time = the original max timestamp, log start offset 0', (ts + 2, 0),
              (pr['log_append_time_ms'], pr['log_start_offset']))
        tk.eq('duplicate appended nothing: HWM 3', 3, k.high_watermark(B, TOPIC, 0))
        offs = [0]
        for i in range(1, 6):
            pr = k.produce(c, TOPIC, 0, batch(pid, 0, 3 * i, 3, ts, f'b{i}'))
            offs.append(pr['base_offset'])
        tk.eq('five more batches in sequence: offsets 3..15', [0, 3, 6, 9, 12, 15], offs)
        pr = k.produce(c, TOPIC, 0, batch(pid, 0, 6, 3, ts, 'b2'))
        tk.eq('retry of the 4th-last batch: its original offset 6', (0, 6), (pr['error_code'], pr['base_offset']))
        pr = k.produce(c, TOPIC, 0, batch(pid, 0, 0, 3, ts, 'a'), acks=1)
        tk.eq('retry of the 6th-last batch: 45 OUT_OF_ORDER_SEQUENCE_NUMBER', 45, pr['error_code'])
        pr = k.produce(c, TOPIC, 0, batch(pid, 0, 20, 1, ts, 'gap'))
        tk.eq('sequence gap (20 after 17): 45 OUT_OF_ORDER_SEQUENCE_NUMBER, base offset -1', (45, -1),
              (pr['error_code'], pr['base_offset']))
        pr = k.produce(c, TOPIC, 0, batch(pid, 1, 5, 1, ts, 'e1'))
        tk.eq('new epoch 1 not starting at 0: 45', 45, pr['error_code'])
        tk.eq('refused batches appended nothing: HWM 18', 18, k.high_watermark(B, TOPIC, 0))
        pr = k.produce(c, TOPIC, 0, batch(pid, 1, 0, 2, ts, 'e1'))
        tk.eq('epoch bump to 1 at sequence 0: offset 18', (0, 18), (pr['error_code'], pr['base_offset']))
        pr = k.produce(c, TOPIC, 0, batch(pid, 0, 18, 1, ts, 'old'))
        tk.eq('older epoch 0 after the bump: 47 INVALID_PRODUCER_EPOCH', 47, pr['error_code'])
        other = init_pid(c)['producer_id']
        seen.append(other)
        pr = k.produce(c, TOPIC, 1, batch(other, 0, 1000, 2, ts, 'unknown'))
        tk.eq('a producer unknown to the partition: any first sequence (1000) accepted', (0, 0),
              (pr['error_code'], pr['base_offset']))
        pr = k.produce(c, TOPIC, 1, batch(other, 0, 1002, 1, ts, 'next'), acks=1)
        tk.eq('its next batch (1002), acks=1: offset 2', (0, 2), (pr['error_code'], pr['base_offset']))

        parts = describe(c, TOPIC, (0, 1, 7))
        p0 = parts[0]['active_producers']
        tk.eq('DescribeProducers partition 0: one producer, epoch 1, last sequence 1, coordinator epoch -1, '
              'txn start -1', [(pid, 1, 1, ts + 1, -1, -1)],
              [(a['producer_id'], a['producer_epoch'], a['last_sequence'], a['last_timestamp'],
                a['coordinator_epoch'], a['current_txn_start_offset']) for a in p0])
        tk.eq('DescribeProducers partition 1: the other producer, last sequence 1002', [(other, 1002)],
              [(a['producer_id'], a['last_sequence']) for a in parts[1]['active_producers']])
        tk.eq('DescribeProducers unknown partition 7: 3 UNKNOWN_TOPIC_OR_PARTITION', 3, parts[2]['error_code'])
        tk.eq('DescribeProducers unknown topic: 3', 3, describe(c, 'idem-raw-missing')[0]['error_code'])

        # A retry sent on a second connection right behind the original (acks=-1): both get offset 20. (That
        # the retry's answer waits for the original's fsync needs a held fsync: server/tests/
        # test_produce_idempotence.c; from outside the window is too short to observe.)
        b_last = batch(pid, 1, 2, 4, ts, 'race')
        with k.Conn(B) as c2:
            corr1 = c.send('Produce', 9, {'transactional_id': None, 'acks': -1, 'timeout_ms': 10000, 'topic_data': [
                {'name': TOPIC, 'topic_id': k.ZERO_UUID, 'partition_data': [{'index': 0, 'records': b_last}]}]})
            corr2 = c2.send('Produce', 9, {'transactional_id': None, 'acks': -1, 'timeout_ms': 10000, 'topic_data': [
                {'name': TOPIC, 'topic_id': k.ZERO_UUID, 'partition_data': [{'index': 0, 'records': b_last}]}]})
            r2 = c2.recv('Produce', 9, corr2)[1]['responses'][0]['partition_responses'][0]
            r1 = c.recv('Produce', 9, corr1)[1]['responses'][0]['partition_responses'][0]
        tk.eq('original and concurrent retry on two connections: both offset 20', [(0, 20), (0, 20)],
              [(r1['error_code'], r1['base_offset']), (r2['error_code'], r2['base_offset'])])
        tk.eq('the retry appended nothing: HWM 24', 24, k.high_watermark(B, TOPIC, 0))
    with open(STATE, 'w') as f:
        json.dump({'ids': seen, 'pid': pid, 'ts': ts, 'b_last': b_last.hex()}, f)


def after():
    with open(STATE) as f:
        st = json.load(f)
    with k.Conn(B) as c:
        r = init_pid(c)
        tk.check('after a restart InitProducerId hands out an id above every earlier one',
                 r['error_code'] == 0 and r['producer_id'] > max(st['ids']), f'{r["producer_id"]} vs {max(st["ids"])}')
        pr = k.produce(c, TOPIC, 0, bytes.fromhex(st['b_last']))
        tk.eq('after a restart a retry of the last batch is a duplicate: offset 20', (0, 20),
              (pr['error_code'], pr['base_offset']))
        tk.eq('nothing appended: HWM 24', 24, k.high_watermark(B, TOPIC, 0))
        pr = k.produce(c, TOPIC, 0, batch(st['pid'], 1, 7, 1, st['ts'], 'gap'))
        tk.eq('after a restart a gap is still 45', 45, pr['error_code'])
        pr = k.produce(c, TOPIC, 0, batch(st['pid'], 1, 6, 1, st['ts'], 'next'))
        tk.eq('after a restart the next sequence continues at offset 24', (0, 24), (pr['error_code'], pr['base_offset']))
        p0 = describe(c)[0]['active_producers']
        tk.eq('DescribeProducers after the restart: epoch 1, last sequence 6', [(st['pid'], 1, 6)],
              [(a['producer_id'], a['producer_epoch'], a['last_sequence']) for a in p0])


def expire():
    # The broker runs with producer.id.expiration.ms=3000 and a 200 ms check interval; the producers of the
    # earlier phases carry batch timestamps older than that (Kafka compares the last batch's max timestamp).
    with open(STATE) as f:
        st = json.load(f)
    with k.Conn(B) as c:
        deadline = time.monotonic() + 10
        while describe(c)[0]['active_producers'] and time.monotonic() < deadline:
            time.sleep(0.2)
        tk.eq('producer.id.expiration.ms: the silent producer is dropped (DescribeProducers lists none)', [],
              describe(c)[0]['active_producers'])
        hwm = k.high_watermark(B, TOPIC, 0)
        now = int(time.time() * 1000)
        pr = k.produce(c, TOPIC, 0, batch(st['pid'], 1, 500, 1, now, 'expired'))
        tk.eq('an expired producer is unknown again: sequence 500 accepted at the log end', (0, hwm),
              (pr['error_code'], pr['base_offset']))
        p0 = describe(c)[0]['active_producers']
        tk.eq('a producer that just wrote is not expired: listed with last sequence 500', [(st['pid'], 500)],
              [(a['producer_id'], a['last_sequence']) for a in p0])


tk.run(f'idempotence ({PHASE})', {'before': before, 'after': after, 'expire': expire}[PHASE])
tk.finish()
