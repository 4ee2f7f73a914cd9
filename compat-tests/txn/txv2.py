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
"""
import os
import sys
import time

import kafka_raw as kr
import testkit as tk
import verify as vf  # its schemas (TxnOffsetCommit, AddOffsetsToTxn) and helpers

BROKER = os.environ['BROKER']
TOPIC = 'tv2'
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE = 47, 48


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


if __name__ == '__main__':
    step = sys.argv[1]
    tk.run(step, {'v2': v2}[step])
    tk.finish()
