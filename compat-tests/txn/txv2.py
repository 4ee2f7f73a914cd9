#!/usr/bin/env python3
"""txn/txv2.py STEP: transaction version 2 (KIP-890 part 2) by raw requests, BROKER from the environment
(run_py), as Kafka 4.x answers them (coordinator/txn.h gr_txn_end_tv, server/txns.h gr_txns_verify_remote).

STEP "v2" (any broker; txn/run.sh runs it with transaction.partition.verification.enable at its default and
off: the implicit add does not depend on it): InitProducerId, then transactional Produce v12 to two
partitions with no AddPartitionsToTxn (the broker adds them: the LSO stays behind), EndTxn v5 commit answers
the same producer id at epoch + 1, the LSO reaches the high watermark and a read_committed Fetch returns the
records; a zombie's Produce at the old epoch (v12 and v9) is INVALID_PRODUCER_EPOCH and appends nothing; the
next transaction at the new epoch is aborted with EndTxn v5 (epoch + 1 again), its retry at the previous
epoch answers NONE with the current epoch, a commit with nothing open is INVALID_TXN_STATE, an abort with
nothing open bumps the epoch; TxnOffsetCommit v5 with no AddOffsetsToTxn is taken (the offsets partition
added) and its commit is visible to OffsetFetch require_stable after EndTxn v5; EndTxn v4 (transaction
version 1) still answers without producer id or epoch.

STEP "hang" (a broker running the timed-out abort pass every 200 ms): KIP-890's hanging transaction, by raw
requests: a Produce sent after its transaction ended (as if delayed past the abort) to the aborted partition
and to one never in the transaction is refused (version 2, after EndTxn v5 abort and after the coordinator's
timeout: INVALID_PRODUCER_EPOCH, the epoch was bumped; version 1 with verification: TRANSACTION_ABORTABLE
for Produce v11, INVALID_TXN_STATE for v9), nothing is appended, the last stable offset equals the high
watermark (ListOffsets read_committed and a read_committed Fetch), DescribeProducers shows no open
transaction, DescribeTransactions shows CompleteAbort with no partition and ListTransactions no Ongoing one.
"""
import os
import sys
import time

import kafka_raw as kr
import testkit as tk
import verify as vf  # its schemas (TxnOffsetCommit, AddOffsetsToTxn) and helpers

BROKER = os.environ['BROKER']
TOPIC = 'tv2'
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, TRANSACTION_ABORTABLE = 47, 48, 120


def end_txn(c, txn_id, pid, epoch, commit, version=5):
    r = c.request('EndTxn', version, {'transactional_id': txn_id, 'producer_id': pid, 'producer_epoch': epoch,
                                      'committed': commit})
    return r['error_code'], r.get('producer_id', -1), r.get('producer_epoch', -1)


def produce(c, txn_id, pid, epoch, seq, partition, version=12):
    return vf.produce(c, txn_id, pid, epoch, seq, partition=partition, version=version, topic=TOPIC)


def offsets(c, partition):
    return vf.offsets(c, partition, topic=TOPIC)


def stable(c, partition, timeout=10):
    return vf.wait_stable(c, partition, timeout=timeout, topic=TOPIC)


def read_committed(c, partition):
    """The data records of a read_committed Fetch from offset 0 (control batches left out)."""
    p = kr.fetch(c, TOPIC, partition, 0, isolation_level=1)['responses'][0]['partitions'][0]
    out = []
    for b in kr.parse_batches(p['records'] or b''):
        if not b.get('truncated') and not b['attributes'] & 0x20:
            out.extend(r['value'] for r in b.get('records', []))
    return out


def retrying(fn, *args, retriable=(51,), timeout=10, **kw):
    """fn's answer, asked again while its error code (first item, or itself) is retriable, as clients do
    (CONCURRENT_TRANSACTIONS while the previous transaction completes)."""
    end = time.time() + timeout
    while True:
        r = fn(*args, **kw)
        code = r[0] if isinstance(r, tuple) else r
        if code not in retriable or time.time() > end:
            return r
        time.sleep(0.05)


def txn_commit(c, txn_id, pid, epoch, group, offset, version=5):
    return vf.txn_commit(c, txn_id, pid, epoch, group, version=version, offset=offset, topic=TOPIC)


def committed(c, group):
    return vf.committed(c, group, topic=TOPIC)


def v2():
    txn = 'tx-v2-%d' % os.getpid()
    with kr.Conn(BROKER) as c:
        err = kr.create_topic(c, TOPIC, partitions=2)['error_code']
        tk.check('topic created', err in (0, 36), err)
        h0, h1 = offsets(c, 0)[0], offsets(c, 1)[0]  # where this run starts (0 on a fresh broker)
        err, pid, ep = vf.init_pid(c, txn)
        tk.check('InitProducerId', err == 0 and pid >= 0 and ep >= 0, (err, pid, ep))
        tk.eq('Produce v12, partition 0 never added: taken (the broker adds it)', (0, None),
              produce(c, txn, pid, ep, 0, 0))
        tk.eq('Produce v12, partition 1 never added: taken', (0, None), produce(c, txn, pid, ep, 0, 1))
        tk.eq('partition 0: the transaction is open (LSO behind HW)', (h0 + 1, h0), offsets(c, 0))
        tk.eq('the same producer again on partition 0: taken', (0, None), produce(c, txn, pid, ep, 1, 0))
        err, npid, nep = end_txn(c, txn, pid, ep, True)
        tk.eq('EndTxn v5 commit: the same producer id at epoch + 1', (0, pid, ep + 1), (err, npid, nep))
        tk.eq('partition 0 committed: LSO = HW (two records and the marker)', (h0 + 3, h0 + 3), stable(c, 0))
        tk.eq('partition 1 committed: LSO = HW', (h1 + 2, h1 + 2), stable(c, 1))
        tk.eq('read_committed Fetch of partition 0: both records', [b'v0', b'v1'], read_committed(c, 0)[-2:])
        # the zombie: a late Produce at the epoch before the bump
        tk.eq('zombie Produce v12 at the old epoch: INVALID_PRODUCER_EPOCH', INVALID_PRODUCER_EPOCH,
              produce(c, txn, pid, ep, 2, 0)[0])
        tk.eq('zombie Produce v9 at the old epoch: INVALID_PRODUCER_EPOCH', INVALID_PRODUCER_EPOCH,
              produce(c, txn, pid, ep, 2, 1, version=9)[0])
        tk.eq('nothing appended by the zombie', (h0 + 3, h0 + 3), offsets(c, 0))
        # the next transaction at the new epoch, aborted
        ep = nep
        tk.eq('next transaction: Produce v12 at the new epoch, sequence 0', (0, None),
              retrying(produce, c, txn, pid, ep, 0, 0))
        err, _, nep = end_txn(c, txn, pid, ep, False)
        tk.eq('EndTxn v5 abort: epoch + 1', (0, ep + 1), (err, nep))
        tk.eq('partition 0 aborted: LSO = HW', (h0 + 5, h0 + 5), stable(c, 0))
        p = kr.fetch(c, TOPIC, 0, h0, isolation_level=1)['responses'][0]['partitions'][0]
        tk.eq('read_committed Fetch: the aborted transaction listed (its first offset, the producer)',
              [(pid, h0 + 3)], [(a['producer_id'], a['first_offset']) for a in p['aborted_transactions'] or []])
        tk.eq('EndTxn v5 abort retried at the previous epoch: NONE with the current epoch', (0, pid, ep + 1),
              end_txn(c, txn, pid, ep, False))
        tk.eq('EndTxn v5 commit retried after an abort: INVALID_TXN_STATE', INVALID_TXN_STATE,
              end_txn(c, txn, pid, ep, True)[0])
        ep = nep
        tk.eq('EndTxn v5 commit with nothing open: INVALID_TXN_STATE', INVALID_TXN_STATE,
              end_txn(c, txn, pid, ep, True)[0])
        err, _, nep = end_txn(c, txn, pid, ep, False)
        tk.eq('EndTxn v5 abort with nothing open: NONE, epoch + 1, no marker', (0, ep + 1, (h0 + 5, h0 + 5)),
              (err, nep, stable(c, 0)))
        ep = nep
        # TxnOffsetCommit v5: the offsets partition added implicitly
        group = 'g-v2-%d' % os.getpid()
        tk.eq('Produce v12 of the consume-transform-produce transaction', (0, None), retrying(produce, c, txn, pid, ep, 0, 1))
        tk.eq('TxnOffsetCommit v5 with no AddOffsetsToTxn: taken', 0, txn_commit(c, txn, pid, ep, group, 42))
        tk.eq('TxnOffsetCommit v5 at the old epoch: INVALID_PRODUCER_EPOCH', INVALID_PRODUCER_EPOCH,
              txn_commit(c, txn, pid, ep - 1, group, 43))
        err, _, nep = end_txn(c, txn, pid, ep, True)
        tk.eq('EndTxn v5 commit of the offsets: epoch + 1', (0, ep + 1), (err, nep))
        end, got = time.time() + 10, None
        while time.time() < end:
            got = committed(c, group)
            if got == (0, 42):
                break
            time.sleep(0.1)
        tk.eq('OffsetFetch require_stable: the committed offset', (0, 42), got)
        ep = nep
        # transaction version 1 beside it, on the same broker and id
        tk.eq('AddPartitionsToTxn v3 (version 1 client)', 0, retrying(vf.add, c, txn, pid, ep, 0, topic=TOPIC))
        tk.eq('Produce v11 after the add', (0, None), produce(c, txn, pid, ep, 0, 0, version=11))
        tk.eq('EndTxn v4 commit: no producer id or epoch, no bump', (0, -1, -1), end_txn(c, txn, pid, ep, True, 4))
        tk.eq('EndTxn v4 commit again: NONE (the same epoch)', 0, retrying(end_txn, c, txn, pid, ep, True, 4)[0])


def init_timeout(c, txn_id, timeout_ms):
    """InitProducerId for txn_id with transaction timeout timeout_ms (FindCoordinator first; retriable answers
    asked again): (error, producer id, epoch)."""
    end = time.time() + 10
    while c.request('FindCoordinator', 3, {'key': txn_id, 'key_type': 1})['error_code'] and time.time() < end:
        time.sleep(0.1)
    while True:
        r = c.request('InitProducerId', 4, {'transactional_id': txn_id, 'transaction_timeout_ms': timeout_ms})
        if r['error_code'] not in (14, 15, 51) or time.time() > end:
            return r['error_code'], r['producer_id'], r['producer_epoch']
        time.sleep(0.1)


def describe(c, txn_id):
    """DescribeTransactions: (error, state, producer epoch, [(topic, partitions)])."""
    t = c.request('DescribeTransactions', 0, {'transactional_ids': [txn_id]})['transaction_states'][0]
    return (t['error_code'], t['transaction_state'], t['producer_epoch'],
            [(x['topic'], sorted(x['partitions'])) for x in t['topics']])


def ongoing(c):
    """The transactional ids ListTransactions lists in state Ongoing."""
    r = c.request('ListTransactions', 0, {'state_filters': ['Ongoing'], 'producer_id_filters': []})
    return sorted(t['transactional_id'] for t in r['transaction_states'])


def fetch_stable(c, partition):
    """A read_committed Fetch's (high watermark, last stable offset)."""
    p = kr.fetch(c, TOPIC, partition, 0, isolation_level=1)['responses'][0]['partitions'][0]
    return p['high_watermark'], p['last_stable_offset']


def late_produce_refused(c, txn, pid, ep, before, name, seq=1, version=12, want=(INVALID_PRODUCER_EPOCH,)):
    """The late Produce of (pid, ep): to partition 0 (its transaction's, aborted) at sequence seq and to
    partition 1 (never in it: the first batch of a hanging transaction) at 0; each refused with one of want,
    nothing appended, both partitions stable (ListOffsets read_committed and a read_committed Fetch), no open
    transaction on either (DescribeProducers)."""
    e0 = produce(c, txn, pid, ep, seq, 0, version=version)[0]
    e1 = produce(c, txn, pid, ep, 0, 1, version=version)[0]
    tk.check('%s: the late Produce v%d to its aborted partition is refused' % (name, version), e0 in want, e0)
    tk.check('%s: the late Produce v%d to a partition never in it is refused' % (name, version), e1 in want, e1)
    tk.eq('%s: nothing appended, both partitions stable (ListOffsets read_committed: LSO = HW)' % name, before,
          (offsets(c, 0), offsets(c, 1)))
    tk.eq('%s: a read_committed Fetch\'s last_stable_offset = high watermark' % name, before,
          (fetch_stable(c, 0), fetch_stable(c, 1)))
    got = [vf.producers(c, p, topic=TOPIC).get(pid, -1) for p in (0, 1)]
    tk.eq('%s: DescribeProducers: no open transaction of the producer on either partition' % name, [-1, -1], got)


def hang():
    """KIP-890's hanging transaction: a Produce delayed past its transaction's end arrives at the partition
    after the marker. Sent late on purpose here (the delay), three ways: version 2 aborted by EndTxn v5,
    version 2 aborted by the coordinator's timeout (this broker runs the pass every 200 ms), and version 1
    (EndTxn v4) with verification. None may open a transaction the coordinator does not know of."""
    tag = os.getpid()
    with kr.Conn(BROKER) as c:
        err = kr.create_topic(c, TOPIC, partitions=2)['error_code']
        tk.check('topic created', err in (0, 36), err)
        # version 2, the producer's own abort
        txn = 'tx-hang-end-%d' % tag
        err, pid, ep = init_timeout(c, txn, 60000)
        tk.check('InitProducerId', err == 0 and pid >= 0, (err, pid, ep))
        tk.eq('v2: Produce v12 opens the transaction on partition 0', (0, None), produce(c, txn, pid, ep, 0, 0))
        err, _, nep = end_txn(c, txn, pid, ep, False)
        tk.eq('v2: EndTxn v5 abort: epoch + 1', (0, ep + 1), (err, nep))
        before = (stable(c, 0), stable(c, 1))
        tk.check('v2: the abort marker is in, partition 0 stable', before[0][0] == before[0][1], before)
        late_produce_refused(c, txn, pid, ep, before, 'v2 after EndTxn abort')
        tk.eq('v2 after EndTxn abort: DescribeTransactions CompleteAbort at epoch + 1, no partition',
              (0, 'CompleteAbort', ep + 1, []), describe(c, txn))
        tk.check('v2 after EndTxn abort: ListTransactions lists it in no Ongoing state', txn not in ongoing(c),
                 ongoing(c))
        # version 2, the coordinator's timeout
        txn = 'tx-hang-timeout-%d' % tag
        err, pid, ep = init_timeout(c, txn, 1000)
        tk.check('InitProducerId with a 1 s transaction timeout', err == 0 and pid >= 0, (err, pid, ep))
        tk.eq('v2 timeout: Produce v12 opens the transaction on partition 0', (0, None),
              produce(c, txn, pid, ep, 0, 0))
        tk.check('v2 timeout: the transaction is Ongoing', txn in ongoing(c), ongoing(c))
        end, got = time.time() + 15, None
        while time.time() < end:
            got = describe(c, txn)
            if got[1] == 'CompleteAbort':
                break
            time.sleep(0.1)
        tk.eq('v2 timeout: the coordinator aborted it (fenced: epoch + 1, no partition left)',
              (0, 'CompleteAbort', ep + 1, []), got)
        before = (stable(c, 0), stable(c, 1))
        tk.check('v2 timeout: the abort marker is in, partition 0 stable', before[0][0] == before[0][1], before)
        late_produce_refused(c, txn, pid, ep, before, 'v2 after the timeout')
        tk.check('v2 after the timeout: ListTransactions lists no Ongoing transaction of it', txn not in ongoing(c),
                 ongoing(c))
        tk.eq('v2 after the timeout: the producer\'s own EndTxn v5 abort, late: NONE at the fenced epoch',
              (0, pid, ep + 1), end_txn(c, txn, pid, ep, False))
        # version 1 with verification (KIP-890 part 1)
        txn = 'tx-hang-v1-%d' % tag
        err, pid, ep = init_timeout(c, txn, 60000)
        tk.check('InitProducerId (version 1)', err == 0 and pid >= 0, (err, pid, ep))
        tk.eq('v1: AddPartitionsToTxn v3 partition 0', 0, retrying(vf.add, c, txn, pid, ep, 0, topic=TOPIC))
        tk.eq('v1: Produce v11 opens the transaction on partition 0', (0, None),
              produce(c, txn, pid, ep, 0, 0, version=11))
        tk.eq('v1: EndTxn v4 abort (no bump)', (0, -1, -1), end_txn(c, txn, pid, ep, False, 4))
        before = (stable(c, 0), stable(c, 1))
        tk.check('v1: the abort marker is in, partition 0 stable', before[0][0] == before[0][1], before)
        # verification: the coordinator no longer has the partition in a transaction of this producer
        late_produce_refused(c, txn, pid, ep, before, 'v1 after EndTxn abort', version=11,
                             want=(TRANSACTION_ABORTABLE,))
        late_produce_refused(c, txn, pid, ep, before, 'v1 after EndTxn abort', version=9, want=(INVALID_TXN_STATE,))
        tk.eq('v1 after EndTxn abort: DescribeTransactions CompleteAbort at the same epoch, no partition',
              (0, 'CompleteAbort', ep, []), describe(c, txn))
        tk.check('v1: ListTransactions lists no Ongoing transaction', ongoing(c) == [], ongoing(c))


if __name__ == '__main__':
    step = sys.argv[1]
    tk.run(step, {'v2': v2, 'hang': hang}[step])
    tk.finish()
