#!/usr/bin/env python3
"""txn/transactions.py STEP: transactions served end to end on one node (issue #21; server/txns.c,
server/handlers/txn_apis.c, Produce's KIP-890 verification), with BROKER from the environment (run_py).

STEP "on" (the defaults: transactions are always on): AddPartitionsToTxn (24), AddOffsetsToTxn (25) and EndTxn
(26) are listed in ApiVersions with their served ranges; a
confluent-kafka (librdkafka) transactional producer commits one transaction over 2 partitions and aborts a
second; read_committed sees exactly the committed records, read_uncommitted all four; the last stable
offset equals the high watermark at rest; raw protocol: a transactional Produce for a partition never added
is refused (INVALID_TXN_STATE 48 below v11, TRANSACTION_ABORTABLE 120 from v11) and opens nothing; VerifyOnly
(v4/v5) answers per partition; an added partition is accepted and holds the LSO until EndTxn's markers; a
second InitProducerId fences the first epoch (EndTxn v1: INVALID_PRODUCER_EPOCH 47, v3: PRODUCER_FENCED 90,
Produce: 47); a second confluent producer with the same transactional id fences the first; a partition
deleted before EndTxn counts as done (the transaction completes).
"""
import os
import sys
import time

import kafka_raw as kr
import testkit as tk

BROKER = os.environ['BROKER']
TOPIC = 'txt'


def txn_api_rows(c):
    r = kr.api_versions(c)
    return {a['api_key']: (a['min_version'], a['max_version']) for a in r['api_keys'] if a['api_key'] in (24, 25, 26)}


def init_pid(c, txn_id, version=4):
    """InitProducerId for txn_id, retrying the retriable answers (COORDINATOR_LOAD_IN_PROGRESS,
    CONCURRENT_TRANSACTIONS) for up to 10 s."""
    end = time.time() + 10
    while True:
        r = c.request('InitProducerId', version, {'transactional_id': txn_id, 'transaction_timeout_ms': 60000})
        if r['error_code'] not in (14, 51) or time.time() > end:
            return r
        time.sleep(0.1)


def offsets(c, partition):
    """(high watermark, last stable offset) of TOPIC-partition (ListOffsets latest, isolation 0 and 1)."""
    out = []
    for iso in (0, 1):
        r = c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': iso, 'topics': [
            {'name': TOPIC, 'partitions': [{'partition_index': partition, 'timestamp': -1}]}]})
        out.append(r['topics'][0]['partitions'][0]['offset'])
    return tuple(out)


def wait_stable(c, partition, timeout=10):
    end = time.time() + timeout
    while True:
        hw, lso = offsets(c, partition)
        if hw == lso or time.time() > end:
            return hw, lso
        time.sleep(0.05)


def consume(iso, want):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': BROKER, 'group.id': 'g-' + iso, 'isolation.level': iso,
                  'enable.auto.commit': False})
    c.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
    got, end, quiet = [], time.time() + 15, None
    while time.time() < end:
        m = c.poll(0.2)
        if m is None or m.error():
            if len(got) >= want:
                quiet = quiet or time.time()
                if time.time() - quiet > 1.0:
                    break
            continue
        got.append((m.partition(), m.value().decode()))
    c.close()
    return sorted(got)


def client_transactions():
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': BROKER, 'transactional.id': 'tx-client'})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, b'c0', partition=0)
    p.produce(TOPIC, b'c1', partition=1)
    p.commit_transaction(30)
    tk.ok('init_transactions, produce to 2 partitions, commit_transaction')
    p.begin_transaction()
    p.produce(TOPIC, b'a0', partition=0)
    p.produce(TOPIC, b'a1', partition=1)
    p.flush(30)
    p.abort_transaction(30)
    tk.ok('a second transaction aborted')
    tk.eq('read_committed sees exactly the committed records', [(0, 'c0'), (1, 'c1')],
          consume('read_committed', 2))
    tk.eq('read_uncommitted sees both transactions', [(0, 'a0'), (0, 'c0'), (1, 'a1'), (1, 'c1')],
          consume('read_uncommitted', 4))
    with kr.Conn(BROKER) as c:
        for part in (0, 1):
            tk.eq('partition %d at rest: high watermark 4 (2 records, 2 markers) = last stable offset' % part,
                  (4, 4), wait_stable(c, part))


def raw_batch(pid, epoch, seq, value):
    return kr.build_batch([(None, value)], attributes_extra=0x10, producer_id=pid, producer_epoch=epoch,
                          base_sequence=seq)


def produce_err(c, version, txn_id, pid, epoch, seq, partition=0):
    r = kr.produce(c, TOPIC, partition, raw_batch(pid, epoch, seq, b'raw'), version=version,
                   transactional_id=txn_id)
    return r['error_code']


def end_txn(c, version, txn_id, pid, epoch, commit):
    return c.request('EndTxn', version, {'transactional_id': txn_id, 'producer_id': pid, 'producer_epoch': epoch,
                                         'committed': commit})['error_code']


def verify(c, version, txn_id, pid, epoch, partition=0):
    r = c.request('AddPartitionsToTxn', version, {'transactions': [
        {'transactional_id': txn_id, 'producer_id': pid, 'producer_epoch': epoch, 'verify_only': True,
         'topics': [{'name': TOPIC, 'partitions': [partition]}]}]})
    return r['results_by_transaction'][0]['topic_results'][0]['results_by_partition'][0]['partition_error_code']


def raw_protocol():
    tx = 'tx-raw'
    with kr.Conn(BROKER) as c:
        r = c.request('FindCoordinator', 3, {'key': tx, 'key_type': 1})
        tk.eq('FindCoordinator key type 1 names this broker', (0, 1), (r['error_code'], r['node_id']))
        r = init_pid(c, tx)
        tk.check('InitProducerId v4 with a transactional id: a producer id, epoch 0',
                 r['error_code'] == 0 and r['producer_id'] >= 0 and r['producer_epoch'] == 0, r)
        pid, ep = r['producer_id'], r['producer_epoch']
        before = offsets(c, 0)
        tk.eq('Produce v9 to a partition never added: INVALID_TXN_STATE', 48, produce_err(c, 9, tx, pid, ep, 0))
        tk.eq('Produce v11 to a partition never added: TRANSACTION_ABORTABLE', 120,
              produce_err(c, 11, tx, pid, ep, 0))
        tk.eq('the refused Produce appended nothing and opened no transaction (HW, LSO unchanged)', before,
              offsets(c, 0))
        tk.eq('EndTxn v3 commit with no transaction open: INVALID_TXN_STATE', 48, end_txn(c, 3, tx, pid, ep, True))
        tk.eq('AddPartitionsToTxn v4 VerifyOnly, not added: INVALID_TXN_STATE', 48, verify(c, 4, tx, pid, ep))
        tk.eq('AddPartitionsToTxn v5 VerifyOnly, not added: TRANSACTION_ABORTABLE', 120, verify(c, 5, tx, pid, ep))
        r = c.request('AddPartitionsToTxn', 3, {
            'v3_and_below_transactional_id': tx, 'v3_and_below_producer_id': pid, 'v3_and_below_producer_epoch': ep,
            'v3_and_below_topics': [{'name': TOPIC, 'partitions': [0]}, {'name': 'no-such-topic', 'partitions': [0]}]})
        codes = [(t['name'], x['partition_error_code']) for t in r['results_by_topic_v3_and_below']
                 for x in t['results_by_partition']]
        tk.eq('AddPartitionsToTxn v3 with an unknown topic: UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED',
              [(TOPIC, 55), ('no-such-topic', 3)], codes)
        r = c.request('AddPartitionsToTxn', 3, {
            'v3_and_below_transactional_id': tx, 'v3_and_below_producer_id': pid, 'v3_and_below_producer_epoch': ep,
            'v3_and_below_topics': [{'name': TOPIC, 'partitions': [0]}]})
        tk.eq('AddPartitionsToTxn v3 adds the partition', 0,
              r['results_by_topic_v3_and_below'][0]['results_by_partition'][0]['partition_error_code'])
        tk.eq('AddPartitionsToTxn v5 VerifyOnly, added: NONE', 0, verify(c, 5, tx, pid, ep))
        hw0 = offsets(c, 0)[0]
        tk.eq('Produce v9 of a transactional batch to the added partition: NONE', 0, produce_err(c, 9, tx, pid, ep, 0))
        tk.eq('the open transaction holds the LSO at its first offset', (hw0 + 1, hw0), offsets(c, 0))
        tk.eq('EndTxn v3 abort: NONE', 0, end_txn(c, 3, tx, pid, ep, False))
        tk.eq('after the ABORT marker the LSO reaches the high watermark (record + marker)', (hw0 + 2, hw0 + 2),
              wait_stable(c, 0))
        r = init_pid(c, tx)
        tk.check('a second InitProducerId bumps the epoch (same producer id)',
                 r['error_code'] == 0 and r['producer_id'] == pid and r['producer_epoch'] == ep + 1, r)
        tk.eq('EndTxn v1 at the fenced epoch: INVALID_PRODUCER_EPOCH', 47, end_txn(c, 1, tx, pid, ep, True))
        tk.eq('EndTxn v3 at the fenced epoch: PRODUCER_FENCED', 90, end_txn(c, 3, tx, pid, ep, True))
        tk.eq('Produce v11 at the fenced epoch: INVALID_PRODUCER_EPOCH (never PRODUCER_FENCED)', 47,
              produce_err(c, 11, tx, pid, ep, 1))
        tk.eq('a transactional batch without a transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 53,
              produce_err(c, 9, None, pid, ep + 1, 0))


def client_fenced():
    from confluent_kafka import KafkaException, Producer
    p1 = Producer({'bootstrap.servers': BROKER, 'transactional.id': 'tx-fence'})
    p1.init_transactions(30)
    p1.begin_transaction()
    p1.produce(TOPIC, b'f0', partition=0)
    p1.flush(30)
    p2 = Producer({'bootstrap.servers': BROKER, 'transactional.id': 'tx-fence'})
    p2.init_transactions(30)
    tk.ok('a second producer with the same transactional id initialises')
    try:
        p1.commit_transaction(30)
        tk.fail('the first producer is fenced', 'its commit succeeded')
    except KafkaException as e:
        err = e.args[0]
        tk.check('the first producer is fenced (fatal: %s)' % err.name(), err.fatal(), err)
    p2.begin_transaction()
    p2.produce(TOPIC, b'f1', partition=0)
    p2.commit_transaction(30)
    tk.ok('the second producer commits')
    with kr.Conn(BROKER) as c:
        hw, lso = wait_stable(c, 0)
        tk.eq('at rest the LSO equals the high watermark', hw, lso)


def deleted_partition():
    """A partition deleted before EndTxn counts as done: the transaction completes (the marker on the other
    partition written, the next InitProducerId answered rather than CONCURRENT_TRANSACTIONS for ever)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({'bootstrap.servers': BROKER})
    a.create_topics([NewTopic('txd', 1, 1)])['txd'].result(30)
    tx = 'tx-del'
    with kr.Conn(BROKER) as c:
        r = init_pid(c, tx)
        pid, ep = r['producer_id'], r['producer_epoch']
        r = c.request('AddPartitionsToTxn', 2, {
            'v3_and_below_transactional_id': tx, 'v3_and_below_producer_id': pid, 'v3_and_below_producer_epoch': ep,
            'v3_and_below_topics': [{'name': 'txd', 'partitions': [0]}, {'name': TOPIC, 'partitions': [1]}]})
        tk.eq('AddPartitionsToTxn v2 adds txd-0 and %s-1' % TOPIC, [0, 0],
              [x['partition_error_code'] for t in r['results_by_topic_v3_and_below'] for x in t['results_by_partition']])
        tk.eq('a transactional batch to txd-0', 0,
              kr.produce(c, 'txd', 0, raw_batch(pid, ep, 0, b'd'), transactional_id=tx)['error_code'])
        tk.eq('a transactional batch to %s-1' % TOPIC, 0, produce_err(c, 9, tx, pid, ep, 0, partition=1))
        hw, lso = offsets(c, 1)
        tk.check('the open transaction holds the LSO of %s-1' % TOPIC, lso < hw, (hw, lso))
        a.delete_topics(['txd'])['txd'].result(30)
        tk.eq('EndTxn v3 commit after txd was deleted: NONE', 0, end_txn(c, 3, tx, pid, ep, True))
        tk.eq('the marker on %s-1 is written: LSO = HW' % TOPIC, (hw + 1, hw + 1), wait_stable(c, 1))
        r = init_pid(c, tx)
        tk.check('the transaction completed: InitProducerId answers epoch %d' % (ep + 1),
                 r['error_code'] == 0 and r['producer_epoch'] == ep + 1, r)


def on():
    with kr.Conn(BROKER) as c:
        tk.eq('ApiVersions lists AddPartitionsToTxn 0-5, AddOffsetsToTxn 0-4, EndTxn 0-5',
              {24: (0, 5), 25: (0, 4), 26: (0, 5)}, txn_api_rows(c))
        r = kr.create_topic(c, TOPIC, partitions=2)
        tk.eq('topic created', 0, r['error_code'])
    tk.run('client transactions', client_transactions)
    tk.run('raw protocol', raw_protocol)
    tk.run('client fencing', client_fenced)
    tk.run('deleted partition', deleted_partition)


if __name__ == '__main__':
    tk.run(sys.argv[1], {"on": on}[sys.argv[1]])
    tk.finish()
