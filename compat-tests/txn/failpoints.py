#!/usr/bin/env python3
"""txn/failpoints.py: the broker killed at each transaction failpoint (GREGOR_FAILPOINT, common/failpoint.h)
by a confluent-kafka (librdkafka) transactional producer, then restarted on the same data directory (issue #21).

One broker (txnkit.Broker: its own free port and directory), topic fpt with 2 partitions. Each case starts the
broker with one failpoint armed, runs a driver process (this file, `drive`) that writes 3 records to each
partition in one transaction and commits or aborts it, and expects the broker to exit with status 86 after
logging "failpoint NAME hit"; the driver is then killed -9 too, the broker restarted without a failpoint, and:
  - txn.after_prepare / txn.mid_markers / txn.before_complete, commit and abort: the prepared transaction is
    completed as prepared (read_committed sees its 6 records after a commit, none after an abort;
    read_uncommitted sees them either way);
  - txn.after_add_partitions:2 (the second partition's AddPartitionsToTxn durable, unanswered; the first
    partition's records written): the Ongoing transaction is aborted once its transaction.timeout.ms
    (3000) passes (transaction.abort.timed.out.transaction.cleanup.interval.ms 500): read_committed never sees
    it, and the LSO comes back to the HW within 8 s of the restart (the 500 ms pass);
then, at rest, LSO = HW on both partitions, ListTransactions lists nothing open (when the broker serves it),
and a new producer with the case's transactional id commits a transaction (nothing left stuck), and a
further one's init_transactions returns (the commit completed before the broker stops).
Run standalone (GREGOR_BIN, REPO) or through run.sh's run_py; prints "RESULT p f x". Env TXN_VERSION: the
broker's gregor.transaction.version (issue #25: librdkafka stays on version 1 at either level).
Read next: compat-tests/txn/txnkit.py, compat-tests/txn/eos.py.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402
import txnkit  # noqa: E402

TOPIC = 'fpt'
TIMEOUT_MS = 3000  # the driver's transaction.timeout.ms

# (failpoint spec, driver mode, expected to be committed)
CASES = [
    ('txn.after_prepare', 'commit', True),
    ('txn.after_prepare', 'abort', False),
    ('txn.mid_markers', 'commit', True),
    ('txn.mid_markers', 'abort', False),
    ('txn.before_complete', 'commit', True),
    ('txn.before_complete', 'abort', False),
    ('txn.after_add_partitions:2', 'ongoing', False),
]


def producer(addr, txn_id, quiet=False):
    from confluent_kafka import Producer
    conf = {'bootstrap.servers': addr, 'transactional.id': txn_id, 'transaction.timeout.ms': TIMEOUT_MS,
            'socket.timeout.ms': TIMEOUT_MS, 'message.timeout.ms': TIMEOUT_MS, 'linger.ms': 5}
    if quiet:
        conf['log_level'] = 0  # the broker stops under it: no reconnect noise
    return Producer(conf)


def drive(addr, txn_id, tag, mode):
    """The driver process: one transaction over both partitions, ended as `mode` says. The broker is expected
    to die under it; whatever happens after that is not looked at (the harness kills this process)."""
    p = producer(addr, txn_id)
    p.init_transactions(30)
    p.begin_transaction()
    for part in (0, 1):
        for i in range(3):
            p.produce(TOPIC, key=tag.encode(), value=('%s-%d-%d' % (tag, part, i)).encode(), partition=part)
        p.flush(30)  # ongoing: the second partition's AddPartitionsToTxn is its own request
    print('driver: records written', flush=True)
    if mode == 'commit':
        p.commit_transaction(60)
    elif mode == 'abort':
        p.abort_transaction(60)
    else:
        time.sleep(60)
    print('driver: ended', flush=True)


def records_of(tag, by_part):
    return sorted(v for part in by_part.values() for k, v in part if k == tag)


def expected(tag):
    return sorted('%s-%d-%d' % (tag, part, i) for part in (0, 1) for i in range(3))


def run_case(b, n, spec, mode, commit):
    name = spec.split(':')[0]
    tag = 'c%d' % n
    txn_id = 'fp-%d' % n
    label = '%s %s' % (spec, mode)
    before = len(b.log_text())
    b.start(failpoint=spec)
    drv = subprocess.Popen([sys.executable, os.path.abspath(__file__), 'drive', b.addr, txn_id, tag, mode],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    rc = b.wait_exit(40)
    drv.send_signal(signal.SIGKILL)
    out = drv.communicate()[0].decode(errors='replace')
    if rc is None:
        b.kill()
    tk.eq('%s: the broker exits with status %d' % (label, txnkit.FAILPOINT_EXIT), txnkit.FAILPOINT_EXIT, rc)
    tk.check('%s: "failpoint %s hit" logged' % (label, name), ('failpoint %s hit' % name) in b.log_text()[before:],
             b.log_tail() + ' / driver: ' + out.strip()[-300:])
    t0 = time.time()
    b.start()
    stable = txnkit.wait_stable(b.addr, TOPIC, 2, TIMEOUT_MS / 1000 + 10)
    took = time.time() - t0
    tk.check('%s: after the restart LSO = HW on both partitions (%.1f s)' % (label, took),
             all(hw == lso for hw, lso in stable.values()), str(stable))
    committed = records_of(tag, txnkit.read_all(b.addr, TOPIC, 2, 'read_committed'))
    uncommitted = records_of(tag, txnkit.read_all(b.addr, TOPIC, 2, 'read_uncommitted'))
    if mode == 'ongoing':
        # its timeout has passed by the time the broker serves again: aborted at the first 500 ms pass
        # (transaction.abort.timed.out.transaction.cleanup.interval.ms; Kafka's default 10 s would be later)
        tk.check('%s: aborted within 8 s of the restart (%.1f s)' % (label, took), took < 8)
        tk.eq('%s: read_committed never sees the timed-out transaction' % label, [], committed)
        tk.eq('%s: read_uncommitted sees the first partition\'s 3 records' % label,
              sorted('%s-0-%d' % (tag, i) for i in range(3)), uncommitted)
    else:
        tk.eq('%s: read_committed sees %s' % (label, 'its 6 records' if commit else 'none of it'),
              expected(tag) if commit else [], committed)
        tk.eq('%s: read_uncommitted sees its 6 records' % label, expected(tag), uncommitted)
    open_ids = txnkit.open_transactions(b.addr)
    if open_ids is not None:
        tk.eq('%s: ListTransactions lists nothing Ongoing or Prepare*' % label, [], open_ids)
    p = producer(b.addr, txn_id, quiet=True)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, key=b'after', value=('%s-after' % tag).encode(), partition=0)
    p.commit_transaction(30)
    tk.ok('%s: a new producer with the same transactional id commits' % label)
    del p
    # EndTxn is answered once PrepareCommit is durable; its markers and CompleteCommit follow. A further
    # InitProducerId is answered only after they are written (CONCURRENT_TRANSACTIONS until then, retried by
    # the client), so the broker stops with nothing left for the next start to complete (which would pass
    # the next case's failpoint before its driver runs).
    producer(b.addr, txn_id, quiet=True).init_transactions(30)
    b.kill()  # quicker than a clean stop; the next start recovers the logs as after a crash


def main():
    if len(sys.argv) > 1 and sys.argv[1] == 'drive':
        drive(*sys.argv[2:6])
        return
    b = txnkit.Broker()
    t0 = time.time()
    try:
        b.start()
        with kr.Conn(b.addr) as c:
            tk.eq('topic %s created' % TOPIC, 0, kr.create_topic(c, TOPIC, 2)['error_code'])
        b.stop()
        only = os.environ.get('FP_CASES')  # e.g. "4,5": run only those cases (debugging)
        for n, (spec, mode, commit) in enumerate(CASES):
            if only and str(n) not in only.split(','):
                continue
            tk.run('%s %s' % (spec, mode), run_case, b, n, spec, mode, commit)
            b.kill()  # a case that raised may leave it running
        b.start()
        stable = txnkit.wait_stable(b.addr, TOPIC, 2, 10)
        tk.check('at rest after every case: LSO = HW on both partitions', all(h == s for h, s in stable.values()),
                 str(stable))
        b.stop()
        print('failpoints: %d cases, %d broker starts, %.1f s' % (len(CASES), b.starts, time.time() - t0))
    finally:
        b.cleanup(keep=bool(os.environ.get('KEEP_DATA')))
    tk.finish()


if __name__ == '__main__':
    main()
