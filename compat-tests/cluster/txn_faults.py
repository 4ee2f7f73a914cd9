#!/usr/bin/env python3
"""txn_faults.py: the exactly-once read-process-write pipeline under kill -9 of leaders and of the transaction
coordinator, SIGSTOP and the transaction failpoints, in a 3-broker cluster (issue #21, Tests: "kill -9 the
pipeline process and the broker (one node; a leader in the cluster) at random points and at each failpoint,
seeded"). The cluster counterpart of compat-tests/txn/eos.py: the same pipeline process (txn/pipeline.py,
confluent-kafka) and the same checks at rest (txn/txnkit.py check_pipeline); runs as root through
harness.py (etcd and three brokers on the host), seeded and bounded in time.

Setup: __transaction_state made by the first FindCoordinator (10 partitions here to keep loads short, RF 3,
min ISR 2: Kafka's defaults); C, the broker coordinating the transactional id (the leader of its
__transaction_state partition); topics in and out (3 partitions each, RF 3, min.insync.replicas 2) assigned
so that every data partition is led away from C (C last in each replica list; the controller elects in
assignment order); the consumer group picked so that its group coordinator (the leader of its
__consumer_offsets partition) is another broker than the transaction coordinator, so every TxnOffsetCommit is
verified (KIP-890 part 1) at a remote transaction coordinator (--group-with-coordinator: a group whose
__consumer_offsets partition has the replicas of the transactional id's __transaction_state partition in the
same order, so the two coordinators stay together across elections); R records (K keys, key k on partition k % 3, values "k:seq") written to in by an
idempotent acks=all producer; then the pipeline (a transaction every N records, acks=all).
A seeded schedule (random.Random(seed), printed) of faults for D seconds, one every 1-3 s, the first five
one of each kind (the pipeline's kill first, the others in a seeded order), each one of:
  - pipeline: kill -9 of the pipeline process 50-300 ms after one of its commits, started again at once;
  - coordinator: kill -9 of the broker leading the transactional id's __transaction_state partition (as
    Metadata says then), restarted at once on the same data dir and ports;
  - leader: kill -9 of a broker leading a partition of in or out that is not the coordinator's broker (a
    follower when every data partition is led by the coordinator's broker then: counted apart), restarted;
  - failpoint: T, the broker the controller would elect next for that __transaction_state partition (the
    first other ISR member in assignment order), kill -9 and restarted with GREGOR_FAILPOINT=<one of the four
    txn points>:<1-2> (each of the four once, in a seeded order, before any repeats), then, once it is back
    in that partition's ISR (at most 30 s), kill -9 of the coordinator (restarted at once, unarmed), so T
    coordinates armed; then up to 10 s for T to exit at its point; a broker that exits at its failpoint
    (status 86) is restarted without one;
  - pause: SIGSTOP of a leader of a partition of in, out or that __transaction_state partition for 1-5 s
    (past the 3 s session sometimes: its leaderships move), then SIGCONT.
A pipeline that ends by itself (a transaction API error) is started again. Then the drain: an armed broker
still alive is restarted unarmed; no more faults, until the group's committed offsets reach the end of in
(at most 120 s; a pipeline committing nothing for 30 s is a failure, its stack printed). Checks at rest
(txnkit.check_pipeline): a read_committed reader of out sees every input record's output exactly once, in
order per key; a read_uncommitted reader sees aborted records beyond them; LSO = HW on every partition of in
and out (at its leader); ListTransactions at each of the three brokers lists nothing Ongoing or Prepare*.
Then, every partition of in and out back at a full ISR (at most 30 s), the brokers are stopped (kill -9: at
rest nothing is in flight) and the replicas of every partition of out and in compared up to the high
watermark (replicacheck.py: byte for byte, at the same offsets). A broker that exits other than at a
failpoint is a failure. Before the pipeline starts, one transaction of the same transactional id commits an
offset for a group coordinated by another broker (remote_offsets): committed and read back (it answered
NOT_COORDINATOR before the group coordinator learnt to ask a remote transaction coordinator). Prints its seed and figures (faults by kind, failpoints fired by name, aborted
records seen). Ends with `cluster-txn-faults: N passed, N failed`; exit status 1 on any failure.
Usage: txn_faults.py [--seed N] [--duration D] [--records R] [--keys K] [--per-txn N] [--deadline S]
[--group-with-coordinator]
(the cluster suite's short form: the defaults, 30 s of faults; make test-txn-faults: 60 s per seed).
Read next: compat-tests/txn/pipeline.py, compat-tests/txn/txnkit.py, compat-tests/txn/eos.py, txn.py.
"""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TXN_DIR = os.path.join(os.path.dirname(HERE), 'txn')
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
sys.path.insert(0, TXN_DIR)
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import replicacheck as rc  # noqa: E402
import testkit as tk  # noqa: E402
import txnkit  # noqa: E402
from txn import partition_for, parts_of  # noqa: E402 - cluster/txn.py's __transaction_state helpers

SESSION_MS = 3000
PREFIX = '/gregor'
TXN_TOPIC, TXN_PARTS = '__transaction_state', 10
SRC, DST, PARTS, TXN_ID = 'ctf-in', 'ctf-out', 3, 'ctf-pipeline'
OFFSETS_TOPIC, OFFSETS_PARTS = '__consumer_offsets', 50
STALL_S = 30
FIRE_WAIT_S = 10  # a failpoint fault waits this long for the armed broker to exit at its point
FAILPOINTS = ('txn.after_prepare', 'txn.mid_markers', 'txn.before_complete', 'txn.after_add_partitions')
KINDS = ('pipeline', 'coordinator', 'leader', 'failpoint', 'pause')


def overrides(etcd):
    # txnkit.OVERRIDES: a 500 ms timed-out
    # transaction pass and no initial rebalance delay, as on one node.
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            f'broker.session.timeout.ms={SESSION_MS}', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', f'transaction.state.log.num.partitions={TXN_PARTS}'] + \
        list(txnkit.OVERRIDES)


class Run:
    def __init__(self, run, etcd, bs, args):
        self.run, self.etcd, self.bs, self.a = run, etcd, bs, args
        self.rng = run.rng
        self.by_id = {b.node_id: b for b in bs}
        for b in bs:
            b.armed = None
        self.pipe = None
        self.pipe_starts = 0
        self.counts = {k: 0 for k in ('pipeline kill -9', 'coordinator kill -9', 'data leader kill -9',
                                      'follower kill -9 (no data leader away from the coordinator)',
                                      'failpoint armed', 'pause', 'failpoint fired', 'pipeline exited',
                                      'armed broker disarmed for the drain')}
        self.fired = {}
        self.first = list(KINDS[1:])  # the pipeline's kill first (an aborted transaction even in a short run),
        self.rng.shuffle(self.first)    # then one of each other kind in a seeded order
        self.first.insert(0, 'pipeline')
        self.points = []  # failpoints still to arm before any repeats: each of the four first, seeded order
        self.txn_p = partition_for(TXN_ID, TXN_PARTS)
        self.delay_ms = max(0, int(args.duration * 1000 * 0.8 / max(1, args.records)))
        self.group = None

    # -- what the cluster looks like now
    def bootstrap(self):
        return ','.join(b.bootstrap for b in self.bs)

    def meta(self, topic):
        """{partition: (leader, replicas, sorted isr, epoch)} from the first broker that answers, or {}."""
        for b in self.bs:
            if not b.alive():
                continue
            try:
                v = parts_of(b, topic)
            except Exception:  # noqa: BLE001 - a broker restarting or paused
                continue
            if v:
                return v
        return {}

    def coordinator(self):
        """The leader of the transactional id's __transaction_state partition (None when unknown)."""
        v = self.meta(TXN_TOPIC).get(self.txn_p)
        return self.by_id.get(v[0]) if v else None

    def data_leaders(self):
        ids = set()
        for t in (SRC, DST):
            ids |= {v[0] for v in self.meta(t).values()}
        return [self.by_id[i] for i in sorted(ids) if i in self.by_id]

    def leader_addr(self, topic, p):
        v = self.meta(topic).get(p)
        b = self.by_id.get(v[0]) if v else None
        return b.bootstrap if b is not None else self.bs[0].bootstrap

    # -- processes
    def start_pipeline(self):
        self.pipe = self.run.spawn([sys.executable, os.path.join(TXN_DIR, 'pipeline.py'), self.bootstrap(), SRC,
                                    DST, str(PARTS), self.group, TXN_ID, str(self.a.per_txn), str(self.delay_ms)],
                                   log_name='pipeline.log', label='pipeline')
        self.pipe_starts += 1

    def kill_pipeline(self):
        if self.pipe is not None:
            self.pipe.kill9()
            self.pipe = None

    def commits(self):
        with open(self.pipe.log_path if self.pipe else self.run.path('logs', 'pipeline.log'), 'rb') as f:
            return sum(1 for line in f if line.startswith(b'pipeline: commit'))

    def start_broker(self, b, failpoint=None):
        env = dict(os.environ)
        env.pop('GREGOR_FAILPOINT', None)
        if failpoint:
            env['GREGOR_FAILPOINT'] = failpoint
        b.start(same_ports=True, env=env, timeout=60)
        b.armed = failpoint

    def kill_restart(self, b, failpoint=None):
        b.kill9()
        self.start_broker(b, failpoint)

    def tend(self):
        """Restarts a broker that exited by itself (its failpoint: else a failure) and a pipeline that ended."""
        for b in self.bs:
            if b.proc is not None and b.proc.popen.poll() is not None:
                rc_ = b.proc.popen.returncode
                if rc_ == txnkit.FAILPOINT_EXIT and b.armed:
                    self.counts['failpoint fired'] += 1
                    name = b.armed.split(':')[0]
                    self.fired[name] = self.fired.get(name, 0) + 1
                    h.log(f'broker {b.node_id} exited at its failpoint {b.armed}')
                else:
                    tk.fail(f'broker {b.node_id} exits only at an armed failpoint',
                            f'status {rc_} (armed {b.armed}): {b.log_tail(8)}')
                self.start_broker(b)
        if self.pipe is not None and self.pipe.popen.poll() is not None:
            self.counts['pipeline exited'] += 1
            self.pipe = None
            self.start_pipeline()

    def sleep(self, s):
        end = time.monotonic() + s
        while time.monotonic() < end:
            self.tend()
            time.sleep(0.05)

    # -- faults
    def fault(self):
        kind = self.first.pop(0) if self.first else self.rng.choice(KINDS)
        coord = self.coordinator()
        if kind == 'pipeline':
            seen, end = self.commits(), time.monotonic() + 5
            while self.commits() == seen and time.monotonic() < end:
                self.sleep(0.02)
            time.sleep(self.rng.uniform(0.05, 0.3))
            self.counts['pipeline kill -9'] += 1
            self.kill_pipeline()
            self.start_pipeline()
            return 'pipeline kill -9'
        if coord is None:  # no leader known for the partition right now: the coordinator's kind waits
            kind = 'leader' if kind in ('coordinator', 'failpoint') else kind
        if kind == 'coordinator':
            self.counts['coordinator kill -9'] += 1
            self.kill_restart(coord)
            return f'coordinator kill -9 (broker {coord.node_id})'
        if kind == 'leader':
            away = [b for b in self.data_leaders() if b is not coord]
            if away:
                b = self.rng.choice(away)
                self.counts['data leader kill -9'] += 1
            else:
                b = self.rng.choice([b for b in self.bs if b is not coord])
                self.counts['follower kill -9 (no data leader away from the coordinator)'] += 1
            self.kill_restart(b)
            return f'leader kill -9 (broker {b.node_id}, coordinator {coord and coord.node_id})'
        if kind == 'failpoint':
            v = self.meta(TXN_TOPIC)[self.txn_p]
            nxt = [r for r in v[1] if r != coord.node_id and r in v[2]] or \
                [r for r in v[1] if r != coord.node_id]
            t = self.by_id[nxt[0]]
            if not self.points:
                self.points = list(FAILPOINTS)
                self.rng.shuffle(self.points)
            fp = '%s:%d' % (self.points.pop(0), self.rng.randint(1, 2))
            self.counts['failpoint armed'] += 1
            self.kill_restart(t, fp)
            end = time.monotonic() + 30
            while time.monotonic() < end and \
                    t.node_id not in self.meta(TXN_TOPIC).get(self.txn_p, (0, (), ()))[2]:
                self.sleep(0.1)
            back = t.node_id in self.meta(TXN_TOPIC).get(self.txn_p, (0, (), ()))[2]
            coord = self.coordinator()
            if coord is not None and coord is not t and coord.alive():
                self.counts['coordinator kill -9'] += 1
                self.kill_restart(coord)
            fired, end = self.counts['failpoint fired'], time.monotonic() + FIRE_WAIT_S
            while t.armed and time.monotonic() < end:  # until T (coordinating, armed) exits there, bounded
                self.sleep(0.1)
            return (f'failpoint {fp} on broker {t.node_id} (back in the ISR: {back}), then coordinator kill -9 '
                    f'(broker {coord and coord.node_id}); fired: {self.counts["failpoint fired"] > fired}')
        # pause: a leader of in, out or the transactional id's partition
        leaders = set(self.data_leaders()) | ({coord} if coord else set())
        b = self.rng.choice(sorted(leaders, key=lambda x: x.node_id) or self.bs)
        s = self.rng.uniform(1, 5)
        self.counts['pause'] += 1
        b.pause()
        try:
            time.sleep(s)
        finally:
            if b.alive():
                b.resume()
        return f'pause broker {b.node_id} for {s:.1f} s'

    # -- the run
    def committed(self):
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({'bootstrap.servers': self.bootstrap(), 'group.id': self.group, 'enable.auto.commit': False,
                      'log_level': 0})
        try:
            got = c.committed([TopicPartition(SRC, p) for p in range(PARTS)], timeout=5)
            return [tp.offset if tp.offset >= 0 else None for tp in got]
        except Exception:  # noqa: BLE001 - a broker restarting: asked again
            return [None] * PARTS
        finally:
            c.close()

    def pick_group(self, coord):
        """The consumer group: by default one whose group coordinator is another broker than the transaction
        coordinator (its TxnOffsetCommits verified at a remote transaction coordinator); with
        --group-with-coordinator one whose __consumer_offsets partition has the replicas of the transactional
        id's __transaction_state partition in the same order (the two coordinators together, before and after
        each election)."""
        def served():
            try:
                with k.Conn(self.bs[0].bootstrap, timeout=5) as c:
                    return c.request('FindCoordinator', 3, {'key': 'ctf', 'key_type': 0})['error_code'] == 0
            except Exception:  # noqa: BLE001
                return False
        h.wait_until(served, 40, f'{OFFSETS_TOPIC} made and a group coordinator', interval=0.2)
        offs = h.wait_until(lambda: (lambda v: v if v and len(v) == OFFSETS_PARTS and
                                     all(x[2] == (1, 2, 3) for x in v.values()) else None)(self.meta(OFFSETS_TOPIC)),
                            30, f'{OFFSETS_TOPIC} with full ISRs', interval=0.2)
        replicas = self.meta(TXN_TOPIC)[self.txn_p][1]
        for i in range(1000):
            g = f'ctf-group-{i}'
            v = offs[partition_for(g, OFFSETS_PARTS)]
            if (v[1] == replicas) if self.a.group_with_coordinator else (v[0] != coord.node_id):
                self.group = g
                tk.ok(f'group {g}: {OFFSETS_TOPIC}-{partition_for(g, OFFSETS_PARTS)} replicas {list(v[1])} '
                      f'(the transactional id\'s {TXN_TOPIC}-{self.txn_p}: {list(replicas)})')
                return offs
        raise RuntimeError(f'no group id among 1000 with the placement wanted ({replicas})')

    def remote_offsets(self, coord, offs):
        """One transaction of TXN_ID (before the pipeline's first start: it fences this producer) that only
        commits an offset of `in` for a group whose coordinator is another broker than the transaction
        coordinator: the TxnOffsetCommit is verified (KIP-890 part 1) at a remote transaction coordinator.
        It answered NOT_COORDINATOR while server/txns_verify.c gr_txns_check_txn_offset_commit asked only the
        in-process coordinator."""
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
        g = next(f'ctf-probe-{i}' for i in range(1000)
                 if offs[partition_for(f'ctf-probe-{i}', OFFSETS_PARTS)][0] != coord.node_id)
        gc = offs[partition_for(g, OFFSETS_PARTS)][0]
        pr = Producer({'bootstrap.servers': self.bootstrap(), 'transactional.id': TXN_ID, 'log_level': 2})
        c = Consumer({'bootstrap.servers': self.bootstrap(), 'group.id': g, 'enable.auto.commit': False,
                      'log_level': 2})
        name = (f'TxnOffsetCommit of group {g} at broker {gc}, transaction coordinator broker {coord.node_id}: '
                f'committed')
        try:
            pr.init_transactions(30)
            pr.begin_transaction()
            try:
                pr.send_offsets_to_transaction([TopicPartition(SRC, 0, 1)], c.consumer_group_metadata(), 30)
                pr.commit_transaction(30)
            except KafkaException as e:
                tk.fail(name, str(e))
                pr.abort_transaction(30)
                return
            tk.eq(name, [1], [tp.offset for tp in c.committed([TopicPartition(SRC, 0)], timeout=10)])
        finally:
            c.close()

    def create_topics(self, coord):
        others = [b.node_id for b in self.bs if b is not coord]
        assign = [[others[p % 2], others[(p + 1) % 2], coord.node_id] for p in range(PARTS)]
        with k.Conn(self.bs[0].bootstrap, timeout=40) as c:
            for t in (SRC, DST):
                r = c.request('CreateTopics', 7, {'topics': [{
                    'name': t, 'num_partitions': -1, 'replication_factor': -1,
                    'assignments': [{'partition_index': p, 'broker_ids': ids} for p, ids in enumerate(assign)],
                    'configs': [{'name': 'min.insync.replicas', 'value': '2'}]}],
                    'timeout_ms': 30000, 'validate_only': False}, timeout=40)
                tk.eq(f'CreateTopics {t}: replicas {assign} (led away from the coordinator, broker '
                      f'{coord.node_id})', 0, r['topics'][0]['error_code'])
        for t in (SRC, DST):
            h.wait_until(lambda: sorted((p, v[0], v[2]) for p, v in self.meta(t).items()) ==
                         [(p, ids[0], (1, 2, 3)) for p, ids in enumerate(assign)], 30,
                         f'{t} led by its first replicas with a full ISR', interval=0.2)

    def produce_input(self):
        from confluent_kafka import Producer
        p = Producer({'bootstrap.servers': self.bootstrap(), 'enable.idempotence': True, 'acks': 'all',
                      'linger.ms': 5, 'log_level': 2})
        seqs = [0] * self.a.keys
        for i in range(self.a.records):
            key = i % self.a.keys
            p.produce(SRC, key=('k%d' % key).encode(), value=('k%d:%d' % (key, seqs[key])).encode(),
                      partition=key % PARTS)
            seqs[key] += 1
        tk.eq(f'input: {self.a.records} records acknowledged (acks=all)', 0, p.flush(60))
        return {'k%d' % key: n for key, n in enumerate(seqs)}

    def go(self):
        a = self.a
        t0 = time.monotonic()
        b0 = self.bs[0]

        def found():
            try:
                with k.Conn(b0.bootstrap, timeout=5) as c:
                    r = c.request('FindCoordinator', 3, {'key': TXN_ID, 'key_type': 1})
                return r['node_id'] if r['error_code'] == 0 else None
            except Exception:  # noqa: BLE001
                return None
        node = h.wait_until(found, 40, f'FindCoordinator key type 1 for {TXN_ID}', interval=0.2)
        h.wait_until(lambda: (self.meta(TXN_TOPIC).get(self.txn_p) or (0, (), ()))[2] == (1, 2, 3), 30,
                     f'{TXN_TOPIC}-{self.txn_p} with a full ISR', interval=0.2)
        coord = self.by_id[node]
        tk.ok(f'{TXN_ID} is coordinated by broker {node} ({TXN_TOPIC}-{self.txn_p})')
        offs = self.pick_group(coord)
        self.create_topics(coord)
        self.remote_offsets(coord, offs)
        want = self.produce_input()
        ends = [txnkit.offsets(self.leader_addr(SRC, p), SRC, p)[0] for p in range(PARTS)]
        t_setup = time.monotonic()
        self.start_pipeline()
        end = time.monotonic() + a.duration
        while time.monotonic() < end:
            self.sleep(self.rng.uniform(1.0, 3.0))
            if time.monotonic() < end:
                what = self.fault()
                h.log(f'fault at {time.monotonic() - t_setup:.1f} s: {what}')
        t_faults = time.monotonic()
        for b in self.bs:
            if b.armed and b.alive():
                self.counts['armed broker disarmed for the drain'] += 1
                self.kill_restart(b)
        drain_end, last, moved = time.monotonic() + 120, None, time.monotonic()
        while time.monotonic() < drain_end:
            self.tend()
            got = self.committed()
            if got != last:
                last, moved = got, time.monotonic()
            if last == ends:
                break
            if time.monotonic() - moved > STALL_S:
                self.stalled()
                moved = time.monotonic()
            time.sleep(0.3)
        t_drain = time.monotonic()
        self.kill_pipeline()
        tk.eq(f'drain: the committed offsets of {SRC} reach its end', ends, last)
        self.aborted = txnkit.check_pipeline(self.bootstrap(), SRC, DST, PARTS, want, leader_of=self.leader_addr,
                                             coordinators=[b.bootstrap for b in self.bs])
        self.compare()
        fired = ', '.join(f'{n} {c}' for n, c in sorted(self.fired.items())) or 'none'
        print(f'   figure: seed {self.run.seed}: {a.records} records, {a.keys} keys, {a.per_txn} per transaction, '
              f'{a.duration:.0f} s of faults; faults {self.counts}; failpoints fired: {fired}; aborted records '
              f'seen {self.aborted}; pipeline started {self.pipe_starts} times, brokers '
              f'{[b.starts for b in self.bs]} times; setup {t_setup - t0:.1f} s, faults {t_faults - t_setup:.1f} s, '
              f'drain {t_drain - t_faults:.1f} s, checks {time.monotonic() - t_drain:.1f} s', flush=True)

    def stalled(self):
        size = os.path.getsize(self.pipe.log_path) if self.pipe else 0
        if self.pipe is not None:
            self.pipe.signal(signal.SIGUSR1)
            time.sleep(1)
            with open(self.pipe.log_path, errors='replace') as f:
                f.seek(size)
                dump = [line for line in f.read().splitlines() if not line.startswith('%')]
        else:
            dump = []
        tk.fail(f'the pipeline keeps committing (no stall of {STALL_S} s)', 'stack: ' + ' | '.join(dump[-12:]))
        self.kill_pipeline()
        self.start_pipeline()

    def compare(self):
        """Every partition of out and in at a full ISR, then the brokers stopped and the replicas compared."""
        views, hws = {}, {}
        for t in (DST, SRC):
            views[t] = h.wait_until(lambda: (lambda v: v if v and all(x[2] == (1, 2, 3) for x in v.values())
                                             else None)(self.meta(t)), 30, f'{t} at a full ISR', interval=0.2)
            hws[t] = {p: txnkit.offsets(self.by_id[v[0]].bootstrap, t, p)[0] for p, v in views[t].items()}
        for b in self.bs:
            b.kill9()
        for t in (DST, SRC):
            bad, notes = 0, []
            for p, v in sorted(views[t].items()):
                dirs = {r: os.path.join(self.by_id[r].data_dir, f'{t}-{p}') for r in v[1]}
                n, lines = rc.compare(dirs, hws[t][p])
                bad += n
                notes += [f'{t}-{p}: {line}' for line in lines]
            tk.eq(f'the replicas of every partition of {t} agree byte for byte up to the high watermark '
                  f'{sorted(hws[t].items())}', 0, bad)
            if bad:
                print('\n'.join('   ' + line for line in notes), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--deadline', type=float, default=None)
    ap.add_argument('--duration', type=float, default=30)
    ap.add_argument('--records', type=int, default=1500)
    ap.add_argument('--keys', type=int, default=12)
    ap.add_argument('--per-txn', type=int, default=20)
    ap.add_argument('--group-with-coordinator', action='store_true',
                    help='a group coordinated by the transaction coordinator\'s broker')
    a = ap.parse_args()
    deadline = a.deadline or a.duration + 360  # faults, a failpoint fault's waits, the 120 s drain, the checks
    t0 = time.monotonic()
    with h.Run(seed=a.seed, deadline_s=deadline, label='cluster-txn-faults') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        r = Run(run, etcd, bs, a)
        try:
            tk.section(f'seed {run.seed}: the exactly-once pipeline under kill -9, SIGSTOP and failpoints',
                       r.go)
        finally:
            r.kill_pipeline()
        if tk.failed:
            for b in bs:
                print(f'--- broker {b.node_id} ({b.dir})\n{b.log_tail(12)}', flush=True)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'RESULT {tk.passed} {tk.failed} {tk.xfailed}')  # for run_py (txn/faults.sh)
    xf = f', {tk.xfailed} expected-fail' if tk.xfailed else ''
    print(f'cluster-txn-faults: {tk.passed} passed, {tk.failed} failed{xf}', flush=True)
    sys.exit(1 if tk.failed else 0)


if __name__ == '__main__':
    main()
