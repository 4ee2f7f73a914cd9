"""tools.py: Kafka's own command-line tools against a 3-broker Gregor cluster (issue #19: "kafka-topics.sh
--describe shows leaders on several brokers; kafka-broker-api-versions.sh, kafka-consumer-groups.sh,
kafka-configs.sh work through any broker"), with Kafka 4.4.0's tools from compat-tests/kafka-dist
(get-kafka.sh; compat-tests/run.sh fetches them before the suites run).

What it checks (etcd and three brokers on free loopback ports, broker.session.timeout.ms 3000):
  - kafka-topics.sh --create through broker 2 makes a 6-partition topic; --describe through brokers 1 and 3
    prints the same partitions with leaders on all three brokers, each leader as Metadata has it;
  - kafka-broker-api-versions.sh through broker 3 lists the three brokers, each with its ApiVersions;
  - kafka-configs.sh --alter through broker 1 sets retention.ms on the topic, --describe through broker 3
    shows it; a topic created with min.insync.replicas=2 and altered to 3 (Kafka's range in cluster mode);
  - a librdkafka consumer group reads the topic and commits; kafka-consumer-groups.sh --list and --describe
    through brokers 1 and 2 show the group with its 6 partitions and committed offsets equal to the log end
    (lag 0); the topic deleted and created again under the same name, the group reads all of the new topic's
    records (its committed offsets of the old topic were dropped by its coordinator).
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
        section('kafka-topics.sh', t_topics, run, bs, st)
        section('kafka-broker-api-versions.sh', t_api_versions, run, bs, st)
        section('kafka-configs.sh', t_configs, run, bs, st)
        section('kafka-consumer-groups.sh', t_groups, run, bs, st)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-tools: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
