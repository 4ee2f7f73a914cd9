#!/usr/bin/env python3
"""txn/eos.py [--seed S] [--records R] [--duration D] [--per-txn N] [--keys K] [--pipeline confluent|java]
[--txn-version V]:
exactly-once under kill -9 on one node (issue #21): the read-process-write pipeline (its own process:
pipeline.py on confluent-kafka, or with --pipeline java compat-tests/streams TxnPipeline.java on the Java 4.4
client, one JVM per process, built by compat-tests/streams/build.sh; the same contract) between topics in (3
partitions, R records, K keys, key k on partition k % 3, values "k:seq") and out (3 partitions), while a
seeded schedule (random.Random(S), printed) kills things for D seconds, one fault every 0.5-2.5 s (1-3.5 s
for the Java pipeline, whose JVM takes ~1 s to start; the first three one of each kind, in a seeded order),
each one of:
  - kill -9 of the pipeline process 50-300 ms after one of its commits (so records of an open transaction
    are written), started again at once (that transaction aborted by the new producer's init_transactions);
  - kill -9 of the broker, restarted on the same data directory and port;
  - kill -9 of the broker, restarted with GREGOR_FAILPOINT=<one of the four txn points>:<1-2>, so it dies
    again there later; a broker that exits is restarted without a failpoint.
A pipeline that exits by itself (a transaction API error) is started again. Then the drain: no more faults,
until the group's committed offsets reach the end of `in` (at most 120 s). Checks:
  - a read_committed reader of `out` sees, for every key, exactly "k:0:out" .. "k:(n-1):out" in that order
    (every input record's output once, none lost, none twice, in order per key);
  - a read_uncommitted reader sees more records than that (aborted ones: proof that the faults bit);
  - at rest the last stable offset equals the high watermark on every partition of `in` and `out`, and
    ListTransactions (when the broker serves it) lists nothing Ongoing or Prepare*.
With --txn-version V (default: env TXN_VERSION) the broker runs gregor.transaction.version=V (issue #25); at 2 with the Java pipeline (which
then ends every transaction with EndTxn v5, an epoch bump each), the transactional batches of `out` must carry more
distinct producer epochs than the pipeline had starts (InitProducerId bumps once per start; version 1 never more).
Prints its seed and figures (faults by kind, failpoints fired, transactions committed, aborted records).
Bounded: every wait has a limit; the broker and the pipeline are killed and the directory removed at the end.
Read next: compat-tests/txn/pipeline.py, compat-tests/txn/txnkit.py.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402
import txnkit  # noqa: E402

SRC, DST, PARTS, GROUP, TXN_ID = 'eos-in', 'eos-out', 3, 'eos-group', 'eos-pipeline'
STALL_S = 30  # the drain's limit on a pipeline committing nothing
FAILPOINTS = ('txn.after_prepare', 'txn.mid_markers', 'txn.before_complete', 'txn.after_add_partitions')


def java_classpath():
    """The class path of compat-tests/streams (TxnPipeline), built first when stale (its build.sh)."""
    build = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'streams', 'build.sh')
    r = subprocess.run(['bash', build], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    if r.returncode != 0:
        raise RuntimeError('compat-tests/streams/build.sh: ' + r.stdout.decode(errors='replace')[-600:])
    return r.stdout.decode().strip()


class Run:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.b = txnkit.Broker(['gregor.transaction.version=%d' % args.txn_version] if args.txn_version is not None else [])
        self.pipe = None
        self.pipe_starts = 0
        self.classpath = java_classpath() if args.pipeline == 'java' else None
        self.spacing = (1.0, 3.5) if args.pipeline == 'java' else (0.5, 2.5)
        self.counts = {'pipeline kill -9': 0, 'broker kill -9': 0, 'broker kill -9, failpoint armed': 0,
                       'failpoint fired': 0, 'pipeline exited': 0}
        self.fired = {}
        self.armed = None
        self.first = ['pipeline', 'broker', 'failpoint']
        self.rng.shuffle(self.first)
        # spread the records over the fault window: the pipeline sleeps this long after each record
        self.delay_ms = args.delay_ms if args.delay_ms is not None else \
            max(0, int(args.duration * 1000 * 0.8 / max(1, args.records)))

    def start_pipeline(self):
        log = open(os.path.join(self.b.dir, 'pipeline.log'), 'ab')
        argv = [self.b.addr, SRC, DST, str(PARTS), GROUP, TXN_ID, str(self.args.per_txn), str(self.delay_ms)]
        if self.args.pipeline == 'java':
            # one JVM per pipeline process; a thread dump on SIGQUIT (stalled())
            cmd = ['java', '-Xmx256m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-cp', self.classpath,
                   'dev.gregor.streams.TxnPipeline']
        else:
            cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'pipeline.py')]
        self.pipe = subprocess.Popen(cmd + argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.pipe_starts += 1

    def commits(self):
        """Commit lines the pipeline processes have printed so far."""
        with open(os.path.join(self.b.dir, 'pipeline.log'), 'rb') as f:
            return sum(1 for line in f if line.startswith(b'pipeline: commit'))

    def kill_pipeline(self):
        if self.pipe is not None:
            self.pipe.send_signal(signal.SIGKILL)
            self.pipe.wait()
            self.pipe = None

    def start_broker(self, failpoint=None):
        self.b.start(failpoint=failpoint)
        self.armed = failpoint

    def tend(self):
        """Restarts a broker that exited (a failpoint) and a pipeline that ended by itself."""
        rc = self.b.exited()
        if rc is not None:
            if rc == txnkit.FAILPOINT_EXIT:
                self.counts['failpoint fired'] += 1
                name = (self.armed or '?').split(':')[0]
                self.fired[name] = self.fired.get(name, 0) + 1
            else:
                tk.fail('the broker exits only at a failpoint', 'status %s: %s' % (rc, self.b.log_tail()))
            self.start_broker()
        if self.pipe is not None and self.pipe.poll() is not None:
            self.counts['pipeline exited'] += 1
            self.pipe = None
            self.start_pipeline()

    def sleep(self, s):
        end = time.time() + s
        while time.time() < end:
            self.tend()
            time.sleep(0.05)

    def fault(self):
        # the first three faults are one of each kind, in a seeded order; then any kind
        kind = self.first.pop(0) if self.first else self.rng.choice(('pipeline', 'broker', 'failpoint'))
        if kind == 'pipeline':
            # mid-transaction: a little after one of its commits (up to 5 s for one), so records are open
            seen, end = self.commits(), time.time() + 5
            while self.commits() == seen and time.time() < end:
                self.sleep(0.02)
            time.sleep(self.rng.uniform(0.05, 0.3))
            self.counts['pipeline kill -9'] += 1
            self.kill_pipeline()
            self.start_pipeline()
        elif kind == 'broker':
            self.counts['broker kill -9'] += 1
            self.b.kill()
            self.start_broker()
        else:
            self.counts['broker kill -9, failpoint armed'] += 1
            self.b.kill()
            self.start_broker('%s:%d' % (self.rng.choice(FAILPOINTS), self.rng.randint(1, 2)))

    def stalled(self):
        """The pipeline committed nothing for STALL_S s: its stack (Python: faulthandler, SIGUSR1; Java: SIGQUIT) is printed,
        the stall counted (a failure), and it is killed and started again so the run can still drain."""
        self.counts['pipeline stalled'] = self.counts.get('pipeline stalled', 0) + 1
        path = os.path.join(self.b.dir, 'pipeline.log')
        size = os.path.getsize(path)
        if self.pipe is not None:
            self.pipe.send_signal(signal.SIGQUIT if self.args.pipeline == 'java' else signal.SIGUSR1)
            time.sleep(1)
        with open(path, errors='replace') as f:
            f.seek(size)
            dump = [l for l in f.read().splitlines() if not l.startswith('%')]
        tk.fail('the pipeline keeps committing (no stall of %d s)' % STALL_S, 'stack: ' + ' | '.join(dump[-12:]))
        self.kill_pipeline()
        self.start_pipeline()

    def committed(self):
        """The group's committed offsets of `in` (None where unknown)."""
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({'bootstrap.servers': self.b.addr, 'group.id': GROUP, 'isolation.level': 'read_committed',
                      'enable.auto.commit': False, 'log_level': 0})
        try:
            got = c.committed([TopicPartition(SRC, p) for p in range(PARTS)], timeout=5)
            return [tp.offset if tp.offset >= 0 else None for tp in got]
        except Exception:  # noqa: BLE001 - the broker may be restarting: asked again
            return [None] * PARTS
        finally:
            c.close()

    def produce_input(self):
        from confluent_kafka import Producer
        p = Producer({'bootstrap.servers': self.b.addr, 'enable.idempotence': True, 'linger.ms': 5})
        seqs = [0] * self.args.keys
        for i in range(self.args.records):
            k = i % self.args.keys
            p.produce(SRC, key=('k%d' % k).encode(), value=('k%d:%d' % (k, seqs[k])).encode(), partition=k % PARTS)
            seqs[k] += 1
        tk.eq('input: every record acknowledged', 0, p.flush(60))
        return {'k%d' % k: n for k, n in enumerate(seqs)}

    def run(self):
        a = self.args
        print('eos: seed %d, %s pipeline, %d records, %d keys, %d s of faults, %d records per transaction, %d ms per '
              'record' % (a.seed, a.pipeline, a.records, a.keys, a.duration, a.per_txn, self.delay_ms), flush=True)
        t0 = time.time()
        self.start_broker()
        with kr.Conn(self.b.addr) as c:
            for t in (SRC, DST):
                tk.eq('topic %s created' % t, 0, kr.create_topic(c, t, PARTS)['error_code'])
        want = self.produce_input()
        ends = [txnkit.offsets(self.b.addr, SRC, p)[0] for p in range(PARTS)]
        self.start_pipeline()
        end = time.time() + a.duration
        while time.time() < end:
            self.sleep(self.rng.uniform(*self.spacing))
            if time.time() < end:
                self.fault()
        t_faults = time.time()
        if self.armed:  # no failpoint left for the drain
            self.b.kill()
            self.start_broker()
        drain_end, last, moved = time.time() + 120, None, time.time()
        while time.time() < drain_end:
            self.tend()
            got = self.committed()
            if got != last:
                last, moved = got, time.time()
            if last == ends:
                break
            if time.time() - moved > STALL_S:
                self.stalled()
                moved = time.time()
            time.sleep(0.3)
        t_drain = time.time()
        self.kill_pipeline()
        tk.eq('drain: the committed offsets of %s reach its end' % SRC, ends, last)
        self.check(want)
        print('eos: seed %d, %s pipeline: faults %s; failpoints fired %s; pipeline started %d times, broker %d times; '
              '%.1f s of faults, drained in %.1f s, %.1f s in all' %
              (a.seed, a.pipeline, self.counts, self.fired or '{}', self.pipe_starts, self.b.starts, t_faults - t0,
               t_drain - t_faults, time.time() - t0), flush=True)

    def check(self, want):
        self.aborted = txnkit.check_pipeline(self.b.addr, SRC, DST, PARTS, want)
        if self.args.txn_version == 2 and self.args.pipeline == 'java':
            epochs = self.producer_epochs()
            tk.check('transaction version 2: %d distinct producer epochs in %s over %d pipeline starts (an epoch bump '
                     'per transaction)' % (len(epochs), DST, self.pipe_starts), len(epochs) > self.pipe_starts,
                     str(sorted(epochs)[:10]))

    def producer_epochs(self):
        """The distinct (producer id, epoch) pairs of DST's transactional data batches (raw Fetch, every partition)."""
        seen = set()
        with kr.Conn(self.b.addr) as c:
            for part in range(PARTS):
                off = 0
                while True:
                    r = kr.fetch(c, DST, part, off)['responses'][0]['partitions'][0]
                    batches = [b for b in kr.parse_batches(r['records'] or b'', decode_records=False)
                               if not b.get('truncated')]
                    if not batches:
                        break
                    for b in batches:
                        if b['attributes'] & 0x10 and not b['attributes'] & 0x20:  # transactional, not a marker
                            seen.add((b['producer_id'], b['producer_epoch']))
                    off = batches[-1]['base_offset'] + batches[-1]['last_offset_delta'] + 1
        return seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--records', type=int, default=600)
    ap.add_argument('--keys', type=int, default=12)
    ap.add_argument('--duration', type=float, default=15)
    ap.add_argument('--per-txn', type=int, default=20)
    ap.add_argument('--delay-ms', type=int, default=None)
    ap.add_argument('--pipeline', choices=('confluent', 'java'), default='confluent')
    ap.add_argument('--txn-version', type=int, choices=(0, 1, 2),
                    default=int(os.environ['TXN_VERSION']) if os.environ.get('TXN_VERSION') else None)
    a = ap.parse_args()
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(2), 'big')
    r = Run(a)

    def on_term(signum, frame):
        raise SystemExit('eos: signal %d' % signum)  # the finally below still kills and removes everything
    signal.signal(signal.SIGTERM, on_term)
    try:
        tk.run('eos seed %d' % a.seed, r.run)
    finally:
        r.kill_pipeline()
        r.b.cleanup(keep=bool(os.environ.get('KEEP_DATA')))
    tk.finish()


if __name__ == '__main__':
    main()
