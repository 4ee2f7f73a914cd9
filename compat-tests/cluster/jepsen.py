"""jepsen.py: the replication fault runs (issue #20, "Fault tests"): three brokers and etcd, each in a
network namespace of its own (harness.py: veth pairs on one bridge; if `ip netns add` fails the run fails,
there is no loopback fallback), idempotent acks=all producers writing while consumers read, a seeded
nemesis schedule, then healing, a drain, and the checker (queuecheck.py, Jepsen's queue workload) and the
replica comparison (replicacheck.py). Runs as root; everything it starts is undone at the end; every run
ends by itself under a hard deadline (the harness's watchdog kills it past `--deadline`).

The workload (on the host, reaching the brokers over the bridge): a topic of --partitions partitions with
replication factor --rf (default 3, as make test and make test-faults run it: the topic and the compacted one
have replication factor 3 and min.insync.replicas 2; --rf 1 runs one replica per partition, with
__consumer_offsets at one replica too); producers p0..p<S-1> strict
(librdkafka through confluent-kafka, acks=all, enable.idempotence) and one lenient producer (acks=1, not
idempotent: its losses are reported, not failed), each writing "p<k>-<n>" round-robin over the partitions at
a fixed rate; two consumers reading every partition from offset 0 while faults run.

The nemesis (one fault at a time, each healed after 2-10 s, 1-4 s apart, drawn from the seed alone):
  kill      kill -9 a broker, restart it on its data dir and ports (sometimes with its wall clock offset by
            libfaketime when Debian's faketime package works; CLOCK_MONOTONIC is left alone);
  pause     SIGSTOP a broker, then SIGCONT;
  cut-peers the leader of a partition cut from the other brokers: two-way, or one way either direction;
  cut-etcd  a broker (the leader of a partition) cut from etcd only, not from clients or other brokers:
            two-way, or one way either direction;
  split     majority/minority: one broker on one side, two on the other, etcd on either side;
  etcd-kill kill -9 etcd, restart it on its data;  etcd-pause SIGSTOP etcd, then SIGCONT;
  etcd-stop SIGTERM etcd, start it again. With --etcd-members 3 (three members, each in a namespace of its
            own, the brokers given all three endpoints) each of these takes one member away, drawn from the
            seed (never two at once): etcd member loss, the quorum kept;
  disk-full (issue #24) a broker's log dir (a DISK_MB tmpfs per broker when this nemesis runs) filled by a
            ballast file to 0, 4 KiB or 64 KiB left, deleted after the fault: its appends fail with ENOSPC
            (produces answer KAFKA_STORAGE_ERROR, a follower retries after its back-off), nothing may be lost;
  wipe      (issue #24) kill -9 a broker, delete everything in its log dir, start it: it must fetch every
            replica again as a follower, losing no acknowledged record.
--nemeses chooses the groups: kill, stop (pause), partition (cut-peers, cut-etcd, split), etcd (the three
etcd kinds), diskfull, wipe, or all; the default is the first four, the set before issue #24, whose seeds
keep their schedules (the choices added since come from a second generator).
The schedule is printed before the run and each fault and heal is printed as it happens (the timeline).

After --duration seconds of faults everything is healed and the producers keep writing --drain seconds;
then they flush, and a fresh consumer reads every partition from offset 0 to its high watermark. Checked per
seed (queuecheck.py): lost, duplicated, unordered, never-sent, moved, inconsistent and live-missing records
all 0; no fatal producer error; no broker or etcd that exited by itself (a crash is noted before each fault
and at the end, and the process started again so that the checker still runs); the final read complete.
Reported: sent / acknowledged / read, acks=1 losses, unavailability (per partition the longest stretch of
the fault window without an acks=-1 acknowledgement).

The leader cut from etcd (cut-etcd): its lease runs out, the controller elects another ISR member (leader
epoch + 1) and the followers fetch from the new leader. The cut leader's high watermark passes a record
only once every member of its ISR holds it, and it cannot shrink its ISR without etcd; so an acks=-1 record
it acknowledged after its followers moved is one the new leader may lack: if it did, the final read would
not hold that record at its acknowledged offset (the new leader's log is the partition's history from then
on), and it would count as lost (absent) or moved (read elsewhere). As every acknowledged record is
checked, lost 0 and moved 0 cover the case whatever the timing. check_deposed also names such records on
their own: strict records acknowledged on a partition from the moment the leader watch (Metadata polled on
every broker every 0.25 s) saw its leadership move from the cut broker to another, until the heal plus the
session timeout plus 2 s, absent from the final read at their offset (queuecheck.deposed_acks); it prints
how many partitions moved (with RF 1 a partition only goes offline, so none do).

Then the replica comparison (replicacheck.py) of every partition of the topic and of a compacted topic
written after the drain: each partition's high watermark is asked of its leader (ListOffsets), the test
waits (at most REPLICA_WAIT_S) until every replica's partition directory holds batches up to it, stops the
brokers and compares the replicas (byte for byte; latest value per key for the compacted topic); a replica
still short after the wait fails the seed (even if it catches up while the brokers stop), and the count is
reported per seed as "divergent N" and must be 0 (with RF 1: one replica, nothing compared, said so).
Last, the high watermark invariant (issue #20: a leader's high watermark <= the log end offset of every
member of its maximal ISR, checked by the broker at every change, partition/partition.h
gr_partitions_hw_violations): its ERROR lines are counted in every broker log of the seed, reported as
"hw-violations N", and must be 0 (a debug build also aborts on one: a crash).
Before the runs: the checker fed a synthetic history with one lost, one duplicated, one reordered and one
never-sent record must report each; after the first run: the replica comparison on copies of a real
partition directory (identical, a different segment split, a corrupted batch, a truncated batch; a
compacted topic's directory with an older record removed, and with a changed latest value) must agree or
disagree as it should.
Ends with `cluster-jepsen: N passed, N failed`; exit status 1 on any failure. --keep keeps each seed's run
directory (broker and etcd logs under logs/, the brokers' data) and prints its path.
Usage: jepsen.py [--seeds 1,2,3 | --seed N] [--duration 60] [--drain 20] [--rf 3] [--partitions 6]
                 [--rate 40] [--deadline SECONDS per seed] [--keep] [--nemeses kill,stop,partition,etcd |
                 all] [--etcd-members 1 | 3 | 1,3 (taken in turn per seed)] [--disk-mb 256]
Read next: queuecheck.py, replicacheck.py, harness.py, faults.py.
"""
import argparse
import os
import random
import shutil
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import queuecheck as qc  # noqa: E402
import replicacheck as rc  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, section  # noqa: E402

SESSION_MS = 3000
PREFIX = '/gregor'
TOPIC = 'jepsen'
KV_TOPIC = 'jepsen-kv'
STRICT_PRODUCERS = 3
MSG_TIMEOUT_MS = 120000   # longer than any fault chain: a record is retried until it is stored
FLUSH_S = 60
FINAL_READ_S = 60
NOTES_PER_PARTITION = 5  # lines of the replica comparison printed per partition
REPLICA_WAIT_S = 60  # bound on the wait for every replica to reach the high watermark after the run
HW_VIOLATION = b'high watermark invariant violated'  # the broker's ERROR line (partition/partition.c)
FAULT_MIN_S, FAULT_MAX_S = 2.0, 10.0
GAP_MIN_S, GAP_MAX_S = 1.0, 4.0
CLOCK_OFFSETS_S = (-300, -60, 60, 300, 3600)
FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'
KINDS = (('kill', 3), ('pause', 2), ('cut-peers', 2), ('cut-etcd', 3), ('split', 2), ('etcd-kill', 1),
         ('etcd-pause', 1), ('etcd-stop', 1), ('disk-full', 2), ('wipe', 2))
# --nemeses names groups of kinds; the default is the set before issue #24 (whose seeds keep their schedules)
NEMESES = {'kill': ('kill',), 'stop': ('pause',), 'partition': ('cut-peers', 'cut-etcd', 'split'),
           'etcd': ('etcd-kill', 'etcd-pause', 'etcd-stop'), 'diskfull': ('disk-full',), 'wipe': ('wipe',)}
DEFAULT_NEMESES = 'kill,stop,partition,etcd'
DISK_MB = 256          # each broker's log dir tmpfs when diskfull runs (a run writes a few MiB per broker)
DISK_SLACK = (0, 0, 4096, 65536)  # bytes a disk-full fault leaves free: none, or a partial batch's worth
figures = []


def out(line):
    print(line, flush=True)


def overrides(etcd, node, rf):
    """The brokers' settings; an RF 1 run keeps __consumer_offsets at one replica too (a cluster's default is
    Kafka's 3)."""
    o = [f'gregor.metadata.etcd.endpoints={etcd.endpoints(from_node=node)}',
         f'gregor.metadata.etcd.prefix={PREFIX}', f'broker.session.timeout.ms={SESSION_MS}',
         'broker.heartbeat.interval.ms=500', 'auto.create.topics.enable=false']
    if rf == 1:
        o.append('offsets.topic.replication.factor=1')
    return o


def faketime_works():
    """True when libfaketime (Debian's faketime package) shifts the wall clock of a child by an offset."""
    if not os.path.exists(FAKETIME_LIB):
        return False
    env = dict(os.environ, LD_PRELOAD=FAKETIME_LIB, FAKETIME='+3600s', FAKETIME_DONT_FAKE_MONOTONIC='1')
    cp = h.subprocess.run(['date', '+%s'], capture_output=True, text=True, env=env, timeout=10)
    try:
        return abs(int(cp.stdout) - time.time() - 3600) < 60
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------------
# The schedule: drawn ahead from the seed alone, so a seed always means the same faults.

def schedule(seed, duration, partitions, clock_ok, allowed=None,
             etcd_members=1):
    """[{'at': s, 'kind': str, 'dur': s, ...choices}] for `duration` seconds of faults, one at a time, of the
    kinds in `allowed` (None: the default groups). The choices added by issue #24 (which etcd member, how
    much space a full disk leaves) come from a second generator, so that the default groups' schedules are
    the ones they were."""
    rng = random.Random(f'jepsen-nemesis-{seed}')
    rng2 = random.Random(f'jepsen-nemesis-extra-{seed}')
    allowed = set(allowed if allowed is not None else kinds_of(DEFAULT_NEMESES))
    kinds = [kd for kd, w in KINDS for _ in range(w) if kd in allowed]
    plan, t = [], rng.uniform(GAP_MIN_S, GAP_MAX_S)
    while t < duration - FAULT_MIN_S:
        f = {'at': round(t, 1), 'kind': rng.choice(kinds), 'dur': round(rng.uniform(FAULT_MIN_S, FAULT_MAX_S), 1),
             'broker': rng.randrange(3), 'partition': rng.randrange(partitions), 'way': rng.choice(('both', 'to', 'from')),
             'etcd_side': rng.choice(('majority', 'minority')), 'clock': None}
        if f['kind'] == 'kill' and clock_ok and rng.random() < 0.4:
            f['clock'] = rng.choice(CLOCK_OFFSETS_S)
        f['member'], f['members'] = rng2.randrange(etcd_members), etcd_members
        f['slack'] = rng2.choice(DISK_SLACK)
        f['dur'] = min(f['dur'], max(FAULT_MIN_S, duration - t))
        plan.append(f)
        t += f['dur'] + rng.uniform(GAP_MIN_S, GAP_MAX_S)
    return plan


def describe(f):
    s = f'+{f["at"]:5.1f} s  {f["kind"]:10s} {f["dur"]:4.1f} s'
    if f['kind'] in ('kill', 'pause'):
        s += f'  broker #{f["broker"] + 1}' + (f', restart with clock {f["clock"]:+d} s' if f['clock'] else '')
    elif f['kind'] in ('cut-peers', 'cut-etcd'):
        s += f'  the leader of partition {f["partition"]}, {f["way"]}'
    elif f['kind'] == 'split':
        s += f'  minority broker #{f["broker"] + 1}, etcd with the {f["etcd_side"]}'
    elif f['kind'] == 'disk-full':
        s += f'  broker #{f["broker"] + 1}\'s log dir, {f["slack"]} bytes left'
    elif f['kind'] == 'wipe':
        s += f'  broker #{f["broker"] + 1}: kill -9, its log dir emptied, started'
    elif f['kind'].startswith('etcd-') and f.get('members', 1) > 1:
        s += f'  member m{f["member"]} of {f["members"]}'
    return s


def kinds_of(nemeses):
    """The fault kinds of a --nemeses list ('all' or group names of NEMESES, comma-separated; 'pause' is
    'stop'). Raises ValueError naming an unknown group."""
    names = [x.strip() for x in nemeses.split(',') if x.strip()]
    if names == ['all']:
        names = list(NEMESES)
    out_ = []
    for n in names:
        n = 'stop' if n == 'pause' else n
        if n not in NEMESES:
            raise ValueError(f'unknown nemesis {n!r}: want all or some of {",".join(NEMESES)}')
        out_ += NEMESES[n]
    return out_


# ---------------------------------------------------------------------------------------------------
# The nemesis: applies one planned fault, waits, heals; heal_all() undoes whatever is left.

class Nemesis:
    def __init__(self, run, etcd, bs, partitions, t0):
        self.run, self.etcd, self.bs, self.partitions, self.t0 = run, etcd, bs, partitions, t0
        self.enodes = [m.node for m in etcd.members]
        self.done = []     # the timeline: (seconds since t0, text)
        self.clock = {}    # broker id -> its wall clock offset now (s)
        self.down = set()  # what the nemesis stopped on purpose: broker ids, ('etcd', member index)
        self.ballast = None  # the disk-full fault's file while it exists
        self.etcd_cuts = []  # (broker id, cut time, heal time) of each cut-etcd fault
        self.crashes = []  # processes that exited by themselves

    def say(self, text):
        t = time.monotonic() - self.t0
        self.done.append((t, text))
        out(f'   [+{t:6.1f} s] {text}')

    def leader_of(self, f):
        """The broker leading partition f['partition'] now (from any live broker's Metadata), or the planned
        broker when none answers."""
        p = f['partition']
        for b in self.bs:
            try:
                with k.Conn(b.bootstrap, timeout=2) as c:
                    md = k.metadata(c, [TOPIC], version=12, allow_auto=False)
                lid = md['topics'][0]['partitions'][p]['leader_id'] if md['topics'][0]['error_code'] == 0 else -1
                for x in self.bs:
                    if x.node_id == lid:
                        return x, p
            except Exception:  # noqa: BLE001 - a broker down or cut: ask the next
                continue
        return self.bs[f['broker']], p

    def apply(self, f):
        self.check_alive()
        getattr(self, 'f_' + f['kind'].replace('-', '_'))(f)

    def check_alive(self):
        """Notes every broker or etcd that exited although the nemesis did not stop it (a crash: the run
        fails; heal_all starts it again so that the checker still runs)."""
        procs = [(b.node_id, f'broker {b.node_id}', b.proc) for b in self.bs]
        procs += [(('etcd', i), self.ename(i), m.proc) for i, m in enumerate(self.etcd.members)]
        for key, name, proc in procs:
            if key not in self.down and not proc.alive() and not any(c[0] == name for c in self.crashes):
                self.crashes.append((name, proc.popen.poll(), proc.log_tail(10)))
                self.say(f'{name} exited by itself (status {proc.popen.poll()})')

    def ename(self, i):
        return 'etcd' if len(self.etcd.members) == 1 else f'etcd member m{i}'

    def f_kill(self, f):
        b = self.bs[f['broker']]
        self.down.add(b.node_id)
        b.kill9()
        self.say(f'kill -9 broker {b.node_id}')
        time.sleep(f['dur'])
        self.restart(b, f['clock'])
        self.down.discard(b.node_id)

    def restart(self, b, clock):
        env = None
        if clock:
            env = dict(os.environ, LD_PRELOAD=FAKETIME_LIB, FAKETIME=f'{clock:+d}s', FAKETIME_DONT_FAKE_MONOTONIC='1')
        b.start(same_ports=True, timeout=30, env=env)
        self.clock[b.node_id] = clock or 0
        self.say(f'restarted broker {b.node_id}' + (f' with its wall clock {clock:+d} s' if clock else ''))

    def f_pause(self, f):
        b = self.bs[f['broker']]
        b.pause()
        self.say(f'SIGSTOP broker {b.node_id}')
        time.sleep(f['dur'])
        b.resume()
        self.say(f'SIGCONT broker {b.node_id}')

    def _cut(self, pairs, way, what, dur):
        """pairs: [(a, b)]; way 'both', 'to' (a->b dropped) or 'from' (b->a dropped)."""
        for a, b in pairs:
            if way == 'from':
                a, b = b, a
            self.run.cut(a, b, one_way=way != 'both')
        self.say(f'cut {what} ({"two-way" if way == "both" else "one-way, " + way})')
        time.sleep(dur)
        self.run.network().heal_all()
        self.say(f'healed {what}')

    def f_cut_peers(self, f):
        b, p = self.leader_of(f)
        others = [o for o in self.bs if o is not b]
        self._cut([(b.node, o.node) for o in others], f['way'],
                  f'broker {b.node_id} (leads partition {p}) <-> brokers {[o.node_id for o in others]}', f['dur'])

    def f_cut_etcd(self, f):
        b, p = self.leader_of(f)
        t_cut = time.monotonic()
        self._cut([(b.node, e) for e in self.enodes], f['way'], f'broker {b.node_id} (leads partition {p}) <-> etcd',
                  f['dur'])
        self.etcd_cuts.append((b.node_id, t_cut, time.monotonic()))

    def f_split(self, f):
        minority = [self.bs[f['broker']].node]
        majority = [o.node for o in self.bs if o.node is not minority[0]]
        (majority if f['etcd_side'] == 'majority' else minority).extend(self.enodes)
        name = lambda ns: ns.label  # noqa: E731
        self._cut([(a, b) for a in minority for b in majority], 'both',
                  f'{[name(n) for n in minority]} | {[name(n) for n in majority]}', f['dur'])

    # With one etcd member these take etcd away whole; with three (--etcd-members 3) they take one member
    # (f['member']) away and the other two keep the quorum: never two at once, as faults never overlap.
    def f_etcd_kill(self, f):
        i = f['member'] % len(self.etcd.members)
        self.down.add(('etcd', i))
        self.etcd.kill9(i)
        self.say(f'kill -9 {self.ename(i)}')
        time.sleep(f['dur'])
        self.etcd.restart(i)
        self.down.discard(('etcd', i))
        self.say(f'restarted {self.ename(i)}')

    def f_etcd_pause(self, f):
        i = f['member'] % len(self.etcd.members)
        self.etcd.pause(i)
        self.say(f'SIGSTOP {self.ename(i)}')
        time.sleep(f['dur'])
        self.etcd.resume(i)
        self.say(f'SIGCONT {self.ename(i)}')

    def f_etcd_stop(self, f):
        i = f['member'] % len(self.etcd.members)
        self.down.add(('etcd', i))
        self.etcd.stop(i)
        self.say(f'SIGTERM {self.ename(i)}')
        time.sleep(f['dur'])
        self.etcd.restart(i)
        self.down.discard(('etcd', i))
        self.say(f'started {self.ename(i)} again')

    def f_disk_full(self, f):
        """Fills the tmpfs holding broker f['broker']'s log dir with a ballast file (leaving f['slack'] bytes,
        so that some appends fail part-way), holds it f['dur'] s, then deletes it."""
        b = self.bs[f['broker']]
        disk = os.path.dirname(b.data_dir)
        self.ballast = os.path.join(disk, 'ballast')
        size = fill(self.ballast, f['slack'])
        st = os.statvfs(disk)
        self.say(f'filled broker {b.node_id}\'s log dir: ballast {size >> 20} MiB, '
                 f'{st.f_bavail * st.f_frsize} bytes left')
        time.sleep(f['dur'])
        self.free_disk()

    def free_disk(self):
        if self.ballast and os.path.exists(self.ballast):
            os.unlink(self.ballast)
            self.say(f'deleted the ballast {os.path.relpath(self.ballast, self.run.dir)}')
        self.ballast = None

    def f_wipe(self, f):
        """kill -9 broker f['broker'], empty its log dir (as a replaced disk), wait f['dur'] s, start it: it
        must fetch every partition again as a follower."""
        b = self.bs[f['broker']]
        self.down.add(b.node_id)
        b.kill9()
        gone = empty_dir(b.data_dir)
        self.say(f'kill -9 broker {b.node_id}, its log dir emptied ({gone} entries removed)')
        time.sleep(f['dur'])
        self.restart(b, None)
        self.down.discard(b.node_id)

    def heal_all(self):
        """Undoes everything: cuts healed, etcd and every broker running and not stopped (a broker restarted
        with a clock offset keeps it: that is not a fault of the network or of a process)."""
        self.check_alive()
        self.run.network().heal_all()
        self.free_disk()
        for i, m in enumerate(self.etcd.members):
            if m.proc.alive() and h.proc_state(m.proc.pid) in ('T', 't'):
                self.etcd.resume(i)
            if not m.proc.alive():
                self.etcd.restart(i)
        for b in self.bs:
            if b.alive() and h.proc_state(b.proc.pid) in ('T', 't'):
                b.resume()
            if not b.alive():
                self.restart(b, None)
        self.down.clear()
        self.say('healed: no cut, etcd and every broker running')


def fill(path, slack):
    """Creates `path` taking all the free space of its file system but `slack` bytes (fallocate; retried
    while the broker writes meanwhile). Returns its size in bytes."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        size = 0
        for _ in range(20):
            st = os.statvfs(path)
            want = st.f_bavail * st.f_frsize - slack
            if want <= 0:
                break
            try:
                os.posix_fallocate(fd, size, want)
                size += want
            except OSError:
                time.sleep(0.01)  # the broker took some space between statvfs and fallocate: again
        return size
    finally:
        os.close(fd)


def empty_dir(d):
    """Removes everything inside d (d itself may be a mount point). Returns how many entries it held."""
    names = os.listdir(d) if os.path.isdir(d) else []
    for n in names:
        p = os.path.join(d, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    return len(names)


# ---------------------------------------------------------------------------------------------------
# The workload.

class Workload:
    """The producers and the live consumers, each on its own thread, filling a qc.History."""

    def __init__(self, bs, partitions, rate):
        self.boot = ','.join(b.bootstrap for b in bs)
        self.partitions, self.rate = partitions, rate
        self.hist = qc.History()
        self.stop_producing = threading.Event()
        self.stop_reading = threading.Event()
        self.fatal = []
        self.unresolved = 0
        self.threads = []
        for kk in range(STRICT_PRODUCERS + 1):
            self.hist.producer(kk, 'strict' if kk < STRICT_PRODUCERS else 'lenient')
            self.threads.append(threading.Thread(target=self._produce, args=(kk,), daemon=True))
        for i in range(2):
            self.threads.append(threading.Thread(target=self._consume, args=(i,), daemon=True))

    def start(self):
        for t in self.threads:
            t.start()

    def _producer(self, kk):
        from confluent_kafka import Producer
        strict = kk < STRICT_PRODUCERS

        def on_error(err):
            if err.fatal():
                self.fatal.append(f'p{kk}: {err}')
        conf = {'bootstrap.servers': self.boot, 'acks': 'all' if strict else 1,
                'enable.idempotence': strict, 'linger.ms': 5, 'message.timeout.ms': MSG_TIMEOUT_MS,
                'topic.metadata.refresh.interval.ms': 500, 'retry.backoff.ms': 100,
                'socket.timeout.ms': 10000, 'log_level': 2, 'error_cb': on_error}
        debug_dir = os.environ.get('JEPSEN_RDK_DEBUG_DIR')  # by hand: librdkafka's eos/msg/protocol log per producer
        if debug_dir and strict:
            import logging
            lg = logging.getLogger(f'rdk-p{kk}')
            lg.setLevel(logging.DEBUG)
            fh = logging.FileHandler(os.path.join(debug_dir, f'rdk-p{kk}.log'))
            fh.setFormatter(logging.Formatter('%(asctime)s %(message)s'))
            lg.addHandler(fh)
            conf.update({'debug': 'eos,msg,protocol,broker', 'log_level': 7})
            return Producer(conf, logger=lg)
        return Producer(conf)

    def _produce(self, kk):
        p = self._producer(kk)
        hist = self.hist

        def cb(err, msg):
            if err:
                hist.fail(msg.value().decode(), str(err))
            else:
                hist.ack(msg.value().decode(), msg.partition(), msg.offset(), time.monotonic())
        n, t_next = 0, time.monotonic()
        try:
            while not self.stop_producing.is_set() and not self.fatal:
                now = time.monotonic()
                if now < t_next:
                    p.poll(t_next - now)
                    continue
                part = (n + kk) % self.partitions
                try:
                    p.produce(TOPIC, value=f'p{kk}-{n}'.encode(), partition=part, on_delivery=cb)
                except BufferError:
                    p.poll(0.05)
                    continue
                hist.send(kk, n, part, time.monotonic())
                n += 1
                t_next = max(t_next + 1.0 / self.rate, time.monotonic() - 1.0)
        except Exception as e:  # noqa: BLE001 - a fatal producer error raises here
            self.fatal.append(f'p{kk}: {type(e).__name__}: {e}')
        left = p.flush(FLUSH_S)
        with hist.lock:
            self.unresolved += left

    def _consume(self, i):
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({'bootstrap.servers': self.boot, 'group.id': f'jepsen-live-{i}', 'enable.auto.commit': False,
                      'auto.offset.reset': 'earliest', 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(self.partitions)])
        try:
            while not self.stop_reading.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    self.hist.read_live(m.partition(), m.offset(), m.value().decode('utf-8', 'replace'))
        finally:
            c.close()

    def finish(self):
        self.stop_producing.set()
        for t in self.threads[:STRICT_PRODUCERS + 1]:
            t.join(FLUSH_S + 10)
        self.stop_reading.set()
        for t in self.threads[STRICT_PRODUCERS + 1:]:
            t.join(10)


class LeaderWatch:
    """Polls TOPIC's Metadata on every broker every POLL_S on a thread and keeps, per partition, each
    change of (leader, leader epoch) with its time, taking the highest leader epoch any broker shows."""
    POLL_S = 0.25

    def __init__(self, bs, partitions):
        self.bs, self.partitions = bs, partitions
        self.changes = {p: [] for p in range(partitions)}  # p -> [(monotonic time, leader, epoch)]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _view(self, b):
        try:
            with k.Conn(b.bootstrap, timeout=1) as c:
                t = k.metadata(c, [TOPIC], version=12, allow_auto=False)['topics'][0]
        except Exception:  # noqa: BLE001 - a broker down, paused or cut: the others answer
            return {}
        if t['error_code'] != 0:
            return {}
        return {p['partition_index']: (p['leader_id'], p['leader_epoch']) for p in t['partitions']}

    def _loop(self):
        while not self.stop.is_set():
            best = {}
            for b in self.bs:
                for p, (lid, ep) in self._view(b).items():
                    if p in self.changes and (p not in best or ep > best[p][1]):
                        best[p] = (lid, ep)
            now = time.monotonic()
            for p, le in best.items():
                ch = self.changes[p]
                if not ch or ch[-1][1:] != le:
                    ch.append((now,) + le)
            self.stop.wait(self.POLL_S)

    def finish(self):
        self.stop.set()
        self.thread.join(10)

    def moved_windows(self, etcd_cuts, grace_s):
        """[(partition, t_moved, t_end)] for each cut-etcd fault (broker, t_cut, t_heal) and each partition
        that broker led at t_cut whose leadership then went to another broker before t_heal; t_end is t_heal
        + grace_s (the cut leader may answer until it learns it lost its lease)."""
        out = []
        for bid, t_cut, t_heal in etcd_cuts:
            for p, ch in self.changes.items():
                before = [c for c in ch if c[0] <= t_cut]
                if not before or before[-1][1] != bid:
                    continue
                moved = [c for c in ch if t_cut < c[0] <= t_heal and c[1] not in (bid, -1)]
                if moved:
                    out.append((p, moved[0][0], t_heal + grace_s))
        return out


def final_read(bs, partitions, timeout=FINAL_READ_S):
    """A fresh consumer reads every partition from offset 0 to its high watermark (asked first). Returns
    ({partition: [(offset, value)]}, {partition: high watermark}, complete?)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'jepsen-final',
                  'enable.auto.commit': False, 'auto.offset.reset': 'earliest', 'enable.partition.eof': True,
                  'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
    end = time.monotonic() + timeout
    hws = {}
    try:
        for p in range(partitions):
            while p not in hws:
                try:
                    hws[p] = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
                except Exception:  # noqa: BLE001 - retried until the deadline
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.5)
        got = {p: [] for p in range(partitions)}
        pos = {p: 0 for p in range(partitions)}
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        while any(pos[p] < hws[p] for p in pos) and time.monotonic() < end:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got[m.partition()].append((m.offset(), m.value().decode('utf-8', 'replace')))
            pos[m.partition()] = max(pos[m.partition()], m.offset() + 1)
    finally:
        c.close()
    return got, hws, all(pos[p] >= hws[p] for p in pos)


def create_topic(b, name, partitions, rf, configs=None):
    cfg = dict(configs or {})
    if rf > 1:
        cfg.setdefault('min.insync.replicas', '2')
    with k.Conn(b.bootstrap, timeout=40) as c:
        r = c.request('CreateTopics', 7, {
            'topics': [{'name': name, 'num_partitions': partitions, 'replication_factor': rf,
                        'configs': [{'name': kk, 'value': v} for kk, v in cfg.items()]}],
            'timeout_ms': 30000, 'validate_only': False}, timeout=40)
    return r['topics'][0]


def leaders(b, topic):
    """{partition: (leader, replicas)} of topic in b's Metadata, or None."""
    try:
        with k.Conn(b.bootstrap, timeout=3) as c:
            md = k.metadata(c, [topic], version=12, allow_auto=False)
    except Exception:  # noqa: BLE001 - a broker restarting
        return None
    t = md['topics'][0]
    if t['error_code'] != 0:
        return None
    return {p['partition_index']: (p['leader_id'], list(p['replica_nodes'])) for p in t['partitions']}


def all_led(bs, topic, partitions, timeout=30):
    """Waits until every broker's Metadata shows every partition of topic with a live leader; returns the
    first broker's view."""
    ids = {b.node_id for b in bs}

    def led():
        views = [leaders(b, topic) for b in bs]
        if all(v is not None and len(v) == partitions and all(v[p][0] in ids for p in v) for v in views):
            return views[0]
        return None
    return h.wait_until(led, timeout, f'every partition of {topic} led on every broker', interval=0.2)


# ---------------------------------------------------------------------------------------------------

def compare_replicas(bs, view, hws, topic, compacted=False):
    """Replica comparison of every partition of topic (brokers stopped). view: {partition: (leader,
    replicas)}; hws: {partition: high watermark}. Returns (divergences, notes)."""
    by_id = {b.node_id: b for b in bs}
    bad, notes = 0, []
    for p, (_, replicas) in sorted(view.items()):
        dirs = {r: os.path.join(by_id[r].data_dir, f'{topic}-{p}') for r in replicas if r in by_id}
        n, lines = rc.compare(dirs, hws[p], compacted)
        bad += n
        notes += [f'{topic}-{p}: {line}' for line in lines]
    return bad, notes


def start_cluster(run, seed, a, members):
    """etcd (one member, or `members` each in a namespace of its own, the brokers given every endpoint) and
    three brokers, each in a namespace, each log dir on a DISK_MB tmpfs of its own when the disk-full
    nemesis runs; the workload's topic and the compacted one, led."""
    run.network()
    if members == 1:
        etcd = run.etcd(1, node=run.netns('etcd'))
    else:
        etcd = run.etcd(members, nodes=[run.netns(f'etcd-{i + 1}') for i in range(members)])
    bs = run.brokers(3, netns=True, overrides=lambda i, node: overrides(etcd, node, a.rf), start=False)
    for b in bs:
        if 'disk-full' in a.kinds:
            b.data_dir = os.path.join(run.tmpfs(os.path.join(b.dir, 'disk'), a.disk_mb), 'data')
        b.start()
    r = create_topic(bs[0], TOPIC, a.partitions, a.rf)
    eq(f'seed {seed}: CreateTopics {TOPIC} ({a.partitions} partitions, replication factor {a.rf})', 0,
       r['error_code'])
    r = create_topic(bs[0], KV_TOPIC, 3, a.rf, {'cleanup.policy': 'compact'})
    eq(f'seed {seed}: CreateTopics {KV_TOPIC} (compacted)', 0, r['error_code'])
    all_led(bs, TOPIC, a.partitions)
    return etcd, bs


def run_faults(run, etcd, bs, plan, a):
    """The workload and the leader watch under the nemesis, then healed for the drain; returns (workload,
    watch, nemesis, t0, t1): the fault window's start and the drain's end."""
    wl = Workload(bs, a.partitions, a.rate)
    wl.start()
    watch = LeaderWatch(bs, a.partitions)
    t0 = time.monotonic()
    nem = Nemesis(run, etcd, bs, a.partitions, t0)
    try:
        try:
            for f in plan:
                time.sleep(max(0.0, t0 + f['at'] - time.monotonic()))
                nem.apply(f)
        finally:
            nem.heal_all()
        time.sleep(a.drain)
    except BaseException:
        wl.stop_producing.set()  # the threads end within their flush; the run is torn down
        wl.stop_reading.set()
        watch.stop.set()
        raise
    wl.finish()
    watch.finish()
    t1 = time.monotonic()
    nem.check_alive()
    for name, status, tail in nem.crashes:
        out(f'   {name} exited by itself (status {status}); its log ends:\n{tail}')
    return wl, watch, nem, t0, t1


def check_history(seed, plan, a, wl, res):
    """The checker's verdict on one seed (res: queuecheck.check's result); returns the seed's figure line."""
    out(f'   seed {seed}: {len(plan)} faults, {a.duration:.0f} s + {a.drain:.0f} s drain; '
        f'{wl.unresolved} records unresolved at the end of the flush')
    qc.report(res, out)
    check(f'seed {seed}: records acknowledged with acks=-1 ({res["acked"]})', res['acked'] > 0)
    for key in qc.MUST_BE_ZERO:
        eq(f'seed {seed}: {key.replace("_", "-")}', 0, res[key])
    eq(f'seed {seed}: fatal producer errors', [], wl.fatal[:3])
    worst = max(res['unavailability'].values())[0] if res['unavailability'] else 0.0
    return (f'seed {seed}: {len(plan)} faults; sent {res["sent"]}, acked {res["acked"]}+{res["acked_acks1"]} '
            f'(acks=1), read {res["read"]}, lost {res["lost"]}, duplicated {res["duplicated"]}, acks=1 lost '
            f'{res["acks1_lost"]}; longest unavailability {worst:.1f} s')


def check_deposed(seed, wl, watch, nem, rf):
    """The leader-cut-from-etcd case: no acks=-1 record acknowledged by the cut leader after its partition
    moved to another broker (queuecheck.deposed_acks)."""
    windows = watch.moved_windows(nem.etcd_cuts, SESSION_MS / 1000 + 2)
    changes = sum(max(0, len(ch) - 1) for ch in watch.changes.values())
    offline = sum(1 for ch in watch.changes.values() for c in ch if c[1] == -1)
    out(f'   leadership: {changes} changes seen in Metadata ({offline} to offline); leader cut from etcd: '
        f'{len(nem.etcd_cuts)} cuts, {len(windows)} partitions moved to another leader meanwhile' +
        ('' if windows or rf > 1 else ' (with one replica a partition only goes offline)'))
    eq(f'seed {seed}: acks=-1 records acknowledged by a leader cut from etcd after its partition moved',
       [], qc.deposed_acks(wl.hist, windows)[:5])


def one_seed(seed, a, st, members=1):
    plan = schedule(seed, a.duration, a.partitions, st['clock_ok'], a.kinds, members)
    failed0 = testkit.failed
    with h.Run(seed=seed, deadline_s=a.deadline, keep=a.keep or None, label=f'cluster-jepsen seed {seed}') as run:
        etcd, bs = start_cluster(run, seed, a, members)
        out(f'   nemesis schedule (seed {seed}, {a.duration:.0f} s of faults, nemeses {a.nemeses}, etcd of '
            f'{members} member{"s" if members > 1 else ""}, clock faults '
            f'{"on" if st["clock_ok"] else "off: libfaketime does not work here"}):')
        for f in plan:
            out(f'     {describe(f)}')
        counts = {}
        for f in plan:
            counts[f['kind']] = counts.get(f['kind'], 0) + 1
        out('   faults by kind: ' + ', '.join(f'{kd} {n}' for kd, n in sorted(counts.items())))
        wl, watch, nem, t0, t1 = run_faults(run, etcd, bs, plan, a)
        eq(f'seed {seed}: no broker or etcd exited by itself', [], [c[0] for c in nem.crashes])
        kv_write(bs)
        all_led(bs, TOPIC, a.partitions, timeout=60)
        wl.hist.final, hws, complete = final_read(bs, a.partitions)
        check(f'seed {seed}: the final read reached every partition\'s high watermark {hws}', complete)
        figure = check_history(seed, plan, a, wl, qc.check(wl.hist, t0, t1, range(a.partitions)))
        figure = figure.replace(f'seed {seed}: ', f'seed {seed} ({a.nemeses}; etcd x{members}): ', 1)
        check_deposed(seed, wl, watch, nem, a.rf)
        log = settled(bs, TOPIC, a.partitions)
        kv = settled(bs, KV_TOPIC, 3)
        waited = wait_replicas(bs, (TOPIC, log), (KV_TOPIC, kv))
        for b in bs:
            b.stop()
        figure += f', divergent {replicas_check(seed, bs, log, kv, waited)}'
        figure += f', hw-violations {hw_violations(seed, bs)}'
        figures.append(figure)
        if 'sample' not in st:
            st['sample'] = sample_dirs(bs, log, kv)
        if testkit.failed > failed0:
            out(run.log_tails(10))


def hw_violations(seed, bs):
    """The high watermark invariant's ERROR lines (partition/partition.h, gr_partitions_hw_violations) in every
    broker's log of the seed (all its starts: the log is appended to); must be 0. Returns the count."""
    n = 0
    for b in bs:
        try:
            with open(b.proc.log_path, 'rb') as f:
                n += sum(1 for line in f if HW_VIOLATION in line)
        except (AttributeError, OSError) as e:
            testkit.fail(f'seed {seed}: broker {b.node_id}\'s log readable', str(e))
    eq(f'seed {seed}: high watermark invariant violations in the broker logs ("{HW_VIOLATION.decode()}")', 0, n)
    return n


def settled(bs, topic, partitions, timeout=REPLICA_WAIT_S):
    """(view, high watermarks) of topic once every partition is led and its leader answers ListOffsets:
    {partition: (leader, replicas)}, {partition: high watermark}."""
    def ask():
        view = all_led(bs, topic, partitions)
        try:
            return view, high_watermarks(bs, topic, view)
        except (h.HarnessError, OSError, k.DecodeError, k.ConnectionClosed):
            return None  # leadership moved between Metadata and ListOffsets: ask again
    return h.wait_until(ask, timeout, f'the high watermarks of {topic} from its leaders', interval=0.5)


def wait_replicas(bs, *topics, timeout=REPLICA_WAIT_S):
    """Waits (bounded) until every replica of every partition of each (topic, (view, high watermarks)) holds
    batches up to the partition's high watermark, reading the live brokers' partition directories. Returns
    (seconds waited, [(topic, partition, replica, its end offset)] of the replicas still short at the end)."""
    by_id = {b.node_id: b for b in bs}
    t0 = time.monotonic()

    def short():
        out_ = []
        for topic, (view, hws) in topics:
            for p, (_, replicas) in sorted(view.items()):
                for r in replicas:
                    found, _ = rc.batches(os.path.join(by_id[r].data_dir, f'{topic}-{p}'), hws[p])
                    end = found[-1][1] + 1 if found else 0
                    if end < hws[p]:
                        out_.append((topic, p, r, end))
        return out_
    left = short()
    while left and time.monotonic() - t0 < timeout:
        time.sleep(0.5)
        left = short()
    return time.monotonic() - t0, left


def replicas_check(seed, bs, log, kv, waited):
    """log, kv: (view, high watermarks) of the two topics; waited: wait_replicas' answer. Returns the number
    of divergences."""
    rf = max(len(v[1]) for v in log[0].values())
    bad, notes = compare_replicas(bs, log[0], log[1], TOPIC)
    kbad, knotes = compare_replicas(bs, kv[0], kv[1], KV_TOPIC, compacted=True)
    if rf < 2:
        out(f'   replica comparison: replication factor {rf}, one replica per partition: nothing compared')
    else:
        secs, left = waited
        out(f'   replica comparison: every replica at its partition\'s high watermark after {secs:.1f} s' if not left
            else f'   replica comparison: after {secs:.1f} s replicas still below the high watermark: ' +
            ', '.join(f'{t}-{p} on broker {r} ends at {end}' for t, p, r, end in left))
        shown = {}
        for n in notes + knotes:  # at most NOTES_PER_PARTITION lines of one partition, then how many more
            part, _, _ = n.partition(':')
            shown[part] = shown.get(part, 0) + 1
            if shown[part] <= NOTES_PER_PARTITION or n.startswith(f'{part}: compared'):
                out(f'     {n}')
        for part, k_ in shown.items():
            if k_ > NOTES_PER_PARTITION + 1:
                out(f'     {part}: ... {k_ - NOTES_PER_PARTITION - 1} more lines')
    if rf > 1:  # a replica that catches up only once the brokers stop (a new leader) still failed here
        eq(f'seed {seed}: every replica at its high watermark within {REPLICA_WAIT_S} s (topic, partition, '
           f'broker, its end)', [], waited[1][:5])
    eq(f'seed {seed}: divergent replicas (replication factor {rf})', 0, bad + kbad)
    return bad + kbad


KV_KEYS = 20


def kv_write(bs):
    """Keyed records on the compacted topic in two rounds (each key written once per round, a key always
    to the same partition), for the replica comparison: the second round supersedes the first."""
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all',
                  'enable.idempotence': True, 'linger.ms': 0, 'message.timeout.ms': 30000, 'log_level': 2})
    left = 0
    for rnd in range(2):
        for i in range(KV_KEYS):
            p.produce(KV_TOPIC, key=f'k{i}'.encode(), value=f'v{rnd}-{i}'.encode(), partition=i % 3)
            p.poll(0)
        left += p.flush(40)
    eq('the compacted topic\'s keyed records acknowledged', 0, left)


def high_watermarks(bs, topic, view):
    """{partition: high watermark} from ListOffsets(latest) to each partition's leader."""
    by_id = {b.node_id: b for b in bs}
    out_ = {}
    for p, (leader, _) in view.items():
        with k.Conn(by_id[leader].bootstrap, timeout=5) as c:
            r = k.list_offsets(c, topic, p, -1)
        if r['error_code'] != 0:
            raise h.HarnessError(f'ListOffsets {topic}-{p} on broker {leader}: error {r["error_code"]}')
        out_[p] = r['offset']
    return out_


def sample_dirs(bs, log, kv):
    """Copies of one partition directory of each topic (the broker stopped) for the replica comparison's
    test, with their high watermarks. log, kv: (view, high watermarks)."""
    keep = h.tempfile.mkdtemp(prefix='gregor-jepsen-sample-')
    by_id = {b.node_id: b for b in bs}
    out_ = {'dir': keep}
    for name, (view, hws), topic in (('log', log, TOPIC), ('kv', kv, KV_TOPIC)):
        p = max(hws, key=lambda q: hws[q])
        src = os.path.join(by_id[view[p][0]].data_dir, f'{topic}-{p}')
        shutil.copytree(src, os.path.join(keep, name))
        out_[name] = (os.path.join(keep, name), hws[p])
    return out_


# ---------------------------------------------------------------------------------------------------
# The checker's own tests.

def synthetic(final, acks):
    """A History of producers 0 (strict) and 1 (lenient): p0-0..p0-7 sent to partition 0, p1-0..p1-2 to
    partition 1, acknowledged as acks says ({value: (partition, offset)}; ack times 0.5 s after n), read
    finally as final says."""
    hist = qc.History()
    hist.producer(0, 'strict')
    hist.producer(1, 'lenient')
    for kk, count in ((0, 8), (1, 3)):
        for n in range(count):
            hist.send(kk, n, kk, float(n))
    for v, (p, off) in acks.items():
        hist.ack(v, p, off, qc.parse_value(v)[1] + 0.5)
    hist.final = final
    return hist


def t_checker():
    """The checker on synthetic histories: a clean one passes; one with exactly one lost, one duplicated,
    one reordered and one never-sent record (and an acks=1 loss) reports each and fails."""
    clean = {0: [(n, f'p0-{n}') for n in range(8)], 1: [(n, f'p1-{n}') for n in range(3)]}
    acks = {v: (p, off) for p, recs in clean.items() for off, v in recs}
    hist = synthetic(clean, acks)
    hist.read_live(0, 3, 'p0-3')
    res = qc.check(hist, 0.0, 10.0, [0, 1])
    check('checker: a clean history passes with every count 0', res['ok'] and res['acks1_lost'] == 0 and
          res['read'] == 11, str({kk: res[kk] for kk in qc.MUST_BE_ZERO}))
    eq('checker: unavailability of partition 0 = the longest gap between acks (0.0 .. 0.5 .. 7.5 .. 10.0)',
       (2.5, 7.5), res['unavailability'][0])
    eq('checker: unavailability counts acks=-1 acknowledgements only (partition 1 has acks=1 ones only)',
       (10.0, 0.0), res['unavailability'][1])
    # partition 0: p0-1 and p0-2 stored (and acknowledged) the wrong way round, p0-3 stored twice, p9-9
    # never sent, p0-4 acknowledged at offset 5 and gone; partition 1: p1-1 (acks=1) gone
    final = {0: [(0, 'p0-0'), (1, 'p0-2'), (2, 'p0-1'), (3, 'p0-3'), (4, 'p0-3'), (6, 'p9-9'), (7, 'p0-5'),
                 (8, 'p0-6'), (9, 'p0-7')], 1: [(0, 'p1-0'), (2, 'p1-2')]}
    acks = {v: (0, off) for off, v in final[0] if v != 'p9-9' and off != 4}
    acks.update({'p0-4': (0, 5), 'p1-0': (1, 0), 'p1-1': (1, 1), 'p1-2': (1, 2)})
    res = qc.check(synthetic(final, acks), 0.0, 10.0, [0, 1])
    qc.report(res, out)
    eq('checker: lost', 1, res['lost'])
    eq('checker: duplicated', 1, res['duplicated'])
    eq('checker: unordered', 1, res['unordered'])
    eq('checker: never-sent', 1, res['never_sent'])
    eq('checker: nothing else (moved, inconsistent, live-missing)', (0, 0, 0),
       (res['moved'], res['inconsistent'], res['live_missing']))
    check('checker: the history fails', not res['ok'])
    eq('checker: acks=1 lost counted (and not failed)', 1, res['acks1_lost'])
    eq('checker: the lost record named', ['p0-4 acknowledged at 0@5'], res['examples'].get('lost'))
    hist = synthetic(clean, {v: (p, off) for p, recs in clean.items() for off, v in recs})
    hist.final = {0: [(n, f'p0-{n}') for n in range(8) if n != 2] + [(8, 'p0-2')], 1: clean[1]}
    hist.read_live(0, 3, 'p0-4')
    hist.read_live(2, 0, 'p0-1')
    res = qc.check(hist, 0.0, 10.0, [0, 1])
    eq('checker: a record read at another offset than acknowledged is moved', 1, res['moved'])
    eq('checker: a live read of another value at an offset is inconsistent', 1, res['inconsistent'])
    eq('checker: a live read the final read lacks is live-missing', 1, res['live_missing'])
    # p0-2 (acknowledged at 2.5 s) is not at its acknowledged offset in the final read; every other is
    eq('checker: an ack inside a deposed leader\'s window (2.0, 5.0], absent from its offset, is counted',
       ['p0-2'], qc.deposed_acks(hist, [(0, 2.0, 5.0)]))
    eq('checker: the same ack outside the window (3.0, 5.0] or on another partition is not', [],
       qc.deposed_acks(hist, [(0, 3.0, 5.0), (1, 0.0, 9.0)]))
    hist.final = clean
    eq('checker: no deposed ack when the final read holds every record', [], qc.deposed_acks(hist, [(0, 0.0, 9.0)]))


def t_replicas(sample):
    """The replica comparison on copies of a real partition directory and of a compacted one."""
    base, hw = sample['log']
    kvdir, kvhw = sample['kv']
    work = h.tempfile.mkdtemp(prefix='gregor-jepsen-rc-')
    try:
        def copy(name, src=base):
            d = os.path.join(work, name)
            shutil.copytree(src, d)
            return d
        found, problems = rc.batches(base, hw)
        check(f'the sample partition has several batches below its high watermark {hw}', len(found) >= 4 and
              not problems, f'{len(found)} batches, {problems}')
        eq('one replica: nothing compared, and said so', (0, ['1 replica: nothing to compare']), rc.compare({1: base}, hw))
        n, lines = rc.compare({1: base, 2: copy('same')}, hw)
        eq('an identical copy agrees', 0, n)
        split = copy('split')
        at = rc.split_segment(split, found[len(found) // 2][0])
        n, lines = rc.compare({1: base, 2: split}, hw)
        check(f'a copy rolled at offset {at} (two segment files) agrees', n == 0 and
              len([x for x in os.listdir(split) if x.endswith('.log')]) == 2, '\n'.join(lines))
        bad = copy('corrupt')
        seg = sorted(x for x in os.listdir(bad) if x.endswith('.log'))[0]
        mid = found[len(found) // 2]
        pos = sum(len(d) for b0, _, d in found if b0 < mid[0]) + 62
        with open(os.path.join(bad, seg), 'r+b') as f:
            f.seek(pos)
            byte = f.read(1)
            f.seek(pos)
            f.write(bytes([byte[0] ^ 0xff]))
        n, lines = rc.compare({1: base, 2: bad}, hw)
        check(f'a copy with one byte flipped in the batch at offset {mid[0]}: divergent', n >= 1 and
              any(f'offset {mid[0]}' in x for x in lines), '\n'.join(lines))
        cut = copy('truncated')
        with open(os.path.join(cut, seg), 'r+b') as f:
            f.truncate(pos)
        n, lines = rc.compare({1: base, 2: cut}, hw)
        check('a copy truncated inside a batch below the high watermark: divergent', n >= 1 and
              any('truncated' in x for x in lines) and any('below the high watermark' in x for x in lines),
              '\n'.join(lines))
        n, lines = rc.compare({1: base, 2: copy('same2'), 3: cut}, hw)
        check('three replicas, one truncated: divergent', n >= 1, '\n'.join(lines))
        hole = copy('hole')
        with open(os.path.join(hole, seg), 'wb') as f:
            f.write(b''.join(d for b0, _, d in found if b0 != mid[0]))
        n, lines = rc.compare({1: base, 2: hole}, hw)
        eq(f'a copy without the batch at offset {mid[0]} (the rest intact): one divergence', (1, True),
           (n, any(f'no batch at offset {mid[0]}' in x for x in lines)))
        later = copy('later')
        with open(os.path.join(later, seg), 'wb') as f:
            f.write(b''.join(d for _, _, d in found[1:]))
        n, lines = rc.compare({1: base, 2: later}, hw)
        eq(f'a copy whose log starts a batch later (its own retention) agrees from offset {found[1][0]}',
           (0, f'compared batches at offsets {found[1][0]}..{hw - 1} on replicas [1, 2]'), (n, lines[-1]))
        t_replicas_compacted(work, kvdir, kvhw)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def t_replicas_compacted(work, kvdir, kvhw):
    found, problems = rc.batches(kvdir, kvhw)
    latest, _ = rc.latest_per_key(kvdir, kvhw)
    check(f'the compacted sample has keyed batches below {kvhw} and latest values', len(found) >= 2 and latest and
          not problems, f'{len(found)} batches, {len(latest)} keys, {problems}')
    cleaned = os.path.join(work, 'kv-cleaned')
    shutil.copytree(kvdir, cleaned)
    seg = sorted(x for x in os.listdir(cleaned) if x.endswith('.log'))[0]
    first = found[0][2]
    with open(os.path.join(cleaned, seg), 'rb') as f:
        data = f.read()
    with open(os.path.join(cleaned, seg), 'wb') as f:
        f.write(data[len(first):])  # the first batch's keys are all written again later: as if cleaned
    n, lines = rc.compare({1: kvdir, 2: cleaned}, kvhw, compacted=True)
    eq('compacted: a copy without its first (superseded) batch agrees on the latest value per key', 0, n)
    changed = os.path.join(work, 'kv-changed')
    shutil.copytree(kvdir, changed)
    last = found[-1]
    with open(os.path.join(changed, seg), 'rb') as f:
        data = f.read()
    pos = data.rfind(b'v', len(data) - len(last[2]))
    with open(os.path.join(changed, seg), 'r+b') as f:
        f.seek(pos)
        f.write(b'w')
    n, lines = rc.compare({1: kvdir, 2: changed}, kvhw, compacted=True)
    check('compacted: a copy whose latest value of a key differs is divergent', n >= 1 and
          any('key' in x for x in lines), '\n'.join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seeds', default='1,2,3')
    ap.add_argument('--seed', type=int)
    ap.add_argument('--duration', type=float, default=60.0)
    ap.add_argument('--drain', type=float, default=20.0)
    ap.add_argument('--rf', type=int, default=3, help='replication factor (1: one replica per partition)')
    ap.add_argument('--partitions', type=int, default=6)
    ap.add_argument('--rate', type=float, default=40.0, help='records per second per producer')
    ap.add_argument('--deadline', type=float, default=None, help='hard deadline per seed, s')
    ap.add_argument('--keep', action='store_true', help='keep each run\'s directory (broker logs and data)')
    ap.add_argument('--nemeses', default=DEFAULT_NEMESES,
                    help=f'all, or some of {",".join(NEMESES)} (default {DEFAULT_NEMESES})')
    ap.add_argument('--etcd-members', default='1',
                    help='etcd members: 1 or 3, or a list taken in turn per seed (1,3: odd-numbered runs one)')
    ap.add_argument('--disk-mb', type=int, default=DISK_MB, help='each broker\'s log dir tmpfs (diskfull), MiB')
    a = ap.parse_args()
    seeds = [a.seed] if a.seed is not None else [int(x) for x in a.seeds.split(',') if x]
    try:
        a.kinds = kinds_of(a.nemeses)
    except ValueError as e:
        ap.error(str(e))
    members = [int(x) for x in a.etcd_members.split(',') if x]
    if not members or any(m not in (1, 3) for m in members):
        ap.error('--etcd-members: 1 or 3, or a comma list of them')
    if a.deadline is None:
        a.deadline = 90 + a.duration + a.drain + FLUSH_S + FINAL_READ_S + REPLICA_WAIT_S
    t0 = time.monotonic()
    st = {'clock_ok': faketime_works()}
    section('the checker reports a lost, a duplicated, a reordered and a never-sent record', t_checker)
    for seed in seeds:
        m = members[seeds.index(seed) % len(members)]
        section(f'seed {seed}: {a.duration:.0f} s of faults + {a.drain:.0f} s drain, replication factor {a.rf}, '
                f'nemeses {a.nemeses}, etcd of {m}', one_seed, seed, a, st, m)
    if 'sample' in st:
        section('the replica comparison on copies of real partition directories', t_replicas, st['sample'])
        shutil.rmtree(st['sample']['dir'], ignore_errors=True)
    else:
        testkit.fail('the replica comparison\'s test', 'no run left a partition directory to copy')
    for f in figures:
        out(f'   figure: {f}')
    out(f'   (total {time.monotonic() - t0:.1f} s)')
    out(f'cluster-jepsen: {testkit.passed} passed, {testkit.failed} failed')
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
