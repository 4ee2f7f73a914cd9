#!/usr/bin/env python3
"""txn/admin.py STEP: the transaction admin APIs on one node (issue #21 slice A), raw requests, with BROKER
from the environment (run_py).

STEP "markers": WriteTxnMarkers (27, v1-v2; server/handlers/write_txn_markers.c) as a partition leader answers
it: ApiVersions lists 27 at 1-2; unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3); a producer id
below 0: CORRUPT_MESSAGE (2); a producer epoch below the partition's entry: INVALID_PRODUCER_EPOCH (47); a
coordinator epoch below the entry's: TRANSACTION_COORDINATOR_FENCED (52); v2's TransactionVersion 2 (KIP-1228)
wants an epoch above the data's (at it: INVALID_PRODUCER_EPOCH; the same epoch again once closed: NONE, a retry,
KAFKA-19999), and EndTxn v5's own markers land the same way; an ABORT for an open transaction
(raw InitProducerId, AddPartitionsToTxn, Produce) closes it on the partition: the LSO reaches the high
watermark and DescribeProducers shows no open transaction and the marker's coordinator epoch; several markers
and topics in one request are answered in request order, with the producer ids, a partition named twice
too; a marker on __consumer_offsets goes to the group coordinator (NOT_LEADER_OR_FOLLOWER while it loads).
STEP "describe": DescribeTransactions (65) and ListTransactions (66, v0-v1; server/handlers/txn_admin.c) from
the coordinator's state: an open transaction (its state, producer, timeout, partitions), an Empty one, an
unknown id (TRANSACTIONAL_ID_NOT_FOUND), an empty id (INVALID_REQUEST); ListTransactions' state filter (unknown
names echoed), producer id filter and v1's DurationFilter; DescribeProducers shows the open transaction's start
offset. Leaves transaction tx-hang open at offset 0 of wth-0 with a batch an hour old (kafka-transactions.sh).
STEP "stable": wth-0's LSO equals its high watermark, 2 (after kafka-transactions.sh abort).
STEP "settings" (a broker with transaction.max.timeout.ms=60000, transactional.id.expiration.ms=1500,
transaction.remove.expired.transaction.cleanup.interval.ms=200): InitProducerId asking for 60001 ms gets
INVALID_TRANSACTION_TIMEOUT (50), 60000 ms is taken; an idle Empty transactional id is gone (DescribeTransactions:
TRANSACTIONAL_ID_NOT_FOUND) within a few seconds, as Kafka's expiry removes it.
"""
import os
import sys
import time

import kafka_raw as kr
import testkit as tk

BROKER = os.environ['BROKER']
TOPIC = 'wtm'
HANG = 'wth'  # the describe step's topic: tx-hang's open transaction at offset 0 of partition 0


def init_pid(c, txn_id, version=4):
    """FindCoordinator (key type 1: creates __transaction_state on first use), then InitProducerId, retrying
    COORDINATOR_LOAD_IN_PROGRESS / CONCURRENT_TRANSACTIONS for up to 10 s."""
    c.request('FindCoordinator', 3, {'key': txn_id, 'key_type': 1})
    end = time.time() + 10
    while True:
        r = c.request('InitProducerId', version, {'transactional_id': txn_id, 'transaction_timeout_ms': 60000})
        if r['error_code'] not in (14, 51) or time.time() > end:
            return r
        time.sleep(0.1)


def offsets(c, topic, partition):
    """(high watermark, last stable offset) of topic-partition."""
    out = []
    for iso in (0, 1):
        r = c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': iso, 'topics': [
            {'name': topic, 'partitions': [{'partition_index': partition, 'timestamp': -1}]}]})
        out.append(r['topics'][0]['partitions'][0]['offset'])
    return tuple(out)


def wait_offsets(c, topic, partition, want, timeout=10):
    """(high watermark, LSO) once they are `want`, or as they stand after `timeout` s."""
    end = time.time() + timeout
    while True:
        got = offsets(c, topic, partition)
        if got == want or time.time() > end:
            return got
        time.sleep(0.05)


def wait_stable(c, topic, partition, timeout=10):
    end = time.time() + timeout
    while True:
        hw, lso = offsets(c, topic, partition)
        if hw == lso or time.time() > end:
            return hw, lso
        time.sleep(0.05)


def markers(c, entries, version=1, tv=0):
    """WriteTxnMarkers with entries [(pid, epoch, commit, coordinator_epoch, {topic: [partitions]})] (v2: each
    with TransactionVersion tv); returns [(pid, [(topic, partition, error)])] in the response's order."""
    r = c.request('WriteTxnMarkers', version, {'markers': [
        {'producer_id': pid, 'producer_epoch': ep, 'transaction_result': commit, 'coordinator_epoch': ce,
         'topics': [{'name': t, 'partition_indexes': ps} for t, ps in tps.items()], 'transaction_version': tv}
        for pid, ep, commit, ce, tps in entries]})
    return [(m['producer_id'], [(t['name'], p['partition_index'], p['error_code']) for t in m['topics']
                                for p in t['partitions']]) for m in r['markers']]


def marker_err(c, pid, ep, ce, topic=TOPIC, partition=0, commit=False, version=1, tv=0):
    return markers(c, [(pid, ep, commit, ce, {topic: [partition]})], version, tv)[0][1][0][2]


def producers(c, topic, partition):
    r = c.request('DescribeProducers', 0, {'topics': [{'name': topic, 'partition_indexes': [partition]}]})
    p = r['topics'][0]['partitions'][0]
    return {x['producer_id']: x for x in p['active_producers']}


def txn_batch(pid, epoch, seq, value, ts=None):
    return kr.build_batch([(None, value)], attributes_extra=0x10, producer_id=pid, producer_epoch=epoch,
                          base_sequence=seq, base_timestamp=ts)


def open_txn(c, txn_id, topic, partition, ts=None):
    """A transaction opened by raw requests: InitProducerId, AddPartitionsToTxn v3, one transactional batch.
    Returns (producer id, epoch, the batch's offset)."""
    r = init_pid(c, txn_id)
    pid, ep = r['producer_id'], r['producer_epoch']
    r = c.request('AddPartitionsToTxn', 3, {
        'v3_and_below_transactional_id': txn_id, 'v3_and_below_producer_id': pid, 'v3_and_below_producer_epoch': ep,
        'v3_and_below_topics': [{'name': topic, 'partitions': [partition]}]})
    assert r['results_by_topic_v3_and_below'][0]['results_by_partition'][0]['partition_error_code'] == 0, r
    p = kr.produce(c, topic, partition, txn_batch(pid, ep, 0, b'open', ts), transactional_id=txn_id)
    assert p['error_code'] == 0, p
    return pid, ep, p['base_offset']


def step_markers():
    with kr.Conn(BROKER) as c:
        rows = {a['api_key']: (a['min_version'], a['max_version']) for a in kr.api_versions(c)['api_keys']}
        tk.eq('ApiVersions lists WriteTxnMarkers (27) at 1-2', (1, 2), rows.get(27))
        tk.eq('topic created', 0, kr.create_topic(c, TOPIC, partitions=2)['error_code'])
        tk.eq('an unknown topic: UNKNOWN_TOPIC_OR_PARTITION', 3, marker_err(c, 1, 0, 0, topic='no-such'))
        tk.eq('an unknown partition: UNKNOWN_TOPIC_OR_PARTITION', 3, marker_err(c, 1, 0, 0, partition=7))
        tk.eq('a producer id of -1: CORRUPT_MESSAGE', 2, marker_err(c, -1, 0, 0))
        tk.eq('a producer epoch of -1: CORRUPT_MESSAGE', 2, marker_err(c, 5, -1, 0))
        # an idempotent producer at epoch 5 on wtm-1 (raw: a new producer id takes any epoch at sequence 0)
        q = c.request('InitProducerId', 4, {'transactional_id': None, 'transaction_timeout_ms': 60000})
        qid = q['producer_id']
        b = kr.build_batch([(None, b'idem')], producer_id=qid, producer_epoch=5, base_sequence=0)
        tk.eq('an idempotent batch at epoch 5', 0, kr.produce(c, TOPIC, 1, b)['error_code'])
        tk.eq('a marker at epoch 4 (below the entry): INVALID_PRODUCER_EPOCH', 47, marker_err(c, qid, 4, 0, partition=1))
        tk.eq('a marker at epoch 5, coordinator epoch 100: NONE', 0, marker_err(c, qid, 5, 100, partition=1))
        tk.eq('then coordinator epoch 99: TRANSACTION_COORDINATOR_FENCED', 52, marker_err(c, qid, 5, 99, partition=1))
        tk.eq('then coordinator epoch 100 again (v2): NONE', 0, marker_err(c, qid, 5, 100, partition=1, version=2))
        got = markers(c, [(qid, 5, False, 100, {TOPIC: [1, 1]}), (qid + 1000, 0, False, 0, {TOPIC: [1]})])
        tk.eq('one partition named twice in a marker and again in another marker: each answered',
              [(qid, [(TOPIC, 1, 0), (TOPIC, 1, 0)]), (qid + 1000, [(TOPIC, 1, 0)])], got)
        r = c.request('FindCoordinator', 3, {'key': 'g-wtm', 'key_type': 0})  # makes __consumer_offsets
        tk.eq('FindCoordinator for a group (makes __consumer_offsets)', 0, r['error_code'])
        end, first, err = time.time() + 10, None, None
        while err != 0 and time.time() < end:  # NOT_LEADER_OR_FOLLOWER while the group coordinator loads
            err = marker_err(c, qid, 5, 100, topic='__consumer_offsets', partition=0, commit=True)
            first = err if first is None else first
            time.sleep(0.05 if err else 0)
        tk.check('a marker on __consumer_offsets-0 (the group coordinator\'s): NONE (NOT_LEADER_OR_FOLLOWER while '
                 'it loads)', err == 0 and first in (0, 6), (first, err))
        # a transaction opened by raw requests, aborted by a raw marker
        pid, ep, off = open_txn(c, 'tx-wtm', TOPIC, 0)
        hw, lso = offsets(c, TOPIC, 0)
        tk.eq('the open transaction holds the LSO at its first offset', (off + 1, off), (hw, lso))
        st = producers(c, TOPIC, 0).get(pid, {})
        tk.eq('DescribeProducers: the open transaction starts at its batch', off, st.get('current_txn_start_offset'))
        got = markers(c, [(pid, ep, False, 0, {TOPIC: [0]}), (qid, 5, True, 100, {TOPIC: [1], 'no-such': [0]})])
        tk.eq('two markers in one request: answered in order, with the producer ids',
              [(pid, [(TOPIC, 0, 0)]), (qid, [(TOPIC, 1, 0), ('no-such', 0, 3)])], got)
        tk.eq('after the ABORT marker the LSO reaches the high watermark (record + marker)', (off + 2, off + 2),
              wait_stable(c, TOPIC, 0))
        st = producers(c, TOPIC, 0).get(pid, {})
        tk.eq('DescribeProducers: no open transaction, the marker\'s coordinator epoch',
              (-1, 0), (st.get('current_txn_start_offset'), st.get('coordinator_epoch')))
        r = c.request('EndTxn', 3, {'transactional_id': 'tx-wtm', 'producer_id': pid, 'producer_epoch': ep,
                                    'committed': False})
        tk.eq('the coordinator still ends its transaction (EndTxn abort)', 0, r['error_code'])
        tk.eq('its ABORT marker follows (coordinator epoch 1, this run\'s): LSO = HW = record + 2 markers',
              (off + 3, off + 3), wait_offsets(c, TOPIC, 0, (off + 3, off + 3)))
        tk.eq('DescribeProducers: the coordinator\'s epoch', 1, producers(c, TOPIC, 0).get(pid, {}).get('coordinator_epoch'))
        # WriteTxnMarkers v2's TransactionVersion (KIP-1228): a version 2 marker must be above the data's epoch
        pid, ep, off = open_txn(c, 'tx-wtm2', TOPIC, 1)
        tk.eq('v2, TransactionVersion 2, at the data\'s epoch: INVALID_PRODUCER_EPOCH (still open)',
              (47, off), (marker_err(c, pid, ep, 1, partition=1, version=2, tv=2), offsets(c, TOPIC, 1)[1]))
        tk.eq('v2, TransactionVersion 2, at the bumped epoch: NONE, the LSO reaches the high watermark',
              (0, (off + 2, off + 2)), (marker_err(c, pid, ep + 1, 1, partition=1, version=2, tv=2),
                                        wait_stable(c, TOPIC, 1)))
        tk.eq('v2, TransactionVersion 2, at the bumped epoch again, nothing open: NONE (a retry, KAFKA-19999)', 0,
              marker_err(c, pid, ep + 1, 1, partition=1, version=2, tv=2))
        tk.eq('v2, TransactionVersion 2, at the old epoch now: INVALID_PRODUCER_EPOCH', 47,
              marker_err(c, pid, ep, 1, partition=1, version=2, tv=2))
        r = c.request('EndTxn', 5, {'transactional_id': 'tx-wtm2', 'producer_id': pid, 'producer_epoch': ep,
                                    'committed': False})
        tk.eq('EndTxn v5 abort: the coordinator\'s version 2 marker at the bumped epoch lands (a retry here)',
              (0, ep + 1, (off + 4, off + 4)), (r['error_code'], r['producer_epoch'],
                                                wait_offsets(c, TOPIC, 1, (off + 4, off + 4))))

def step_stable():
    with kr.Conn(BROKER) as c:
        hw, lso = wait_stable(c, HANG, 0)
        tk.eq('%s-0: the LSO reached the high watermark (record + marker)' % HANG, (2, 2), (hw, lso))


def describe(c, ids):
    r = c.request('DescribeTransactions', 0, {'transactional_ids': ids})
    return {t['transactional_id']: t for t in r['transaction_states']}


def listed(c, version=1, states=(), pids=(), duration=-1):
    """ListTransactions: (error, unknown state filters, {transactional id: (producer id, state)})."""
    values = {'state_filters': list(states), 'producer_id_filters': list(pids)}
    if version >= 1:
        values['duration_filter'] = duration
    r = c.request('ListTransactions', version, values)
    return (r['error_code'], r['unknown_state_filters'],
            {t['transactional_id']: (t['producer_id'], t['transaction_state']) for t in r['transaction_states']})


def step_describe():
    """DescribeTransactions and ListTransactions from the coordinator's state; leaves 'tx-hang' open on wtm-1
    with a batch timestamped an hour ago (find-hanging's age) for run.sh's kafka-transactions.sh part."""
    with kr.Conn(BROKER) as c:
        rows = {a['api_key']: (a['min_version'], a['max_version']) for a in kr.api_versions(c)['api_keys']}
        tk.eq('ApiVersions lists DescribeTransactions (65) 0-0, ListTransactions (66) 0-1',
              ((0, 0), (0, 1)), (rows.get(65), rows.get(66)))
        tk.eq('topic %s created' % HANG, 0, kr.create_topic(c, HANG, partitions=1)['error_code'])
        old = int(time.time() * 1000) - 3600 * 1000
        pid, ep, off = open_txn(c, 'tx-hang', HANG, 0, ts=old)
        r = init_pid(c, 'tx-empty')
        epid = r['producer_id']
        d = describe(c, ['tx-hang', 'tx-empty', 'tx-none', ''])
        h = d['tx-hang']
        tk.eq('describe an open transaction: NONE, Ongoing, its producer, timeout and partition',
              (0, 'Ongoing', pid, ep, 60000, [{'topic': HANG, 'partitions': [0]}]),
              (h['error_code'], h['transaction_state'], h['producer_id'], h['producer_epoch'],
               h['transaction_timeout_ms'], h['topics']))
        tk.check('its start time is now (the coordinator\'s clock, not the batch\'s)',
                 abs(h['transaction_start_time_ms'] - time.time() * 1000) < 60000, h['transaction_start_time_ms'])
        e = d['tx-empty']
        tk.eq('describe a transactional id after InitProducerId: Empty, no partitions',
              (0, 'Empty', epid, []), (e['error_code'], e['transaction_state'], e['producer_id'], e['topics']))
        tk.eq('describe an unknown id: TRANSACTIONAL_ID_NOT_FOUND (105)', 105, d['tx-none']['error_code'])
        tk.eq('describe an empty id: INVALID_REQUEST (42)', 42, d['']['error_code'])
        err, unknown, ts = listed(c)
        tk.check('ListTransactions v1 lists both (and the earlier ones)', err == 0 and unknown == [] and
                 ts.get('tx-hang') == (pid, 'Ongoing') and ts.get('tx-empty') == (epid, 'Empty'), (err, ts))
        err, unknown, ts = listed(c, version=0, states=['Ongoing', 'Bogus'])
        tk.eq('v0 state filter Ongoing (+ an unknown name, echoed): tx-hang only',
              (0, ['Bogus'], {'tx-hang': (pid, 'Ongoing')}), (err, unknown, ts))
        tk.eq('state filter with only unknown names: nothing', (0, ['Nope'], {}), listed(c, states=['Nope']))
        tk.eq('producer id filter', {'tx-empty': (epid, 'Empty')}, listed(c, pids=[epid])[2])
        tk.eq('producer id filter, unknown id: nothing', {}, listed(c, pids=[987654321])[2])
        ts = listed(c, states=['Ongoing'], duration=3600 * 1000)[2]
        tk.eq('DurationFilter 1 h: the transaction started now is left out', {}, ts)
        time.sleep(0.3)
        ts = listed(c, states=['Ongoing'], duration=100)[2]
        tk.eq('DurationFilter 100 ms, 300 ms later: listed', {'tx-hang': (pid, 'Ongoing')}, ts)
        st = producers(c, HANG, 0).get(pid, {})
        tk.eq('DescribeProducers: the open transaction\'s start offset, its batch\'s timestamp, no marker yet',
              (off, old, -1), (st.get('current_txn_start_offset'), st.get('last_timestamp'),
                               st.get('coordinator_epoch')))


def step_settings():
    with kr.Conn(BROKER) as c:
        c.request('FindCoordinator', 3, {'key': 'tx-set', 'key_type': 1})
        r = init_pid(c, 'tx-set')
        tk.eq('InitProducerId at transaction.max.timeout.ms (60000): taken', 0, r['error_code'])
        r = c.request('InitProducerId', 4, {'transactional_id': 'tx-set2', 'transaction_timeout_ms': 60001})
        tk.eq('InitProducerId above transaction.max.timeout.ms: INVALID_TRANSACTION_TIMEOUT (50)', 50,
              r['error_code'])
        tk.eq('tx-set is described (Empty) at first', (0, 'Empty'),
              (describe(c, ['tx-set'])['tx-set']['error_code'], describe(c, ['tx-set'])['tx-set']['transaction_state']))
        end = time.time() + 15
        while describe(c, ['tx-set'])['tx-set']['error_code'] == 0 and time.time() < end:
            time.sleep(0.2)
        tk.eq('an idle Empty transactional id expires (transactional.id.expiration.ms 1500): TRANSACTIONAL_ID_NOT_FOUND',
              105, describe(c, ['tx-set'])['tx-set']['error_code'])


if __name__ == '__main__':
    tk.run(sys.argv[1], {'markers': step_markers, 'describe': step_describe, 'stable': step_stable,
                         'settings': step_settings}[sys.argv[1]])
    tk.finish()
