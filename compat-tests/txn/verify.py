#!/usr/bin/env python3
"""txn/verify.py STEP: KIP-890 part 1's verification and the single-node refusal rules (server/txns_verify.c,
storage/producer_state.c), with BROKER from the environment (run_py); every step on its own fresh broker
(txn/run.sh).

STEP "verify" (transaction.partition.verification.enable at its default, true; run before anything made
__transaction_state): a transactional Produce while no transaction coordinator runs is NOT_ENOUGH_REPLICAS with
Kafka's "Underlying error: COORDINATOR_NOT_AVAILABLE" message, a TxnOffsetCommit COORDINATOR_NOT_AVAILABLE; a
transactional batch for a partition never added is INVALID_TXN_STATE "Partition was not added to the
transaction" (v9) / TRANSACTION_ABORTABLE (v11, no message) and leaves no open transaction (DescribeProducers
lists nobody, LSO = HW); an unknown transactional id or a wrong producer id is INVALID_PRODUCER_ID_MAPPING; an
older epoch INVALID_PRODUCER_EPOCH; a non-transactional batch (idempotent, with or without the transactional
id) of a producer with an open transaction on the partition is INVALID_TXN_STATE and appends nothing;
TxnOffsetCommit before AddOffsetsToTxn is INVALID_TXN_STATE (v3) / TRANSACTION_ABORTABLE (v4) and writes
nothing, with a fenced epoch INVALID_PRODUCER_EPOCH, after AddOffsetsToTxn NONE.
STEP "noverify" (a broker started with transaction.partition.verification.enable=false): a transactional batch
for a partition never added is appended (and holds the LSO: Kafka's hanging transaction), TxnOffsetCommit
before AddOffsetsToTxn is taken; the setting is dynamic: set to true through IncrementalAlterConfigs (cluster
default) the next such batch is INVALID_TXN_STATE, while a batch (and a TxnOffsetCommit) of the producer whose
transaction the partition's log holds open is still taken unasked (UnifiedLog.hasOngoingTransaction).
STEP "expire" (producer.id.expiration.ms=1500, checked every 100 ms): an idempotent producer silent past the
expiration is dropped, a producer with an open transaction is kept (its transaction still commits, LSO = HW).
STEP "compact" (log.cleaner.backoff.ms=100): a compacted topic with committed and aborted transactions (an
aborted record on a committed key among them) is cleaned; then a read_committed read from offset 0 gives
exactly the committed records, a read_uncommitted one no aborted data batch.
"""
import os
import sys
import time

import kafka_raw as kr
import testkit as tk

F = kr.field
# Schemas kafka_raw does not carry (clients/src/main/resources/common/message/*.json), as offsets.py adds them.
kr.API_KEYS.setdefault('TxnOffsetCommit', 28)
kr.SCHEMAS.setdefault('TxnOffsetCommit', (3, [
    F('transactional_id', 'string', '0+'), F('group_id', 'string', '0+'), F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'), F('generation_id', 'int32', '3+', default=-1),
    F('member_id', 'string', '3+'), F('group_instance_id', 'string', '3+', nullable='3+'),
    F('topics', [
        F('name', 'string', '0+'),
        F('partitions', [F('partition_index', 'int32', '0+'), F('committed_offset', 'int64', '0+'),
                         F('committed_leader_epoch', 'int32', '2+', default=-1),
                         F('committed_metadata', 'string', '0+', nullable='0+')], '0+'),
    ], '0+'),
], [
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', [
        F('name', 'string', '0+'),
        F('partitions', [F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+')], '0+'),
    ], '0+'),
]))
kr.API_KEYS.setdefault('AddOffsetsToTxn', 25)
kr.SCHEMAS.setdefault('AddOffsetsToTxn', (3, [
    F('transactional_id', 'string', '0+'), F('producer_id', 'int64', '0+'), F('producer_epoch', 'int16', '0+'),
    F('group_id', 'string', '0+'),
], [F('throttle_time_ms', 'int32', '0+'), F('error_code', 'int16', '0+')]))
kr.API_KEYS.setdefault('DescribeProducers', 61)
kr.SCHEMAS.setdefault('DescribeProducers', (0, [
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

BROKER = os.environ['BROKER']
TOPIC = 'tv'
NOT_ADDED = 'Partition was not added to the transaction'
UNVERIFIED = 'Unable to verify the partition has been added to the transaction. Underlying error: '


def init_pid(c, txn_id, version=4):
    """InitProducerId (txn_id None: idempotent), retrying the retriable answers for up to 10 s; for a
    transactional id FindCoordinator first (it makes __transaction_state)."""
    end = time.time() + 10
    while txn_id is not None and time.time() < end:
        if c.request('FindCoordinator', 3, {'key': txn_id, 'key_type': 1})['error_code'] == 0:
            break
        time.sleep(0.1)
    while True:
        r = c.request('InitProducerId', version, {'transactional_id': txn_id, 'transaction_timeout_ms': 60000})
        if r['error_code'] not in (14, 15, 51) or time.time() > end:
            return r['error_code'], r['producer_id'], r['producer_epoch']
        time.sleep(0.1)


def batch(pid, epoch, seq, value, txn=True):
    return kr.build_batch([(None, value)], attributes_extra=0x10 if txn else 0, producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq)


def produce(c, txn_id, pid, epoch, seq, partition=0, version=9, txn=True, topic=TOPIC):
    """(error code, error message) of one Produce of a one-record batch."""
    r = kr.produce(c, topic, partition, batch(pid, epoch, seq, b'v%d' % seq, txn), version=version,
                   transactional_id=txn_id)
    return r['error_code'], r.get('error_message')


def offsets(c, partition, topic=TOPIC):
    """(high watermark, last stable offset)."""
    out = []
    for iso in (0, 1):
        r = c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': iso, 'topics': [
            {'name': topic, 'partitions': [{'partition_index': partition, 'timestamp': -1}]}]})
        out.append(r['topics'][0]['partitions'][0]['offset'])
    return tuple(out)


def wait_stable(c, partition, timeout=10, topic=TOPIC):
    end = time.time() + timeout
    while True:
        hw, lso = offsets(c, partition, topic=topic)
        if hw == lso or time.time() > end:
            return hw, lso
        time.sleep(0.05)


def producers(c, partition, topic=TOPIC):
    """DescribeProducers: {producer id: current_txn_start_offset}."""
    r = c.request('DescribeProducers', 0, {'topics': [{'name': topic, 'partition_indexes': [partition]}]})
    p = r['topics'][0]['partitions'][0]
    return {a['producer_id']: a['current_txn_start_offset'] for a in p['active_producers']}


def add(c, txn_id, pid, epoch, partition, topic=TOPIC):
    r = c.request('AddPartitionsToTxn', 3, {
        'v3_and_below_transactional_id': txn_id, 'v3_and_below_producer_id': pid,
        'v3_and_below_producer_epoch': epoch, 'v3_and_below_topics': [{'name': topic, 'partitions': [partition]}]})
    return r['results_by_topic_v3_and_below'][0]['results_by_partition'][0]['partition_error_code']


def add_offsets(c, txn_id, pid, epoch, group):
    return c.request('AddOffsetsToTxn', 3, {'transactional_id': txn_id, 'producer_id': pid,
                                            'producer_epoch': epoch, 'group_id': group})['error_code']


def end_txn(c, txn_id, pid, epoch, commit):
    return c.request('EndTxn', 3, {'transactional_id': txn_id, 'producer_id': pid, 'producer_epoch': epoch,
                                   'committed': commit})['error_code']


def txn_commit(c, txn_id, pid, epoch, group, version=3, offset=5, topic=TOPIC):
    """TxnOffsetCommit of <topic>-0 at `offset`: the partition's error code."""
    r = c.request('TxnOffsetCommit', version, {
        'transactional_id': txn_id, 'group_id': group, 'producer_id': pid, 'producer_epoch': epoch,
        'generation_id': -1, 'member_id': '', 'group_instance_id': None,
        'topics': [{'name': topic, 'partitions': [{'partition_index': 0, 'committed_offset': offset,
                                                   'committed_metadata': ''}]}]})
    return r['topics'][0]['partitions'][0]['error_code']


def committed(c, group, topic=TOPIC):
    """OffsetFetch v7 require_stable of <topic>-0: (error, offset)."""
    r = c.request('OffsetFetch', 7, {'group_id': group, 'topics': [{'name': topic, 'partition_indexes': [0]}],
                                     'require_stable': True})
    p = r['topics'][0]['partitions'][0]
    return p['error_code'], p['committed_offset']


def incremental_alter(c, key, value):
    r = c.request('IncrementalAlterConfigs', 1, {'resources': [{'resource_type': 4, 'resource_name': '', 'configs': [
        {'name': key, 'config_operation': 0, 'value': value}]}], 'validate_only': False})
    return r['responses'][0]['error_code']


def verify():
    with kr.Conn(BROKER) as c:
        tk.eq('topic created', 0, kr.create_topic(c, TOPIC, partitions=2)['error_code'])
        tk.eq('no transaction coordinator yet: Produce NOT_ENOUGH_REPLICAS with the underlying error',
              (19, UNVERIFIED + 'COORDINATOR_NOT_AVAILABLE'), produce(c, 'tx-early', 7000, 0, 0))
        tk.eq('no transaction coordinator yet: TxnOffsetCommit COORDINATOR_NOT_AVAILABLE', 15,
              txn_commit(c, 'tx-early', 7000, 0, 'g-early'))
        err, pid, ep = init_pid(c, 'tx-v')
        tk.check('InitProducerId tx-v', err == 0 and pid >= 0, (err, pid, ep))
        before = offsets(c, 0)
        tk.eq('Produce v9, partition never added: INVALID_TXN_STATE with Kafka\'s message', (48, NOT_ADDED),
              produce(c, 'tx-v', pid, ep, 0))
        tk.eq('Produce v11, partition never added: TRANSACTION_ABORTABLE, no message', (120, None),
              produce(c, 'tx-v', pid, ep, 0, version=11))
        tk.eq('nothing appended, no transaction open: HW and LSO unchanged', before, offsets(c, 0))
        tk.eq('DescribeProducers lists no producer on the partition', {}, producers(c, 0))
        tk.eq('an unknown transactional id: INVALID_PRODUCER_ID_MAPPING', 49,
              produce(c, 'tx-never', pid, ep, 0)[0])
        tk.eq('a producer id not the transactional id\'s: INVALID_PRODUCER_ID_MAPPING', 49,
              produce(c, 'tx-v', pid + 1000, ep, 0)[0])
        # a non-transactional batch of a producer with an open transaction on the partition
        tk.eq('AddPartitionsToTxn tx-v %s-0' % TOPIC, 0, add(c, 'tx-v', pid, ep, 0))
        tk.eq('the transactional batch is appended', (0, None), produce(c, 'tx-v', pid, ep, 0))
        hw, lso = offsets(c, 0)
        tk.eq('the open transaction holds the LSO', (before[0] + 1, before[0]), (hw, lso))
        tk.eq('an idempotent batch of that producer (no transactional id): INVALID_TXN_STATE', 48,
              produce(c, None, pid, ep, 1, txn=False)[0])
        tk.eq('the same with its transactional id: INVALID_TXN_STATE', 48,
              produce(c, 'tx-v', pid, ep, 1, txn=False)[0])
        tk.eq('the refused batches appended nothing', (hw, lso), offsets(c, 0))
        tk.eq('DescribeProducers: the producer\'s transaction starts at its first offset', {pid: before[0]},
              producers(c, 0))
        tk.eq('the next transactional batch (sequence 1) is taken', (0, None), produce(c, 'tx-v', pid, ep, 1))
        # TxnOffsetCommit before AddOffsetsToTxn
        tk.eq('TxnOffsetCommit v3 before AddOffsetsToTxn: INVALID_TXN_STATE', 48, txn_commit(c, 'tx-v', pid, ep, 'g-v'))
        tk.eq('TxnOffsetCommit v4 before AddOffsetsToTxn: TRANSACTION_ABORTABLE', 120,
              txn_commit(c, 'tx-v', pid, ep, 'g-v', version=4))
        tk.eq('nothing written: OffsetFetch require_stable finds no offset, nothing pending', (0, -1),
              committed(c, 'g-v'))
        tk.eq('AddOffsetsToTxn g-v', 0, add_offsets(c, 'tx-v', pid, ep, 'g-v'))
        tk.eq('TxnOffsetCommit v3 at another epoch (PRODUCER_FENCED): INVALID_PRODUCER_EPOCH', 47,
              txn_commit(c, 'tx-v', pid, ep + 1, 'g-v'))
        tk.eq('TxnOffsetCommit v3 after AddOffsetsToTxn: NONE', 0, txn_commit(c, 'tx-v', pid, ep, 'g-v'))
        tk.eq('EndTxn commit', 0, end_txn(c, 'tx-v', pid, ep, True))
        tk.eq('the LSO reaches the HW (2 records, 1 marker)', (hw + 2, hw + 2), wait_stable(c, 0))
        tk.eq('the committed offset is read', (0, 5), committed(c, 'g-v'))
        err, pid2, ep2 = init_pid(c, 'tx-v')
        tk.check('a second InitProducerId bumps the epoch', err == 0 and pid2 == pid and ep2 == ep + 1,
                 (err, pid2, ep2))
        tk.eq('AddPartitionsToTxn at the new epoch', 0, add(c, 'tx-v', pid, ep2, 1))
        tk.eq('a batch at the older epoch: INVALID_PRODUCER_EPOCH', 47, produce(c, 'tx-v', pid, ep, 0, partition=1)[0])
        tk.eq('EndTxn abort', 0, end_txn(c, 'tx-v', pid, ep2, False))


def noverify():
    with kr.Conn(BROKER) as c:
        tk.eq('topic created', 0, kr.create_topic(c, TOPIC, partitions=2)['error_code'])
        err, pid, ep = init_pid(c, 'tx-n')
        tk.check('InitProducerId tx-n', err == 0, err)
        tk.eq('verification off: a batch for a partition never added is appended', (0, None),
              produce(c, 'tx-n', pid, ep, 0))
        tk.eq('it opens a transaction the coordinator does not know: LSO held', (1, 0), offsets(c, 0))
        tk.eq('TxnOffsetCommit before AddOffsetsToTxn is taken', 0, txn_commit(c, 'tx-n', pid, ep, 'g-n'))
        tk.eq('IncrementalAlterConfigs transaction.partition.verification.enable=true (cluster default)', 0,
              incremental_alter(c, 'transaction.partition.verification.enable', 'true'))
        err, pid2, ep2 = init_pid(c, 'tx-n2')
        tk.eq('verification back on: a batch for a partition never added is INVALID_TXN_STATE', (48, NOT_ADDED),
              produce(c, 'tx-n2', pid2, ep2, 0, partition=1))
        tk.eq('and TxnOffsetCommit before AddOffsetsToTxn INVALID_TXN_STATE', 48,
              txn_commit(c, 'tx-n2', pid2, ep2, 'g-n2'))
        # UnifiedLog.hasOngoingTransaction: a partition whose log holds the producer's open transaction at its
        # epoch is not asked about (VerificationGuard.SENTINEL), though the coordinator never added it
        tk.eq('tx-n\'s next batch on the partition its open transaction holds: appended unasked', (0, None),
              produce(c, 'tx-n', pid, ep, 1))
        tk.eq('tx-n\'s next TxnOffsetCommit on g-n (its offsets partition holds the transaction): NONE', 0,
              txn_commit(c, 'tx-n', pid, ep, 'g-n', offset=6))


def expire():
    with kr.Conn(BROKER) as c:
        tk.eq('topic created', 0, kr.create_topic(c, TOPIC, partitions=1)['error_code'])
        err, pid, ep = init_pid(c, 'tx-e')
        tk.eq('AddPartitionsToTxn', 0, add(c, 'tx-e', pid, ep, 0))
        tk.eq('a transactional batch opens a transaction', (0, None), produce(c, 'tx-e', pid, ep, 0))
        err, ipid, iep = init_pid(c, None)
        # the idempotent batch comes after the transactional one: once it expired, the transactional
        # producer has been silent longer than the expiration
        tk.eq('then an idempotent producer\'s batch', (0, None), produce(c, None, ipid, iep, 0, txn=False))
        tk.eq('both producers listed', {pid: 0, ipid: -1}, producers(c, 0))
        end, got = time.time() + 10, None
        while time.time() < end:  # expiration 1500 ms, checked every 100 ms
            got = producers(c, 0)
            if ipid not in got:
                break
            time.sleep(0.1)
        time.sleep(0.3)  # a few more checks pass
        tk.eq('the idempotent producer expired, the one with an open transaction is kept', {pid: 0}, producers(c, 0))
        tk.eq('its transaction commits', 0, end_txn(c, 'tx-e', pid, ep, True))
        tk.eq('the COMMIT marker is written: LSO = HW', (3, 3), wait_stable(c, 0))


def compact():
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = 'tvc'
    with kr.Conn(BROKER) as c:
        tk.eq('compacted topic created', 0, kr.create_topic(c, topic, 1, {
            'cleanup.policy': 'compact', 'segment.bytes': '1000', 'min.cleanable.dirty.ratio': '0.01',
            'delete.retention.ms': '600000'})['error_code'])
    p = Producer({'bootstrap.servers': BROKER, 'transactional.id': 'tx-c', 'linger.ms': 0})
    p.init_transactions(30)
    want = []
    for t in range(6):
        commit = t % 2 == 0
        p.begin_transaction()
        for i in range(4):
            key = 'k%d' % (t * 4 + i)
            if not commit and i == 0:
                key = 'k0'  # an aborted record on a committed key must not shadow it
            val = '%s-%d-%d' % ('c' if commit else 'a', t, i)
            p.produce(topic, val.encode(), key.encode(), partition=0)
            if commit:
                want.append((key, val))
            p.flush(30)  # one batch per record: several segments
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    tk.ok('3 transactions committed, 3 aborted')
    # a record bigger than segment.bytes rolls the segment: everything above is cleanable
    idem = Producer({'bootstrap.servers': BROKER, 'enable.idempotence': True})
    idem.produce(topic, b's' * 1500, b'zz', partition=0)
    idem.flush(30)

    def uncommitted():
        with kr.Conn(BROKER) as c:
            vals, off, hw = [], 0, offsets(c, 0, topic)[0]
            while off < hw:
                r = kr.fetch(c, topic, 0, off)['responses'][0]['partitions'][0]
                bs = [b for b in kr.parse_batches(r['records'] or b'') if not b.get('truncated')]
                if not bs:
                    break
                for b in bs:
                    if not b['attributes'] & 0x20:
                        vals.extend(x['value'].decode() for x in b['records'] if x['key'] != b'zz')
                    off = b['base_offset'] + b['last_offset_delta'] + 1
            return vals

    end, vals = time.time() + 20, None
    while time.time() < end:
        vals = uncommitted()
        if not any(v.startswith('a-') for v in vals):
            break
        time.sleep(0.2)
    tk.eq('read_uncommitted after cleaning: no aborted data batch', [], [v for v in vals if v.startswith('a-')])
    tk.eq('read_uncommitted after cleaning: every committed record', [v for _, v in want],
          [v for v in vals if v.startswith('c-')])
    cons = Consumer({'bootstrap.servers': BROKER, 'group.id': 'g-c', 'isolation.level': 'read_committed',
                     'enable.auto.commit': False})
    cons.assign([TopicPartition(topic, 0, 0)])
    got, end = [], time.time() + 15
    while time.time() < end:
        m = cons.poll(0.2)
        if m is None or m.error():
            continue
        if m.key() == b'zz':
            break
        got.append((m.key().decode(), m.value().decode()))
    cons.close()
    tk.eq('read_committed from offset 0: exactly the committed records', want, got)


if __name__ == '__main__':
    step = sys.argv[1]
    tk.run(step, {'verify': verify, 'noverify': noverify, 'expire': expire, 'compact': compact}[step])
    tk.finish()
