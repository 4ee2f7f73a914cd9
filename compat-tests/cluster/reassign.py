"""reassign.py: partition reassignment in a Gregor cluster (issue #24; KIP-455, cluster/reassign.h,
server/handlers/partition_reassignments.c). etcd and three, then four, gregor brokers on the host (harness.py),
seeded and bounded in time; Kafka's kafka-reassign-partitions.sh (KAFKA_BIN's, as
compat-tests/kafka-dist/get-kafka.sh makes it).

What it checks:
  - a stage-1 layout: topic ra (3 partitions, one replica each on brokers 1, 2, 3) and __consumer_offsets
    created with one replica (offsets.topic.replication.factor=1), a group's offsets committed;
  - --generate proposes an assignment over brokers 1,2,3;
  - under load (a producer writing acks=all to every partition all along), --execute raises ra and
    __consumer_offsets to three replicas; --verify reports every partition completed; Metadata shows three
    replicas all in the ISR; the group's committed offsets read back; every acknowledged record reads back
    from the leaders (none lost);
  - a fourth broker: ra-0 moved from [1,2,3] to [4,2,3] (its leader, broker 1, removed): completes with a
    leader among 4,2,3 at a higher leader epoch, and broker 1 deletes its copy;
  - the rollback file --execute printed, used as written (its log_dirs name each replica's directory, so the
    tool also sends AlterReplicaLogDirs, key 34): --execute exits 0 and starts every replica's directory
    placement, --verify reports the partition and every replica complete; ra-0 then moves to [4,2,3] again;
  - ListPartitionReassignments and --cancel: ra-1 reassigned to [2,3,1,4] while broker 4 is stopped stays in
    progress (--verify says so, --list and a raw ListPartitionReassignments show adding [4]); --cancel
    reverts it to [2,3,1] (ISR without 4);
  - the controller kill -9'd while ra-2 is being reassigned to paused broker 4: once 4 resumes, the next
    controller completes it;
  - errors, raw: a broker not registered, a broker twice, an empty list: INVALID_REPLICA_ASSIGNMENT; a cancel
    with none in progress: NO_REASSIGNMENT_IN_PROGRESS; an unknown topic: UNKNOWN_TOPIC_OR_PARTITION; v1
    with AllowReplicationFactorChange false and a new replication factor: INVALID_REPLICATION_FACTOR; a broker
    that is not the controller: NOT_CONTROLLER.
Ends with `cluster-reassign: N passed, N failed`; exit status 1 on any failure.
Usage: reassign.py [--seed N] [--deadline SECONDS]
"""
import http.client
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, section  # noqa: E402

REPO = os.environ.get('REPO', os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'differential'))
import diff  # noqa: E402  (every API's schema from protocol/schema, for the raw requests below)

diff.install_schemas(diff.load_schemas(os.path.join(REPO, 'protocol', 'schema')))

PREFIX = '/gregor'
TOPIC = 'ra'
OFFSETS = '__consumer_offsets'


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=6000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false', 'replica.lag.time.max.ms=2000', 'replica.fetch.backoff.ms=200',
            'auto.leader.rebalance.enable=false', 'offsets.topic.replication.factor=1',
            'offsets.topic.num.partitions=3']


def tool(run, *args):
    return h.kafka_tool('kafka-reassign-partitions.sh', *args)


def layout(bs, topic=TOPIC):
    """{partition: (leader, leader_epoch, replicas, sorted isr)} from the first broker that answers, or None."""
    for b in bs:
        try:
            with k.Conn(b.bootstrap, timeout=5) as c:
                md = k.metadata(c, [topic], version=12, allow_auto=False)
        except Exception:  # noqa: BLE001 - stopped or starting
            continue
        for t in md['topics']:
            if t['name'] == topic and t['error_code'] == 0:
                return {p['partition_index']: (p['leader_id'], p['leader_epoch'], list(p['replica_nodes']),
                                               sorted(p['isr_nodes'])) for p in t['partitions']}
    return None


controller = h.controller_of


def scrape(b):
    """{name: value} of b's /metrics samples without labels."""
    with open(os.path.join(b.dir, 'admin')) as f:
        host, port = f.readline().strip().rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        c.request('GET', '/metrics')
        text = c.getresponse().read().decode()
    finally:
        c.close()
    return {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines()
            if ln and not ln.startswith('#') and '{' not in ln and len(ln.split()) == 2}


class Load:
    """Produces acks=all to every partition of TOPIC through its leader until stopped; notes what was
    acknowledged. A failed produce (leader moving) is not retried with the same values: nothing unacknowledged
    is counted."""

    def __init__(self, bs):
        self.bs, self.acked, self.errors, self.stop_ev, self.n = bs, {}, [], threading.Event(), 0
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop_ev.is_set():
            lay = layout(self.bs)
            by_id = {b.node_id: b for b in self.bs}
            if not lay:
                time.sleep(0.1)
                continue
            for p, v in lay.items():
                if v[0] not in by_id:
                    continue
                vals = [f'v{self.n}-{p}-{i}'.encode() for i in range(10)]
                self.n += 1
                try:
                    with k.Conn(by_id[v[0]].bootstrap, timeout=15) as c:
                        r = k.produce(c, TOPIC, p, k.build_batch([(b'k', x) for x in vals]), acks=-1)
                    if r['error_code'] == 0:
                        self.acked.setdefault(p, []).extend(vals)
                    else:
                        self.errors.append(r['error_code'])
                except Exception as e:  # noqa: BLE001 - a broker restarting
                    self.errors.append(str(e))
            time.sleep(0.02)

    def stop(self):
        self.stop_ev.set()
        self.t.join(30)


def read_back(b, topic, p):
    out, off = [], 0
    with k.Conn(b.bootstrap, timeout=15) as c:
        for _ in range(2000):
            r = k.fetch(c, topic, p, off)['responses'][0]['partitions'][0]
            recs = k.records_of(r)
            if r['error_code'] or not recs:
                break
            out.extend(rec['value'] for rec in recs)
            off = recs[-1]['offset'] + 1
            if off >= r['high_watermark']:
                break
    return out


def all_three(bs, topic):
    lay = layout(bs, topic)
    return lay if lay and all(len(v[2]) == 3 and v[3] == sorted(v[2]) for v in lay.values()) else None


def verify_until_done(run, bs, path, timeout=60):
    end = time.monotonic() + timeout
    out = ''
    while time.monotonic() < end:
        rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--reassignment-json-file', path, '--verify')
        if rc == 0 and 'still in progress' not in out and 'is complete' in out:
            return True, out
        time.sleep(1)
    return False, out


def t_setup(run, etcd, bs, st):
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{
            'name': TOPIC, 'num_partitions': -1, 'replication_factor': -1, 'configs': [],
            'assignments': [{'partition_index': p, 'broker_ids': [p + 1]} for p in range(3)]}],
            'timeout_ms': 15000, 'validate_only': False})['topics'][0]
    eq(f'CreateTopics {TOPIC} with one replica per partition', 0, r['error_code'])
    h.wait_until(lambda: (lambda x: x if x and all(v[0] == p + 1 for p, v in x.items()) else None)(layout(bs)),
                 20, 'ra led by 1, 2, 3')
    # the group's offsets: __consumer_offsets with one replica (offsets.topic.replication.factor=1)
    grp = 'ra-group'
    for _ in range(100):
        with k.Conn(bs[0].bootstrap, timeout=10) as c:
            fc = c.request('FindCoordinator', 3, {'key': grp, 'key_type': 0})
        if fc['error_code'] == 0:
            break
        time.sleep(0.2)
    eq('FindCoordinator creates __consumer_offsets', 0, fc['error_code'])
    by_id = {b.node_id: b for b in bs}
    with k.Conn(by_id[fc['node_id']].bootstrap, timeout=10) as c:
        r = c.request('OffsetCommit', 2, {'group_id': grp, 'generation_id': -1, 'member_id': '',
                                          'retention_time_ms': -1,
                                          'topics': [{'name': TOPIC, 'partitions': [
                                              {'partition_index': p, 'committed_offset': 7 + p,
                                               'committed_metadata': ''} for p in range(3)]}]})
    eq('a group commits offsets for ra-0..2', [0, 0, 0], [p['error_code'] for p in r['topics'][0]['partitions']])
    lay = layout(bs, OFFSETS)
    eq('__consumer_offsets has 3 partitions of one replica', [1, 1, 1], [len(v[2]) for _, v in sorted(lay.items())])
    st['group'] = grp
    st['ok'] = True


def committed(bs, grp):
    for _ in range(100):
        try:
            with k.Conn(bs[0].bootstrap, timeout=10) as c:
                fc = c.request('FindCoordinator', 3, {'key': grp, 'key_type': 0})
            if fc['error_code'] == 0:
                by_id = {b.node_id: b for b in bs}
                with k.Conn(by_id[fc['node_id']].bootstrap, timeout=10) as c:
                    r = c.request('OffsetFetch', 5, {'group_id': grp, 'topics': [
                        {'name': TOPIC, 'partition_indexes': [0, 1, 2]}]})
                if r['error_code'] == 0:
                    return [p['committed_offset'] for p in r['topics'][0]['partitions']]
        except Exception:  # noqa: BLE001 - coordinator moving
            pass
        time.sleep(0.2)
    return None


def t_raise(run, etcd, bs, st):
    tj = run.path('topics.json')
    with open(tj, 'w') as f:
        json.dump({'version': 1, 'topics': [{'topic': TOPIC}]}, f)
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--topics-to-move-json-file', tj,
                   '--broker-list', '1,2,3', '--generate')
    check('--generate proposes an assignment', rc == 0 and 'Proposed partition reassignment configuration' in out,
          out[-600:])
    plan = {'version': 1, 'partitions': [
        {'topic': t, 'partition': p, 'replicas': [p + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1]}
        for t in (TOPIC, OFFSETS) for p in range(3)]}
    rj = run.path('raise.json')
    with open(rj, 'w') as f:
        json.dump(plan, f)
    load = Load(bs)
    time.sleep(2)
    t0 = time.monotonic()
    rc, out = tool(run, '--bootstrap-server', bs[1].bootstrap, '--reassignment-json-file', rj, '--execute')
    check('--execute raising ra and __consumer_offsets to 3 replicas is accepted',
          rc == 0 and 'Successfully started partition reassignment' in out, out[-800:])
    done, out = verify_until_done(run, bs, rj)
    check(f'--verify: every partition completed ({time.monotonic() - t0:.1f} s)', done, out[-800:])
    time.sleep(2)
    load.stop()
    for t in (TOPIC, OFFSETS):
        lay = h.wait_until(lambda: all_three(bs, t), 20, f'{t}: three replicas in the ISR')
        eq(f'{t}: replicas as asked, all in the ISR', {p: [p + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1] for p in range(3)},
           {p: v[2] for p, v in lay.items()})
    eq('the group\'s committed offsets read back after __consumer_offsets moved', [7, 8, 9],
       committed(bs, st['group']))
    lay = layout(bs)
    by_id = {b.node_id: b for b in bs}
    total = sum(len(v) for v in load.acked.values())
    check(f'the load kept being acknowledged during the reassignment ({total} records, {len(load.errors)} '
          f'failed sends)', total > 0, str(load.errors[:5]))
    lost = {}
    for p in range(3):
        got = set(read_back(by_id[lay[p][0]], TOPIC, p))
        lost[p] = [v for v in load.acked.get(p, []) if v not in got]
    eq('no acknowledged record lost', {0: [], 1: [], 2: []}, {p: v[:3] for p, v in lost.items()})
    # each replica holds the same: read every partition from a follower too
    for p in range(3):
        follower = next(n for n in lay[p][2] if n != lay[p][0])
        st.setdefault('fol', {})[p] = follower
    st['raised'] = True


def t_fourth(run, etcd, bs, st):
    b4 = run.broker(4, overrides=overrides(etcd))
    bs.append(b4)
    before = layout(bs)
    plan = {'version': 1, 'partitions': [{'topic': TOPIC, 'partition': 0, 'replicas': [4, 2, 3]}]}
    rj = run.path('move.json')
    with open(rj, 'w') as f:
        json.dump(plan, f)
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--reassignment-json-file', rj, '--execute',
                   '--throttle', 50000000)
    check('--execute --throttle moving ra-0 from [1,2,3] to [4,2,3] is accepted (throttle not applied)',
          rc == 0 and 'Successfully started partition reassignment' in out, out[-800:])
    st['rollback'] = next((ln for ln in out.splitlines() if ln.startswith('{"version"')), None)
    st['move'] = rj
    done, out = verify_until_done(run, bs, rj)
    check('--verify: ra-0 completed', done, out[-800:])
    lay = layout(bs)
    eq('ra-0: replicas [4,2,3], ISR {2,3,4}', ([4, 2, 3], [2, 3, 4]), (lay[0][2], lay[0][3]))
    check(f'ra-0: broker 1 no longer leads, the leader epoch went up ({before[0][1]} -> {lay[0][1]})',
          lay[0][0] in (2, 3, 4) and lay[0][1] > before[0][1], str(lay[0]))
    copy = os.path.join(bs[0].data_dir, f'{TOPIC}-0')
    try:
        h.wait_until(lambda: not os.path.exists(copy), 20, 'broker 1 deletes ra-0')
    except h.HarnessError:
        pass
    check('broker 1 deleted its copy of ra-0', not os.path.exists(copy), str(sorted(os.listdir(bs[0].data_dir))))
    by_id = {b.node_id: b for b in bs}
    got4 = read_back(by_id[4], TOPIC, 0) if lay[0][0] == 4 else None
    if got4 is not None:
        check('broker 4 leads ra-0 and serves its records', len(got4) > 0)
    st['fourth'] = True


def replica_moves_done(out, topic, partition, brokers):
    """--verify's output says every replica's log directory move is complete."""
    return all(f'Reassignment of replica {topic}-{partition}-{b} completed successfully' in out for b in brokers)


def t_rollback(run, etcd, bs, st):
    """The rollback file the tool printed at --execute, used as written: its log_dirs name each replica's
    directory (DescribeLogDirs), so --execute also asks AlterReplicaLogDirs of every broker (key 34). Then ra-0
    goes forward again to [4,2,3] for the sections after."""
    check('--execute printed the current assignment to roll back to', st.get('rollback') is not None)
    rb = json.loads(st['rollback'])
    part = rb['partitions'][0]
    dirs = {b.node_id: os.path.realpath(b.data_dir) for b in bs}
    eq('the rollback file: ra-0 on [1,2,3], each replica\'s log directory as DescribeLogDirs names it',
       (TOPIC, 0, [1, 2, 3], [dirs[1], dirs[2], dirs[3]]),
       (part['topic'], part['partition'], part['replicas'], part['log_dirs']))
    path = run.path('rollback.json')
    with open(path, 'w') as f:
        f.write(st['rollback'] + '\n')
    t0 = time.monotonic()
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--reassignment-json-file', path, '--execute')
    check('--execute with the rollback file as written exits 0 and starts each replica\'s directory placement',
          rc == 0 and 'Successfully started partition reassignment' in out and all(
              f'Successfully started moving log directory to {dirs[b]} for replica {TOPIC}-0 with broker {b}' in out
              for b in (1, 2, 3)), out[-1200:])
    done, out = verify_until_done(run, bs, path)
    check(f'--verify with the rollback file: ra-0 completed and every replica in its directory '
          f'({time.monotonic() - t0:.1f} s)', done and replica_moves_done(out, TOPIC, 0, (1, 2, 3)), out[-1200:])
    lay = layout(bs)
    eq('ra-0 rolled back: replicas [1,2,3], all in the ISR', ([1, 2, 3], [1, 2, 3]), (lay[0][2], lay[0][3]))
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--reassignment-json-file', st['move'], '--execute')
    check('--execute moving ra-0 to [4,2,3] again', rc == 0, out[-800:])
    done, out = verify_until_done(run, bs, st['move'])
    lay = layout(bs)
    check('ra-0 back on [4,2,3] for the next sections', done and lay[0][2] == [4, 2, 3] and lay[0][3] == [2, 3, 4],
          str(lay and lay[0]))
    st['rolled'] = True


def list_raw(b, topics=None):
    with k.Conn(b.bootstrap, timeout=10) as c:
        return c.request('ListPartitionReassignments', 0, {'timeout_ms': 5000, 'topics': topics})


def alter_raw(b, parts, version=0, allow=True):
    body = {'timeout_ms': 10000, 'topics': [{'name': t, 'partitions': [
        {'partition_index': p, 'replicas': r} for p, r in ps]} for t, ps in parts]}
    if version >= 1:
        body['allow_replication_factor_change'] = allow
    with k.Conn(b.bootstrap, timeout=20) as c:
        r = c.request('AlterPartitionReassignments', version, body)
    return r['error_code'], [(p['partition_index'], p['error_code']) for t in r['responses'] for p in t['partitions']]


def t_cancel(run, etcd, bs, st):
    by_id = {b.node_id: b for b in bs}
    # broker 4 again with a 60 s session, then paused: still registered (the tool checks the ids it is given
    # against DescribeCluster) but fetching nothing, so a reassignment adding it stays in progress
    b4 = by_id[4]
    b4.stop()
    b4.start(extra=['broker.session.timeout.ms=60000'], same_ports=True)
    h.wait_until(lambda: (lambda x: x if x and 4 in x[0][3] else None)(layout(bs)), 30, 'broker 4 back in ra-0')
    check('the controller is not broker 4', controller(bs) in (1, 2, 3), str(controller(bs)))
    before = layout(bs)
    b4.pause()
    plan = {'version': 1, 'partitions': [{'topic': TOPIC, 'partition': 1, 'replicas': before[1][2] + [4]}]}
    rj = run.path('cancel.json')
    with open(rj, 'w') as f:
        json.dump(plan, f)
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--reassignment-json-file', rj, '--execute')
    check('--execute adding paused broker 4 to ra-1 is accepted', rc == 0, out[-800:])
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--reassignment-json-file', rj, '--verify')
    check('--verify: ra-1 still in progress', 'still in progress' in out, out[-800:])
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--list')
    check('--list shows ra-1 being reassigned', f'{TOPIC}-1' in out, out[-800:])
    r = list_raw(bs[1])
    ongoing = [(t['name'], p['partition_index'], p['replicas'], p['adding_replicas'], p['removing_replicas'])
               for t in r['topics'] for p in t['partitions']]
    eq('ListPartitionReassignments (all): ra-1 adding [4]', [(TOPIC, 1, before[1][2] + [4], [4], [])], ongoing)
    led = by_id[before[1][0]]
    m = scrape(led)
    eq(f'/metrics of ra-1\'s leader (broker {led.node_id}): one partition reassigning, none under-replicated while '
       f'4 is added (the replication factor is the one before the reassignment)', (1.0, 0.0),
       (m.get('kafka_server_replicamanager_reassigningpartitions'),
        m.get('kafka_server_replicamanager_underreplicatedpartitions')))
    r = list_raw(bs[2], [{'name': TOPIC, 'partition_indexes': [0, 2]}, {'name': 'nope', 'partition_indexes': [0]}])
    eq('ListPartitionReassignments naming ra-0, ra-2 and an unknown topic: nothing', (0, []),
       (r['error_code'], r['topics']))
    rc, out = tool(run, '--bootstrap-server', bs[0].bootstrap, '--reassignment-json-file', rj, '--cancel',
                   '--preserve-throttles')
    check('--cancel succeeds', rc == 0 and 'Successfully cancelled' in out, out[-800:])
    lay = h.wait_until(lambda: (lambda x: x if x and x[1][2] == before[1][2] else None)(layout(bs[:3])), 20,
                       'ra-1 back to its replicas')
    eq('ra-1 reverted: replicas and ISR without 4', (before[1][2], sorted(before[1][2])), (lay[1][2], lay[1][3]))
    eq('nothing in progress after the cancel', [], list_raw(bs[0])['topics'])
    ctl = controller(bs[:3])
    c = by_id[ctl]
    eq('a broker not registered (9): INVALID_REPLICA_ASSIGNMENT', (0, [(2, 39)]), alter_raw(c, [(TOPIC, [(2, [1, 9])])]))
    eq('a broker twice: INVALID_REPLICA_ASSIGNMENT', (0, [(2, 39)]), alter_raw(c, [(TOPIC, [(2, [1, 1])])]))
    eq('an empty list: INVALID_REPLICA_ASSIGNMENT', (0, [(2, 39)]), alter_raw(c, [(TOPIC, [(2, [])])]))
    eq('a cancel with none in progress: NO_REASSIGNMENT_IN_PROGRESS', (0, [(2, 85)]),
       alter_raw(c, [(TOPIC, [(2, None)])]))
    eq('an unknown topic: UNKNOWN_TOPIC_OR_PARTITION', (0, [(0, 3)]), alter_raw(c, [('nope', [(0, [1])])]))
    eq('an unknown partition: UNKNOWN_TOPIC_OR_PARTITION', (0, [(9, 3)]), alter_raw(c, [(TOPIC, [(9, [1])])]))
    eq('v1, AllowReplicationFactorChange false, 3 -> 2 replicas: INVALID_REPLICATION_FACTOR', (0, [(2, 38)]),
       alter_raw(c, [(TOPIC, [(2, [1, 2])])], version=1, allow=False))
    other = next(b for b in bs[:3] if b.node_id != ctl)
    eq(f'broker {other.node_id}, not the controller: NOT_CONTROLLER', (41, [(2, 41)]),
       alter_raw(other, [(TOPIC, [(2, [1, 2, 3])])]))
    lay = layout(bs[:3])
    eq('ra-2 unchanged by the refused asks', before[2][2], lay[2][2])
    st['cancelled'] = True


def t_controller_killed(run, etcd, bs, st):
    """A reassignment in progress survives its controller's kill -9: the next controller completes it from
    what etcd holds."""
    by_id = {b.node_id: b for b in bs}
    b4 = by_id[4]
    before = layout(bs)
    target = before[2][2] + [4]
    with k.Conn(by_id[controller(bs)].bootstrap, timeout=20) as c:
        r = c.request('AlterPartitionReassignments', 0, {'timeout_ms': 10000, 'topics': [
            {'name': TOPIC, 'partitions': [{'partition_index': 2, 'replicas': target}]}]})
    eq('ra-2: adding paused broker 4 accepted', [0], [p['error_code'] for t in r['responses'] for p in t['partitions']])
    ctl = controller(bs)
    by_id[ctl].kill9()
    others = [b for b in bs if b.node_id not in (ctl, 4)]
    h.wait_until(lambda: controller(others) not in (-1, ctl) or None, 30, 'a new controller')
    b4.resume()
    try:
        lay = h.wait_until(lambda: (lambda x: x if x and x[2][2] == target and 4 in x[2][3] and not
                                    list_raw(others[0])['topics'] else None)(layout(others)), 40,
                           'ra-2 completed by the new controller')
    except h.HarnessError:
        lay = layout(others)
    eq(f'the new controller ({controller(others)}) completed ra-2: replicas {target}, 4 in the ISR, nothing in '
       f'progress', (target, True, []), (lay[2][2], 4 in lay[2][3], list_raw(others[0])['topics']))


def main():
    seed, deadline = h.cli(deadline_s=300.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-reassign') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('a stage-1 layout: one replica per partition', t_setup, run, etcd, bs, st)
        if st.get('ok'):
            section('raising ra and __consumer_offsets to three replicas under load', t_raise, run, etcd, bs, st)
        if st.get('raised'):
            section('a fourth broker takes ra-0 from broker 1', t_fourth, run, etcd, bs, st)
        if st.get('fourth'):
            section('the rollback file as the tool wrote it (log_dirs: AlterReplicaLogDirs)', t_rollback, run,
                    etcd, bs, st)
        if st.get('rolled'):
            section('list, cancel and errors', t_cancel, run, etcd, bs, st)
        if st.get('cancelled'):
            section('the controller killed during a reassignment', t_controller_killed, run, etcd, bs, st)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-reassign: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
