"""txn/txnkit.py: what the transaction failure tests share (failpoints.py, eos.py, cluster/txn_faults.py): a
Gregor broker they start, kill -9 and restart themselves on one free loopback port and one data directory (a
client keeps its bootstrap address across restarts); the last stable offset against the high watermark; ListTransactions when the broker serves
it; a read_committed / read_uncommitted read of whole partitions; and the exactly-once pipeline's checks at
rest (check_pipeline), one node or a cluster.
Read next: compat-tests/txn/failpoints.py, compat-tests/txn/eos.py.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import kafka_raw as kr

REPO = os.environ.get('REPO') or os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
GREGOR_BIN = os.environ.get('GREGOR_BIN') or os.path.join(REPO, 'build', 'bin', 'gregor')
FAILPOINT_EXIT = 86  # common/failpoint.h GR_FAILPOINT_EXIT_CODE

# A 500 ms timed-out-transaction pass (Kafka's default 10 s) and no initial rebalance delay.
OVERRIDES = ('transaction.abort.timed.out.transaction.cleanup.interval.ms=500',
             'group.initial.rebalance.delay.ms=0')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Broker:
    """One broker process at a time on self.addr, data in self.dir/data, log appended to self.dir/broker.log."""

    def __init__(self, overrides=()):
        self.dir = tempfile.mkdtemp(prefix='gregor-txnfail.')
        self.port = free_port()
        self.addr = '127.0.0.1:%d' % self.port
        self.overrides = list(OVERRIDES) + list(overrides)
        if os.environ.get('TXN_VERSION') and not any(o.startswith('gregor.transaction.version=') for o in overrides):
            # env TXN_VERSION: the level of every broker started here (issue #25; faults.sh runs both)
            self.overrides.append('gregor.transaction.version=' + os.environ['TXN_VERSION'])
        self.proc = None
        self.starts = 0

    def start(self, failpoint=None, timeout=60):
        """Starts the broker (GREGOR_FAILPOINT=failpoint when given) and waits until it serves."""
        assert self.proc is None
        listener = os.path.join(self.dir, 'listener')
        if os.path.exists(listener):
            os.unlink(listener)
        env = dict(os.environ)
        env.pop('GREGOR_FAILPOINT', None)
        if failpoint:
            env['GREGOR_FAILPOINT'] = failpoint
        argv = [GREGOR_BIN, '--override', 'listeners=PLAINTEXT://%s' % self.addr,
                '--override', 'gregor.listener.file=' + listener,
                '--override', 'gregor.admin.listeners=http://127.0.0.1:0',  # never the fixed 9644
                '--override', 'log.dirs=' + os.path.join(self.dir, 'data')]
        for o in self.overrides:
            argv += ['--override', o]
        with open(os.path.join(self.dir, 'broker.log'), 'ab') as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.starts += 1
        end = time.time() + timeout
        while time.time() < end:
            if os.path.exists(listener) and os.path.getsize(listener) > 0:
                return
            if self.proc.poll() is not None:
                rc, self.proc = self.proc.returncode, None
                raise RuntimeError('broker exited at start (%s): %s' % (rc, self.log_tail()))
            time.sleep(0.05)
        self.kill()
        raise RuntimeError('broker did not serve within %d s' % timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def exited(self):
        """The exit status once the process ended by itself (then forgotten), else None."""
        if self.proc is None or self.proc.poll() is None:
            return None
        rc, self.proc = self.proc.returncode, None
        return rc

    def wait_exit(self, timeout):
        """Waits up to `timeout` s for the process to end by itself; returns its status or None."""
        end = time.time() + timeout
        while time.time() < end:
            rc = self.exited()
            if rc is not None:
                return rc
            time.sleep(0.05)
        return None

    def kill(self):
        """kill -9, as a crash."""
        if self.proc is not None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            self.proc = None

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def log_text(self):
        with open(os.path.join(self.dir, 'broker.log'), errors='replace') as f:
            return f.read()

    def log_tail(self, n=5):
        return ' | '.join(self.log_text().splitlines()[-n:])

    def cleanup(self, keep=False):
        self.kill()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def offsets(addr, topic, partition):
    """(high watermark, last stable offset) from ListOffsets latest at isolation 0 and 1."""
    out = []
    with kr.Conn(addr) as c:
        for iso in (0, 1):
            r = c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': iso, 'topics': [
                {'name': topic, 'partitions': [{'partition_index': partition, 'timestamp': -1}]}]})
            p = r['topics'][0]['partitions'][0]
            if p['error_code']:
                raise RuntimeError('ListOffsets %s-%d: error %d' % (topic, partition, p['error_code']))
            out.append(p['offset'])
    return tuple(out)


def wait_stable(addr, topic, partitions, timeout):
    """Waits until LSO = HW on every partition; returns {partition: (hw, lso)} as last read. addr: one
    broker's address, or a function (topic, partition) -> the address of its leader (a cluster)."""
    end = time.time() + timeout
    while True:
        got = {}
        for p in range(partitions):
            try:
                got[p] = offsets(addr(topic, p) if callable(addr) else addr, topic, p)
            except (OSError, RuntimeError, kr.ConnectionClosed) as e:
                got[p] = (str(e), None)
        if all(hw == lso for hw, lso in got.values()) or time.time() > end:
            return got
        time.sleep(0.1)


def open_transactions(addr):
    """Transactional ids in Ongoing / Prepare* by ListTransactions (api 66), or None when the broker does not
    list it (or the test library has no schema for it): the caller then relies on the LSO."""
    if 'ListTransactions' not in kr.API_KEYS:
        return None
    if 66 not in kr.api_version_ranges(addr):
        return None
    with kr.Conn(addr) as c:
        r = c.request('ListTransactions', 0, {'state_filters': ['Ongoing', 'PrepareCommit', 'PrepareAbort'],
                                              'producer_id_filters': []})
    return sorted(t['transactional_id'] for t in r['transaction_states'])


def read_all(addr, topic, partitions, isolation, timeout=30):
    """Every record of the topic's partitions from offset 0 at `isolation` ('read_committed' or
    'read_uncommitted'), until each partition reports its end; returns {partition: [(key, value), ...]}."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({'bootstrap.servers': addr, 'group.id': 'txnkit-reader', 'isolation.level': isolation,
                  'enable.auto.commit': False, 'enable.partition.eof': True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = {p: [] for p in range(partitions)}
        eof = set()
        end = time.time() + timeout
        while len(eof) < partitions:
            if time.time() > end:
                raise RuntimeError('%s read of %s: partitions %s never reached their end' %
                                   (isolation, topic, sorted(set(range(partitions)) - eof)))
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out[m.partition()].append((m.key().decode() if m.key() else None, m.value().decode()))
        return out
    finally:
        c.close()


def check_pipeline(bootstrap, src, dst, partitions, want, leader_of=None, coordinators=None):
    """The exactly-once pipeline's checks at rest (issue #21; eos.py, cluster/txn_faults.py), each a testkit
    check: a read_committed reader of `dst` sees, for every key k of want {key: n}, exactly "k:0:out" ..
    "k:(n-1):out" in that order and no other key; a read_uncommitted reader sees more records than that (the
    faults bit); LSO = HW on every partition of `src` and `dst`; ListTransactions lists nothing Ongoing or
    Prepare* at any broker of `coordinators` (addresses; default [bootstrap]; skipped where not served).
    bootstrap: the readers' bootstrap list; leader_of: (topic, partition) -> the leader's address for
    ListOffsets (default: bootstrap, one broker). Returns the number of aborted records read_uncommitted saw
    beyond the committed ones."""
    import testkit as tk
    committed = read_all(bootstrap, dst, partitions, 'read_committed', timeout=60)
    by_key = {}
    for part in committed.values():
        for k, v in part:
            by_key.setdefault(k, []).append(v)
    bad = [k for k, n in want.items() if by_key.get(k) != ['%s:%d:out' % (k, i) for i in range(n)]]
    extra = sorted(set(by_key) - set(want))
    tk.check('read_committed: every input record\'s output exactly once, in order per key (%d records, %d '
             'keys)' % (sum(want.values()), len(want)), not bad and not extra,
             'keys wrong: %s (first: %s got %s...)' % (bad[:5] + extra, bad[:1],
                                                       (by_key.get(bad[0]) or [])[:8] if bad else ''))
    total = sum(len(v) for v in committed.values())
    raw = read_all(bootstrap, dst, partitions, 'read_uncommitted', timeout=60)
    raw_total = sum(len(v) for v in raw.values())
    tk.check('read_uncommitted sees aborted records (%d beyond the %d committed): the faults bit' %
             (raw_total - total, total), raw_total > total)
    for t in (src, dst):
        stable = wait_stable(leader_of or bootstrap, t, partitions, 15)
        tk.check('at rest: LSO = HW on every partition of %s' % t,
                 all(hw == lso for hw, lso in stable.values()), str(stable))
    listed = [(a, open_transactions(a)) for a in (coordinators or [bootstrap])]
    listed = [(a, ids) for a, ids in listed if ids is not None]
    if listed:
        tk.eq('at rest: ListTransactions lists nothing Ongoing or Prepare* (%d broker(s))' % len(listed), [],
              [(a, ids) for a, ids in listed if ids])
    return raw_total - total
