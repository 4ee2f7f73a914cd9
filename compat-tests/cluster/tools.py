"""tools.py: Kafka's own command-line tools against a 3-broker Gregor cluster (issue #19: "kafka-topics.sh
--describe shows leaders on several brokers; kafka-broker-api-versions.sh, kafka-consumer-groups.sh,
kafka-configs.sh work through any broker"), with Kafka 4.4.0's tools from compat-tests/kafka-dist
(get-kafka.sh; compat-tests/run.sh fetches them before the suites run).

What it checks (etcd and three brokers on free loopback ports, broker.session.timeout.ms 3000):
  - kafka-topics.sh --create through broker 2 makes a 6-partition topic; --describe through brokers 1 and 3
    prints the same partitions with leaders on all three brokers, each leader as Metadata has it;
  - kafka-broker-api-versions.sh through broker 3 lists the three brokers, each with its ApiVersions;
  - kafka-features.sh describe through each broker: transaction.version (issue #25) supported 0-2, finalized
    at 2 (the default) with one epoch (the features key's revision) on every broker;
  - kafka-configs.sh --alter through broker 1 sets retention.ms on the topic, --describe through broker 3
    shows it; a topic created with min.insync.replicas=2 and altered to 3 (Kafka's range in cluster mode);
  - a librdkafka consumer group reads the topic and commits; kafka-consumer-groups.sh --list and --describe
    through brokers 1 and 2 show the group with its 6 partitions and committed offsets equal to the log end
    (lag 0); the topic deleted and created again under the same name, the group reads all of the new topic's
    records (its committed offsets of the old topic were dropped by its coordinator).
  - (issue #20) an RF 3 topic grown by kafka-topics.sh --alter --partitions --replica-assignment with three
    replicas per new partition (kept in that order), refused (InvalidReplicaAssignmentException) naming an
    unregistered broker; CreatePartitions (librdkafka) with a broker twice, two replicas, or too many rows:
    INVALID_REPLICA_ASSIGNMENT with Kafka's messages; --describe --under-replicated-partitions and
    --under-min-isr-partitions: nothing with every broker up; broker 3 stopped, exactly the partitions with a
    replica on it, and the min.insync.replicas=3 topic; broker 3 back, nothing.
  - (issue #25) kafka-features.sh downgrade/upgrade of transaction.version through brokers other than the
    controller (--dry-run changes nothing): every broker then answers the same level with one higher epoch
    (etcd's features key's revision); Kafka's refusals (a downgrade to a higher level, above the supported
    max, an unknown feature) change nothing; a restarted broker answers the level and epoch it had; with the
    features key deleted (a cluster made before it existed) a broker restarted at the default setting answers
    level 1 at epoch -1, not the default 2.
Ends with `cluster-tools: N passed, N failed`; exit 1 on any failure. Without the tools: one failure naming
get-kafka.sh. Usage: tools.py [--seed N] [--deadline SECONDS]. Read next: e2e.py, harness.py.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, fail, ok, section  # noqa: E402,F401

SESSION_MS = 3000
TOPIC = 'tools-6'
GROUP = 'tools-group'
MINISR_TOPIC = 'tools-min-isr'
RF3_TOPIC = 'tools-rf3'
MIN3_TOPIC = 'tools-rf3-min3'
KAFKA_BIN = os.environ.get('KAFKA_BIN', os.path.join(os.path.dirname(HERE), '.cache', 'kafka-4.4.0', 'bin'))


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'broker.session.timeout.ms={SESSION_MS}',
            'broker.heartbeat.interval.ms=500', 'auto.create.topics.enable=false',
            'group.initial.rebalance.delay.ms=0']


def tool(name, *args, timeout=90):
    """Runs a Kafka tool; returns (exit status, stdout + stderr)."""
    env = dict(os.environ, KAFKA_HEAP_OPTS='-Xmx256m', KAFKA_OPTS='-Xshare:auto')
    p = subprocess.run([os.path.join(KAFKA_BIN, name)] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


def leaders_md(b):
    with k.Conn(b.bootstrap, timeout=5) as c:
        m = k.metadata(c, [TOPIC], version=12, allow_auto=False)
    return {p['partition_index']: p['leader_id'] for t in m['topics'] if t['name'] == TOPIC for p in t['partitions']}


def all_led(b):
    """Whether b's Metadata shows the topic's 6 partitions, each with a leader (one request)."""
    led = leaders_md(b)
    return len(led) == 6 and min(led.values()) >= 0


def t_topics(run, bs, st):
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[1].bootstrap, '--create', '--topic', TOPIC,
                   '--partitions', 6)
    check('kafka-topics.sh --create through broker 2', rc == 0 and 'Created topic' in out, out[-400:])
    h.wait_until(lambda: all(all_led(b) for b in bs), 10,
                 'every broker shows the 6 leaders')
    want = leaders_md(bs[0])
    for b in (bs[0], bs[2]):
        rc, out = tool('kafka-topics.sh', '--bootstrap-server', b.bootstrap, '--describe', '--topic', TOPIC)
        got = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r'Partition: (\d+)\s+Leader: (-?\d+)', out)}
        eq(f'kafka-topics.sh --describe through broker {b.node_id}: the leaders Metadata has', want, got)
        eq(f'  leaders on all three brokers', {1, 2, 3}, set(got.values()))
    st['leaders'] = want


def t_api_versions(run, bs, st):
    rc, out = tool('kafka-broker-api-versions.sh', '--bootstrap-server', bs[2].bootstrap)
    ids = sorted(int(x) for x in re.findall(r'\(id: (\d+) rack', out))
    eq('kafka-broker-api-versions.sh through broker 3 lists the three brokers', [1, 2, 3], ids)
    check('  each with its ApiVersions (Produce, Fetch, FindCoordinator)', rc == 0 and out.count('Produce(0):') == 3
          and out.count('FindCoordinator(10):') == 3, out[-400:])


def t_features(run, bs, st):
    """kafka-features.sh describe through each broker: transaction.version supported 0-2, finalized at
    gregor.transaction.version's default (2) with the epoch of etcd's features key, the same on every broker."""
    seen = []
    for b in bs:
        rc, out = tool('kafka-features.sh', '--bootstrap-server', b.bootstrap, 'describe')
        m = re.search(r'Feature: transaction\.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 2\s+'
                      r'FinalizedVersionLevel: 2\s+Epoch: (\d+)', out)
        check(f'kafka-features.sh describe through broker {b.node_id}: transaction.version 0-2, finalized 2',
              rc == 0 and m is not None, out[-400:])
        seen.append(int(m.group(1)) if m else None)
    check(f'  the same finalized features epoch on every broker ({seen[0]}, the features key\'s revision)',
          seen[0] is not None and seen[0] > 0 and len(set(seen)) == 1, str(seen))


def features_of(b):
    """(finalized level, epoch, supported max) of transaction.version from kafka-features.sh describe through
    b; None when the tool failed."""
    rc, out = tool('kafka-features.sh', '--bootstrap-server', b.bootstrap, 'describe')
    m = re.search(r'Feature: transaction\.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: (\d+)\s+'
                  r'FinalizedVersionLevel: (\d+)\s+Epoch: (\d+)', out)
    return (int(m.group(2)), int(m.group(3)), int(m.group(1))) if rc == 0 and m else None


def raw_features(b):
    """(finalized transaction.version level, epoch) from ApiVersions v3 (level 0 when not listed)."""
    r, _ = b.api_versions()
    level = next((f['max_version_level'] for f in r['finalized_features'] if f['name'] == 'transaction.version'), 0)
    return level, r['finalized_features_epoch']


def all_at(bs, level):
    """(level, epoch) once every broker answers `level` with one epoch in ApiVersions (the feeds apply etcd's
    key), checked then with kafka-features.sh describe through one broker."""
    seen = []

    def same():
        seen[:] = [raw_features(b) for b in bs]
        return all(f[0] == level for f in seen) and len({f[1] for f in seen}) == 1
    h.wait_until(same, 20, f'every broker answers transaction.version {level} with one epoch')
    f = features_of(bs[level % len(bs)])
    eq(f'  kafka-features.sh describe: level {level} at epoch {seen[0][1]}', seen[0], f[:2] if f else None)
    return seen[0]


def t_update_features(run, bs, st):
    """UpdateFeatures (issue #25) through brokers that are not the controller: etcd's features key written in
    a txn, every broker's feed applies the level with the key's new revision as the epoch; Kafka's refusals;
    a restarted broker keeps the level (the key's, not its setting's default 2)."""
    with k.Conn(bs[0].bootstrap, timeout=5) as c:
        ctl = k.metadata(c, [], version=12, allow_auto=False)['controller_id']
    others = [b for b in bs if b.node_id != ctl]
    level0, epoch0 = all_at(bs, 2)  # the default
    top = features_of(bs[0])[2]
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[0].bootstrap, 'downgrade', '--feature',
                   'transaction.version=0', '--dry-run')
    check(f'downgrade --dry-run through broker {others[0].node_id} (not the controller {ctl}): validated',
          'transaction.version can be downgraded to 0.' in out, out[-400:])
    eq('  nothing changed on any broker', (2, epoch0), all_at(bs, 2))
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[0].bootstrap, 'downgrade', '--feature',
                   'transaction.version=0')
    check(f'downgrade --feature transaction.version=0 through broker {others[0].node_id}',
          'transaction.version was downgraded to 0.' in out, out[-400:])
    level1, epoch1 = all_at(bs, 0)
    check(f'  every broker answers level 0 with one higher epoch ({epoch0} -> {epoch1})', epoch1 > epoch0)
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[1].bootstrap, 'downgrade', '--feature',
                   'transaction.version=1')
    check('downgrade to a higher level: Kafka\'s refusal', "Invalid update version 1 for feature transaction.version. "
          "Can't downgrade to a newer version." in out, out[-400:])
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[1].bootstrap, 'upgrade', '--feature',
                   f'transaction.version={top + 1}')
    check(f'upgrade above the supported max {top}: refused',
          f'Invalid update version {top + 1} for feature transaction.version. Local controller {ctl} only '
          f'supports versions 0-{top}' in out, out[-400:])
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[1].bootstrap, 'upgrade', '--feature',
                   'no.such.feature=1')
    check('upgrade of an unknown feature: refused', 'Could not upgrade no.such.feature to 1.' in out and
          'does not support this feature.' in out, out[-400:])
    eq('  the refusals changed nothing', (0, epoch1), all_at(bs, 0))
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[1].bootstrap, 'upgrade', '--feature',
                   'transaction.version=1')
    check(f'upgrade --feature transaction.version=1 through broker {others[1].node_id}',
          'transaction.version was upgraded to 1.' in out, out[-400:])
    _, epoch2 = all_at(bs, 1)
    check(f'  every broker answers level 1 with one higher epoch ({epoch1} -> {epoch2})', epoch2 > epoch1)
    rc, out = tool('kafka-features.sh', '--bootstrap-server', bs[0].bootstrap, 'downgrade', '--unsafe',
                   '--feature', 'transaction.version=0')
    check('downgrade --unsafe to 0', 'transaction.version was downgraded to 0.' in out, out[-400:])
    _, epoch3 = all_at(bs, 0)
    others[0].restart()
    eq(f'broker {others[0].node_id} restarted: every broker still answers level 0 at the same epoch', (0, epoch3),
       all_at(bs, 0))
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[0].bootstrap, 'upgrade', '--feature',
                   'transaction.version=1')
    check(f'upgrade back to 1 through the restarted broker {others[0].node_id}',
          'transaction.version was upgraded to 1.' in out, out[-400:])
    _, epoch4 = all_at(bs, 1)
    check(f'  epoch {epoch3} -> {epoch4}', epoch4 > epoch3)
    # a cluster made before the features key existed (the upgrade to the default 2): the key deleted, the
    # brokers keep their level (0 here) at epoch -1; one restarted, its gregor.transaction.version not given,
    # answers 1 (the older builds' level), never the new default 2; an upgrade writes the key again
    etcd = st['etcd']
    rc, out = tool('kafka-features.sh', '--bootstrap-server', bs[0].bootstrap, 'downgrade', '--feature',
                   'transaction.version=0')
    all_at(bs, 0)
    keys = [key for key in etcd.get_prefix('/gregor/') if key.count('/') == 3 and key.endswith('/features')]
    eq('  one features key in etcd', 1, len(keys))
    etcd.ctl('del', keys[0], check=True)
    h.wait_until(lambda: all(raw_features(b) == (0, -1) for b in bs), 20, 'every broker at level 0, epoch -1')
    others[1].restart()
    h.wait_until(lambda: raw_features(others[1])[1] == -1, 20, 'the restarted broker answers')
    eq(f'  no key, broker {others[1].node_id} restarted at the default setting: level 1 at epoch -1 (not 2)',
       (1, -1), raw_features(others[1]))
    eq('  the others keep level 0 at epoch -1', [(0, -1)] * 2,
       [raw_features(b) for b in bs if b is not others[1]])
    rc, out = tool('kafka-features.sh', '--bootstrap-server', others[1].bootstrap, 'upgrade', '--feature',
                   'transaction.version=2')
    check(f'  upgrade --feature transaction.version=2 through broker {others[1].node_id} writes the key again',
          'transaction.version was upgraded to 2.' in out, out[-400:])
    _, epoch5 = all_at(bs, 2)
    check(f'  every broker at level 2, epoch {epoch5} > {epoch4}', epoch5 > epoch4)


def t_configs(run, bs, st):
    rc, out = tool('kafka-configs.sh', '--bootstrap-server', bs[0].bootstrap, '--alter', '--entity-type', 'topics',
                   '--entity-name', TOPIC, '--add-config', 'retention.ms=4321000')
    check('kafka-configs.sh --alter through broker 1', rc == 0 and 'Completed updating config' in out, out[-400:])
    shown = ''
    for _ in range(20):  # broker 3's watch brings the record a moment later
        rc, shown = tool('kafka-configs.sh', '--bootstrap-server', bs[2].bootstrap, '--describe', '--entity-type',
                         'topics', '--entity-name', TOPIC)
        if 'retention.ms=4321000' in shown:
            break
        time.sleep(0.2)
    check('kafka-configs.sh --describe through broker 3 shows retention.ms=4321000', 'retention.ms=4321000' in shown,
          shown[-400:])
    # min.insync.replicas: a cluster takes Kafka's range (>= 1) on a topic, at creation and by AlterConfigs
    # (a single-node broker refuses anything but 1); its own topic, so no produce here meets it
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[1].bootstrap, '--create', '--topic', MINISR_TOPIC,
                   '--partitions', 1, '--config', 'min.insync.replicas=2')
    check('kafka-topics.sh --create with min.insync.replicas=2', rc == 0 and 'Created topic' in out, out[-400:])
    rc, out = tool('kafka-configs.sh', '--bootstrap-server', bs[0].bootstrap, '--alter', '--entity-type', 'topics',
                   '--entity-name', MINISR_TOPIC, '--add-config', 'min.insync.replicas=3')
    check('kafka-configs.sh --alter min.insync.replicas=3', rc == 0 and 'Completed updating config' in out,
          out[-400:])
    for _ in range(20):
        rc, shown = tool('kafka-configs.sh', '--bootstrap-server', bs[2].bootstrap, '--describe', '--entity-type',
                         'topics', '--entity-name', MINISR_TOPIC)
        if 'min.insync.replicas=3' in shown:
            break
        time.sleep(0.2)
    check('kafka-configs.sh --describe through broker 3 shows min.insync.replicas=3', 'min.insync.replicas=3' in shown,
          shown[-400:])


def t_groups(run, bs, st):
    from confluent_kafka import Consumer, Producer
    boot = ','.join(b.bootstrap for b in bs)
    p = Producer({'bootstrap.servers': boot, 'linger.ms': 5})
    for i in range(120):
        p.produce(TOPIC, value=f'v{i}'.encode(), partition=i % 6)
    check('120 records acknowledged', p.flush(30) == 0)
    c = Consumer({'bootstrap.servers': boot, 'group.id': GROUP, 'auto.offset.reset': 'earliest',
                  'enable.auto.commit': False})
    c.subscribe([TOPIC])
    n, end = 0, time.monotonic() + 40
    while n < 120 and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            n += 1
    eq('the group read the 120 records', 120, n)
    c.commit(asynchronous=False)
    for b in (bs[0], bs[1]):
        rc, out = tool('kafka-consumer-groups.sh', '--bootstrap-server', b.bootstrap, '--list')
        check(f'kafka-consumer-groups.sh --list through broker {b.node_id} shows {GROUP}', GROUP in out.split(),
              out[-300:])
        rc, out = tool('kafka-consumer-groups.sh', '--bootstrap-server', b.bootstrap, '--describe', '--group', GROUP)
        rows = [ln.split() for ln in out.splitlines() if ln.startswith(GROUP + ' ')]
        got = {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows if len(r) >= 6 and r[3].isdigit()}
        eq(f'kafka-consumer-groups.sh --describe through broker {b.node_id}: 6 partitions, committed = log end, '
           f'lag 0', {p: (20, 20, 0) for p in range(6)}, got)
    c.close()
    # Deleted, then created again under the same name: the group's committed offsets of the old topic are
    # dropped by its coordinator (Kafka's onPartitionsDeleted), so the group reads the new topic from its
    # start; kept offsets (20 per partition) would skip 20 of each partition's 30 new records.
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[2].bootstrap, '--delete', '--topic', TOPIC)
    check('kafka-topics.sh --delete through broker 3', rc == 0, out[-300:])
    h.wait_until(lambda: all(not leaders_md(b) for b in bs), 15, 'the topic gone from every broker')
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[1].bootstrap, '--create', '--topic', TOPIC,
                   '--partitions', 6)
    check('created again under the same name', rc == 0 and 'Created topic' in out, out[-300:])
    h.wait_until(lambda: all(all_led(b) for b in bs), 15,
                 'every broker shows the new topic\'s leaders')
    for i in range(180):
        p.produce(TOPIC, value=f'new{i}'.encode(), partition=i % 6)
    check('180 records acknowledged on the new topic', p.flush(30) == 0)
    c = Consumer({'bootstrap.servers': boot, 'group.id': GROUP, 'auto.offset.reset': 'earliest',
                  'enable.auto.commit': False})
    c.subscribe([TOPIC])
    seen, end = set(), time.monotonic() + 40
    while len(seen) < 180 and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.add(m.value())
    c.close()
    eq('the group reads all 180 records of the new topic (its old offsets dropped)', 180, len(seen))


def describe_rows(b, *args):
    """kafka-topics.sh --describe through b with extra args: {(topic, partition): (replicas, isr)}."""
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', b.bootstrap, '--describe', *args)
    rows = {}
    for m in re.finditer(r'Topic: (\S+)\s+Partition: (\d+)\s+Leader: (-?\S+)\s+Replicas: (\S*)\s+Isr: (\S*)', out):
        rows[(m.group(1), int(m.group(2)))] = (m.group(4), m.group(5))
    return rc, out, rows


def replicas_md(b, topic):
    """{partition: (replica nodes, isr nodes)} as b's Metadata has them."""
    with k.Conn(b.bootstrap, timeout=5) as c:
        m = k.metadata(c, [topic], version=12, allow_auto=False)
    return {p['partition_index']: (list(p['replica_nodes']), sorted(p['isr_nodes']))
            for t in m['topics'] if t['name'] == topic for p in t['partitions']}


def t_partitions_rf3(run, bs, st):
    """CreatePartitions with explicit three-replica assignments on an RF 3 topic, and Kafka's checks of them
    (ReplicationControlManager.validateManualPartitionAssignment: a broker twice, a broker not registered, a
    replica count other than partition 0's; each INVALID_REPLICA_ASSIGNMENT, the topic unchanged)."""
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[0].bootstrap, '--create', '--topic', RF3_TOPIC,
                   '--partitions', 2, '--replication-factor', 3)
    check('kafka-topics.sh --create --replication-factor 3', rc == 0 and 'Created topic' in out, out[-400:])
    # --replica-assignment on --alter lists every partition, the existing ones first (TopicCommand takes
    # the rows from the current count on)
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[1].bootstrap, '--alter', '--topic', RF3_TOPIC,
                   '--partitions', 4, '--replica-assignment', '1:2:3,2:3:1,3:1:2,2:1:3')
    check('kafka-topics.sh --alter --partitions 4 --replica-assignment with three replicas each', rc == 0,
          out[-400:])
    h.wait_until(lambda: len(replicas_md(bs[2], RF3_TOPIC)) == 4, 15, 'broker 3 shows 4 partitions')
    got = {p: r for p, (r, _) in replicas_md(bs[2], RF3_TOPIC).items() if p >= 2}
    eq('  the new partitions have the replicas asked for, in that order', {2: [3, 1, 2], 3: [2, 1, 3]}, got)
    h.wait_until(lambda: all(isr == [1, 2, 3] for _, isr in replicas_md(bs[0], RF3_TOPIC).values()), 30,
                 'every partition of the RF 3 topic has the ISR 1,2,3')
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[0].bootstrap, '--alter', '--topic', RF3_TOPIC,
                   '--partitions', 5, '--replica-assignment', '1:2:3,2:3:1,3:1:2,2:1:3,3:1:9')
    check('--alter naming broker 9: InvalidReplicaAssignmentException from the broker',
          rc != 0 and 'InvalidReplicaAssignmentException' in out and 'broker 9' in out, out[-400:])
    # a broker twice and a replica count other than 3 the tool refuses itself; the broker's own checks, with
    # librdkafka's CreatePartitions (which sends them as given)
    from confluent_kafka.admin import AdminClient, NewPartitions
    admin = AdminClient({'bootstrap.servers': bs[2].bootstrap})
    for rows, what, words in (
            ([[3, 3, 1]], 'a broker twice', 'The manual partition assignment includes the broker 3 more than once.'),
            ([[3, 1]], 'two replicas on an RF 3 topic', 'The manual partition assignment includes a partition with 2 '
             'replica(s), but this is not consistent with previous partitions, which have 3 replica(s).'),
            ([[1, 2, 3], [1, 2, 3]], 'two rows for one new partition',
             'Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified.')):
        f = admin.create_partitions([NewPartitions(RF3_TOPIC, 5, replica_assignment=rows)])[RF3_TOPIC]
        try:
            f.result(30)
            err = None
        except Exception as e:  # noqa: BLE001 (KafkaException carries the broker's error)
            err = e.args[0] if e.args else e
        name = getattr(err, 'name', lambda: '')()
        msg = getattr(err, 'str', lambda: str(err))()
        eq(f'CreatePartitions with {what}: INVALID_REPLICA_ASSIGNMENT, Kafka\'s words',
           ('INVALID_REPLICA_ASSIGNMENT', words), (name, msg))
    eq('  the topic still has 4 partitions', 4, len(replicas_md(bs[1], RF3_TOPIC)))


def t_under_replicated(run, bs, st):
    """kafka-topics.sh --describe --under-replicated-partitions / --under-min-isr-partitions (TopicCommand:
    ISR smaller than the replicas; ISR smaller than the topic's min.insync.replicas, or no leader): a broker
    stopped, its partitions are listed; back and caught up, none is."""
    rc, out = tool('kafka-topics.sh', '--bootstrap-server', bs[0].bootstrap, '--create', '--topic', MIN3_TOPIC,
                   '--partitions', 1, '--replication-factor', 3, '--config', 'min.insync.replicas=3')
    check('kafka-topics.sh --create RF 3 with min.insync.replicas=3', rc == 0 and 'Created topic' in out,
          out[-400:])
    h.wait_until(lambda: replicas_md(bs[0], MIN3_TOPIC).get(0, ([], []))[1] == [1, 2, 3], 30,
                 f'{MIN3_TOPIC} has the ISR 1,2,3')
    # the two RF 3 topics (a regular expression, as --topic takes it): every partition has a replica on
    # each broker
    rf3 = ('--topic', 'tools-rf3.*')
    rc, out, rows = describe_rows(bs[0], *rf3)
    eq('kafka-topics.sh --describe --topic tools-rf3.*: 5 partitions, each with ISR 1,2,3',
       {(RF3_TOPIC, p): '1,2,3' for p in range(4)} | {(MIN3_TOPIC, 0): '1,2,3'},
       {tp: ','.join(sorted(isr.split(','))) for tp, (_, isr) in rows.items()})
    rc, out, rows = describe_rows(bs[0], *rf3, '--under-replicated-partitions')
    eq('--under-replicated-partitions with every broker up lists nothing', {}, rows)
    rc, out, rows = describe_rows(bs[0], *rf3, '--under-min-isr-partitions')
    eq('--under-min-isr-partitions with every broker up lists nothing', {}, rows)
    # the whole cluster: tools-min-isr (RF 1, min.insync.replicas=3 from the configs section) is listed, as
    # Kafka's TopicCommand lists any partition whose ISR is smaller than its topic's min.insync.replicas
    rc, out, rows = describe_rows(bs[0], '--under-min-isr-partitions')
    eq(f'  without --topic it lists {MINISR_TOPIC} (RF 1 < min.insync.replicas 3) only', [(MINISR_TOPIC, 0)],
       sorted(rows))
    bs[2].stop()
    h.wait_until(lambda: all('3' not in isr.split(',') for _, isr in describe_rows(bs[0], *rf3)[2].values()), 30,
                 'broker 3 out of the ISR of every RF 3 partition')
    rc, out, rows = describe_rows(bs[0], *rf3, '--under-replicated-partitions')
    eq('broker 3 stopped: --under-replicated-partitions lists every RF 3 partition (ISR 1,2)',
       sorted([(RF3_TOPIC, p) for p in range(4)] + [(MIN3_TOPIC, 0)]), sorted(rows))
    rc, out, rows = describe_rows(bs[1], *rf3, '--under-min-isr-partitions')
    eq(f'  --under-min-isr-partitions lists {MIN3_TOPIC} (ISR 2 < min.insync.replicas 3) and nothing else',
       [(MIN3_TOPIC, 0)], sorted(rows))
    bs[2].restart()
    h.wait_until(lambda: not describe_rows(bs[0], *rf3, '--under-replicated-partitions')[2], 60,
                 'no RF 3 partition under-replicated once broker 3 is back')
    rc, out, rows = describe_rows(bs[2], *rf3, '--under-replicated-partitions')
    eq('broker 3 back: --under-replicated-partitions (through broker 3) lists nothing', {}, rows)
    rc, out, rows = describe_rows(bs[2], *rf3, '--under-min-isr-partitions')
    eq('  --under-min-isr-partitions (through broker 3) lists nothing', {}, rows)


def main():
    seed, deadline = h.cli(deadline_s=240.0)
    t0 = time.monotonic()
    if not os.access(os.path.join(KAFKA_BIN, 'kafka-topics.sh'), os.X_OK):
        fail(f'Kafka\'s tools not found in {KAFKA_BIN} (compat-tests/kafka-dist/get-kafka.sh)')
        print(f'cluster-tools: {testkit.passed} passed, {testkit.failed} failed', flush=True)
        sys.exit(1)
    st = {}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-tools') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        st['etcd'] = etcd
        section('kafka-topics.sh', t_topics, run, bs, st)
        section('kafka-broker-api-versions.sh', t_api_versions, run, bs, st)
        section('kafka-features.sh', t_features, run, bs, st)
        section('kafka-configs.sh', t_configs, run, bs, st)
        section('kafka-consumer-groups.sh', t_groups, run, bs, st)
        section('kafka-topics.sh --alter --replica-assignment (RF 3)', t_partitions_rf3, run, bs, st)
        section('kafka-topics.sh --under-replicated-partitions / --under-min-isr-partitions', t_under_replicated,
                run, bs, st)
        section('kafka-features.sh upgrade / downgrade (UpdateFeatures)', t_update_features, run, bs, st)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-tools: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
