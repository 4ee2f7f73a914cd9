"""groups/run.py: consumer groups end to end with stock clients (run by groups/run.sh, in two phases).

phase1 (fresh broker, group.initial.rebalance.delay.ms=0):
  - 3 kcat -G consumers (librdkafka 2.0.2) on a 6-partition topic get 2 partitions each, with the range
    and the cooperative-sticky assignors (DescribeGroups through confluent-kafka's AdminClient);
  - one of them is killed (SIGKILL) and its partitions move to the others within the session timeout,
    and every record is consumed;
  - two groups on one topic each see every record; a kafka-python group consumer consumes and commits;
  - static membership (group.instance.id): a killed member restarted within the session timeout gets its
    partitions back without a rebalance of the other member;
  - a confluent-kafka consumer commits exactly what it consumed (half the topic), for phase2;
  - ListGroups / DescribeGroups / DeleteGroups (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND) and OffsetDelete
    (GROUP_SUBSCRIBED_TO_TOPIC) through the admin clients; Kafka's kafka-dump-log decodes __consumer_offsets.
phase2 (the same data directory after a SIGKILL of the broker and a restart):
  - the committed offsets survived; the consumer resumes and gets exactly the other half: nothing lost,
    nothing repeated; groups are listed again.
Prints one line per check and "RESULT p f x" (compat-tests/lib/testkit.py).
"""
import json
import os
import signal
import subprocess
import sys
import time

import testkit as tk
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

B = tk.broker()
DIR = os.environ['BROKER_DIR']
REPO = os.environ['REPO']
TOPIC = 'g6'
N = 600
STATE = os.path.join(DIR, 'groups-state.json')
procs = []


_admin = []


def admin():
    # one client for the whole run: a temporary one would be destroyed before its futures resolve
    if not _admin:
        _admin.append(AdminClient({'bootstrap.servers': B}))
    return _admin[0]


def wait_until(fn, timeout, step=0.2):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()


def describe(group):
    try:
        return admin().describe_consumer_groups([group], request_timeout=10)[group].result()
    except Exception:  # noqa: BLE001 - a group that does not exist yet
        return None


def assignment_sizes(group):
    d = describe(group)
    if not d:
        return None, []
    return d, sorted(len(m.assignment.topic_partitions) for m in d.members)


def kcat_group(group, name, *extra):
    """Starts kcat -G (unbuffered, one line per record) with a short session timeout."""
    out = open(os.path.join(DIR, f'{name}.out'), 'w')
    err = open(os.path.join(DIR, f'{name}.err'), 'w')
    p = subprocess.Popen(['kcat', '-b', B, '-G', group, '-u', '-f', '%p %o\n', '-X', 'auto.offset.reset=earliest',
                          '-X', 'session.timeout.ms=6000', '-X', 'heartbeat.interval.ms=500', *extra, TOPIC],
                         stdout=out, stderr=err)
    procs.append(p)
    return p


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def records_of(name):
    with open(os.path.join(DIR, f'{name}.out')) as f:
        return {tuple(map(int, line.split())) for line in f if line.strip()}


def rebalances_of(name):
    with open(os.path.join(DIR, f'{name}.err')) as f:
        return [line.strip() for line in f if 'rebalanced' in line and 'assigned' in line]


def setup_topic():
    fs = admin().create_topics([NewTopic(TOPIC, num_partitions=6, replication_factor=1)], request_timeout=15)
    fs[TOPIC].result()
    p = Producer({'bootstrap.servers': B, 'linger.ms': 5})
    for i in range(N):
        p.produce(TOPIC, key=f'k{i}', value=f'v{i}', partition=i % 6)
    tk.eq('produced 600 records to a 6-partition topic', 0, p.flush(30))


def three_consumers(group, assignor):
    ps = [kcat_group(group, f'{group}-{i}', '-X', f'partition.assignment.strategy={assignor}') for i in range(3)]
    d, sizes = wait_until(lambda: (lambda r: r if r[1] == [2, 2, 2] else None)(assignment_sizes(group)), 30) or \
        assignment_sizes(group)
    tk.eq(f'{assignor}: 3 kcat consumers on 6 partitions get 2 each', [2, 2, 2], sizes)
    if d:
        tk.eq(f'{assignor}: the group uses the {assignor} protocol', assignor, d.partition_assignor)
        parts = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
        tk.eq(f'{assignor}: every partition assigned exactly once', list(range(6)), parts)
        tk.eq(f'{assignor}: members have client id rdkafka and host /127.0.0.1', {('rdkafka', '/127.0.0.1')},
              {(m.client_id, m.host) for m in d.members})
    return ps


def test_range_and_kill():
    ps = three_consumers('grp-range', 'range')
    # let them consume everything, then kill one: its partitions move within the session timeout (6 s)
    wait_until(lambda: sum(len(records_of(f'grp-range-{i}')) for i in range(3)) >= N, 20)
    t0 = time.monotonic()
    stop(ps[0], signal.SIGKILL)
    d, sizes = wait_until(lambda: (lambda r: r if r[1] == [3, 3] else None)(assignment_sizes('grp-range')), 25) or \
        assignment_sizes('grp-range')
    dt = time.monotonic() - t0
    tk.eq('range: after one consumer is killed the two others own 3 partitions each', [3, 3], sizes)
    tk.check('range: the partitions moved within the session timeout plus one rebalance (< 12 s)', dt < 12,
             f'{dt:.1f} s')
    got = set().union(*(records_of(f'grp-range-{i}') for i in range(3)))
    tk.eq('range: every record was consumed by the group', N, len(got))
    for p in ps[1:]:
        stop(p)


def test_cooperative():
    ps = three_consumers('grp-coop', 'cooperative-sticky')
    for p in ps:
        stop(p)


def test_two_groups():
    outs = {}
    for g in ('grp-a', 'grp-b'):
        outs[g] = subprocess.Popen(['kcat', '-b', B, '-G', g, '-e', '-f', '%p %o\n', '-X', 'auto.offset.reset=earliest',
                                    TOPIC], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for g, p in outs.items():
        out, _ = p.communicate(timeout=60)
        tk.eq(f'two groups on one topic: {g} sees every record once', N, len(set(out.split('\n')) - {''}))


def test_kafka_python():
    from kafka import KafkaConsumer
    c = KafkaConsumer(TOPIC, bootstrap_servers=B, group_id='grp-kp', auto_offset_reset='earliest',
                      enable_auto_commit=False, consumer_timeout_ms=15000)
    seen = set()
    for m in c:
        seen.add((m.partition, m.offset))
        if len(seen) >= N:
            break
    c.commit()
    c.close()
    tk.eq('kafka-python group consumer reads every record', N, len(seen))
    offs = admin().list_consumer_group_offsets(
        [__import__('confluent_kafka').ConsumerGroupTopicPartitions('grp-kp')])['grp-kp'].result()
    tk.eq('kafka-python commit: OffsetFetch shows 100 on each partition',
          [(p, 100) for p in range(6)], sorted((tp.partition, tp.offset) for tp in offs.topic_partitions))


def test_static_membership():
    extra = ['-X', 'session.timeout.ms=10000']
    a = kcat_group('grp-static', 'static-a', '-X', 'group.instance.id=inst-a', *extra)
    b = kcat_group('grp-static', 'static-b', '-X', 'group.instance.id=inst-b', *extra)
    d, sizes = wait_until(lambda: (lambda r: r if r[1] == [3, 3] else None)(assignment_sizes('grp-static')), 30) or \
        assignment_sizes('grp-static')
    tk.eq('static: two static members own 3 partitions each', [3, 3], sizes)
    if not d:
        return
    before = {m.group_instance_id: (m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
              for m in d.members}
    tk.eq('static: DescribeGroups shows the group.instance.ids', {'inst-a', 'inst-b'}, set(before))
    time.sleep(2)
    b_rebalances = len(rebalances_of('static-b'))
    stop(a, signal.SIGKILL)
    a2 = kcat_group('grp-static', 'static-a2', '-X', 'group.instance.id=inst-a', *extra)

    def restarted():
        dd = describe('grp-static')
        if not dd or len(dd.members) != 2:
            return None
        cur = {m.group_instance_id: m for m in dd.members}
        m = cur.get('inst-a')
        return dd if m and m.member_id != before['inst-a'][0] and rebalances_of('static-a2') else None
    d2 = wait_until(restarted, 20)
    tk.check('static: the restarted member rejoined under a new member id', d2 is not None)
    if d2:
        after = {m.group_instance_id: (m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                 for m in d2.members}
        tk.eq('static: the restarted member kept its partitions', before['inst-a'][1], after['inst-a'][1])
        tk.eq('static: the other member kept its id and partitions', before['inst-b'], after['inst-b'])
    time.sleep(1)
    tk.eq('static: the other member saw no rebalance', b_rebalances, len(rebalances_of('static-b')))
    tk.eq('static: DeleteGroups on the non-empty group -> NON_EMPTY_GROUP', 'NON_EMPTY_GROUP',
          delete_group_error('grp-static'))
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    def listed(**kw):
        return {g.group_id for g in admin().list_consumer_groups(request_timeout=10, **kw).result().valid}
    stable = listed(states={ConsumerGroupState.STABLE})
    tk.check('ListGroups states filter Stable: the static group, not the Empty ones',
             'grp-static' in stable and 'grp-range' not in stable, sorted(stable))
    tk.check('ListGroups types filter classic: listed', 'grp-static' in listed(types={ConsumerGroupType.CLASSIC}))
    tk.eq('ListGroups types filter consumer: no classic group', set(), listed(types={ConsumerGroupType.CONSUMER}))
    # OffsetDelete on a topic the members subscribe to
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=B)
    res = ka.delete_group_offsets('grp-static', [KTP(TOPIC, 0)])
    tk.eq('OffsetDelete on a subscribed topic of a Stable group -> GROUP_SUBSCRIBED_TO_TOPIC',
          'GroupSubscribedToTopicError', res[KTP(TOPIC, 0)].__name__)
    ka.close()
    for p in (b, a2):
        stop(p)


def delete_group_error(group):
    try:
        admin().delete_consumer_groups([group], request_timeout=10)[group].result()
        return 'NONE'
    except Exception as e:  # noqa: BLE001
        err = e.args[0] if e.args else e
        return err.name() if hasattr(err, 'name') else str(e)


def test_admin():
    groups = {g.group_id: g for g in admin().list_consumer_groups(request_timeout=10).result().valid}
    for g in ('grp-range', 'grp-coop', 'grp-a', 'grp-b', 'grp-kp'):
        tk.check(f'ListGroups shows {g}', g in groups, sorted(groups))
    tk.eq('ListGroups: a group whose members left is Empty', 'EMPTY',
          groups['grp-kp'].state.name if 'grp-kp' in groups else None)
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=B)
    res = ka.delete_group_offsets('grp-a', [KTP(TOPIC, 5)])
    tk.eq('OffsetDelete on an Empty group: 0', 'NoError', res[KTP(TOPIC, 5)].__name__)
    ka.close()
    offs = admin().list_consumer_group_offsets(
        [__import__('confluent_kafka').ConsumerGroupTopicPartitions('grp-a', [TopicPartition(TOPIC, 5)])])['grp-a'].result()
    tk.eq('OffsetDelete: the deleted offset reads back as -1', -1001, offs.topic_partitions[0].offset)
    tk.eq('DeleteGroups on an Empty group: 0', 'NONE', delete_group_error('grp-kp'))
    tk.eq('DeleteGroups on an unknown group -> GROUP_ID_NOT_FOUND', 'GROUP_ID_NOT_FOUND', delete_group_error('grp-kp'))
    groups = {g.group_id for g in admin().list_consumer_groups(request_timeout=10).result().valid}
    tk.check('ListGroups no longer shows the deleted group', 'grp-kp' not in groups)


def test_commit_half():
    c = Consumer({'bootstrap.servers': B, 'group.id': 'grp-dur', 'enable.auto.commit': False,
                  'auto.offset.reset': 'earliest'})
    c.subscribe([TOPIC])
    seen = []
    t0 = time.monotonic()
    while len(seen) < N // 2 and time.monotonic() - t0 < 30:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        seen.append((m.partition(), m.offset()))
        c.commit(message=m, asynchronous=False)
    c.close()
    tk.eq('confluent consumer consumed and committed half the topic', N // 2, len(seen))
    with open(STATE, 'w') as f:
        json.dump(seen, f)


def group_offset(group, topic, partition):
    from confluent_kafka import ConsumerGroupTopicPartitions
    res = admin().list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition)])])
    return res[group].result().topic_partitions[0].offset


def consume_values(group, topic, want, commit):
    c = Consumer({'bootstrap.servers': B, 'group.id': group, 'enable.auto.commit': False,
                  'auto.offset.reset': 'earliest'})
    c.subscribe([topic])
    got = []
    t0 = time.monotonic()
    while len(got) < want and time.monotonic() - t0 < 30:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append(m.value().decode())
        if commit:
            c.commit(message=m, asynchronous=False)
    c.close()
    return got


def produce_values(topic, values):
    p = Producer({'bootstrap.servers': B})
    for v in values:
        p.produce(topic, v.encode(), partition=0)
    tk.eq(f'{topic}: every record acknowledged', 0, p.flush(15))


def test_deleted_topic_offsets():
    """Kafka drops every group's committed offsets of a deleted topic: a topic re-created under the same name
    is read from its start, not from the old incarnation's positions (records would be skipped)."""
    t = 'grp-deleted-topic'
    admin().create_topics([NewTopic(t, 1, 1)])[t].result()
    produce_values(t, ['old0', 'old1', 'old2'])
    tk.eq('the group consumed and committed the first incarnation', ['old0', 'old1', 'old2'],
          consume_values('grp-del', t, 3, True))
    tk.eq('committed offset 3 before the deletion', 3, group_offset('grp-del', t, 0))
    admin().delete_topics([t])[t].result()
    tk.eq('after DeleteTopics the group has no committed offset for the topic', -1001, group_offset('grp-del', t, 0))
    wait_until(lambda: not admin().create_topics([NewTopic(t, 1, 1)])[t].exception(), 10)
    produce_values(t, ['new0', 'new1', 'new2'])
    tk.eq('the re-created topic is read from its start by the same group', ['new0', 'new1', 'new2'],
          consume_values('grp-del', t, 3, False))


def test_dump_log():
    from_group = 'grp-dur'
    # Kafka's partition for the group, from Java's String.hashCode
    h = 0
    for ch in from_group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    part = (0 if h == -(1 << 31) else abs(h)) % 50
    d = os.path.join(DIR, 'data', f'__consumer_offsets-{part}')
    segs = sorted(f for f in os.listdir(d) if f.endswith('.log'))
    tool = os.path.join(REPO, 'compat-tests', '.cache', 'kafka-4.4.0', 'bin', 'kafka-dump-log.sh')
    if not os.path.exists(tool):
        tk.xfail("Kafka's kafka-dump-log decodes __consumer_offsets", 'the Kafka distribution (compat-tests/kafka-dist)')
        return
    out = subprocess.run([tool, '--offsets-decoder', '--files', os.path.join(d, segs[0])], capture_output=True,
                         text=True, timeout=120).stdout
    tk.check("Kafka's kafka-dump-log --offsets-decoder reads the group's offset commits",
             f'"group":"{from_group}","topic":"{TOPIC}"' in out and '"version":"3"' in out, out[-300:])


def test_raw_offsets():
    """OffsetCommit / OffsetFetch field by field with the strict raw client (compat-tests/lib/kafka_raw.py)."""
    import kafka_raw as k

    def commit(version, topics, group='raw-simple'):
        vals = {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '', 'group_instance_id': None,
                'topics': [{'name': n, 'partitions': [{'partition_index': p, 'committed_offset': o,
                                                        'committed_leader_epoch': 3, 'committed_metadata': md}
                                                       for p, o, md in parts]} for n, parts in topics]}
        r = c.request('OffsetCommit', version, vals)
        return {(t['name'], p['partition_index']): p['error_code'] for t in r['topics'] for p in t['partitions']}

    with k.Conn(B) as c:
        errs = commit(8, [(TOPIC, [(0, 5, 'm'), (99, 1, None)]), ('no-such-topic', [(0, 1, None)])])
        tk.eq('OffsetCommit v8: known partition 0, unknown partition and unknown topic 3',
              {(TOPIC, 0): 0, (TOPIC, 99): k.UNKNOWN_TOPIC_OR_PARTITION, ('no-such-topic', 0): k.UNKNOWN_TOPIC_OR_PARTITION},
              errs)
        errs = commit(2, [(TOPIC, [(1, 7, 'x' * 4097), (2, 8, 'y' * 4096)])])
        tk.eq('OffsetCommit v2: metadata over offset.metadata.max.bytes -> 12, at the limit -> 0',
              {(TOPIC, 1): 12, (TOPIC, 2): 0}, errs)
        r = c.request('OffsetFetch', 7, {'group_id': 'raw-simple', 'topics': None, 'require_stable': False})
        got = {(t['name'], p['partition_index']): (p['committed_offset'], p['committed_leader_epoch'],
                                                   p['metadata'][:1] + str(len(p['metadata'])), p['error_code'])
               for t in r['topics'] for p in t['partitions']}
        # the v2 commit carried no leader epoch (v6+): -1
        tk.eq('OffsetFetch v7 topics=null: every committed partition with its leader epoch and metadata',
              {(TOPIC, 0): (5, 3, 'm1', 0), (TOPIC, 2): (8, -1, 'y4096', 0)}, got)
        tk.eq('OffsetFetch v7: top-level error 0', 0, r['error_code'])
        r = c.request('OffsetFetch', 8, {'groups': [
            {'group_id': 'raw-simple', 'topics': [{'name': TOPIC, 'partition_indexes': [0, 1]}]},
            {'group_id': 'never-seen', 'topics': None}], 'require_stable': True})
        g = {x['group_id']: x for x in r['groups']}
        tk.eq('OffsetFetch v8 batch: committed 5 / uncommitted -1 with epoch -1 and metadata ""',
              [(0, 5, 3, 'm', 0), (1, -1, -1, '', 0)],
              [(p['partition_index'], p['committed_offset'], p['committed_leader_epoch'], p['metadata'], p['error_code'])
               for p in g['raw-simple']['topics'][0]['partitions']])
        tk.eq('OffsetFetch v8: an unknown group has no offsets and no error', ([], 0),
              (g['never-seen']['topics'], g['never-seen']['error_code']))
        r = c.request('OffsetFetch', 1, {'group_id': 'raw-simple', 'topics': [{'name': TOPIC, 'partition_indexes': [0]}]})
        tk.eq('OffsetFetch v1 reads the same offset', 5, r['topics'][0]['partitions'][0]['committed_offset'])
        # v10 (KIP-848) names topics by id; the values are those Kafka 4.4.0 answered to the same requests.
        tid, bad = k.topic_id(B, TOPIC), bytes(range(16))
        r = c.request('OffsetCommit', 10, {
            'group_id': 'raw-v10', 'generation_id_or_member_epoch': -1, 'member_id': '', 'group_instance_id': None,
            'topics': [{'topic_id': t, 'partitions': [{'partition_index': p, 'committed_offset': 9,
                                                       'committed_leader_epoch': -1, 'committed_metadata': 'md'}]}
                       for t, p in ((tid, 0), (tid, 99), (bad, 0), (k.ZERO_UUID, 0))]})
        tk.eq('OffsetCommit v10 by topic id: known 0, unknown partition 3, unknown id and zero id 100 UNKNOWN_TOPIC_ID',
              [(tid, 0), (tid, 3), (bad, 100), (k.ZERO_UUID, 100)],
              [(t['topic_id'], p['error_code']) for t in r['topics'] for p in t['partitions']])
        r = c.request('OffsetFetch', 10, {'groups': [
            {'group_id': 'raw-v10', 'member_id': None, 'member_epoch': -1,
             'topics': [{'topic_id': tid, 'partition_indexes': [0, 1]}, {'topic_id': bad, 'partition_indexes': [0]}]},
            {'group_id': 'raw-v10', 'member_id': None, 'member_epoch': -1, 'topics': None}], 'require_stable': False})
        tk.eq('OffsetFetch v10 by id: committed 9 / uncommitted -1; an unknown id -1 with 100 UNKNOWN_TOPIC_ID',
              [(tid, 0, 9, 'md', 0), (tid, 1, -1, '', 0), (bad, 0, -1, '', 100)],
              [(t['topic_id'], p['partition_index'], p['committed_offset'], p['metadata'], p['error_code'])
               for t in r['groups'][0]['topics'] for p in t['partitions']])
        tk.eq('OffsetFetch v10 topics=null: the committed topic by its id', [(tid, [0])],
              [(t['topic_id'], [p['partition_index'] for p in t['partitions']]) for t in r['groups'][1]['topics']])
        r = c.request('OffsetFetch', 9, {'groups': [{'group_id': 'raw-v10', 'member_id': None, 'member_epoch': -1,
                                                      'topics': [{'name': TOPIC, 'partition_indexes': [0]}]}],
                                         'require_stable': False})
        tk.eq('OffsetFetch v9 by name reads the v10 commit', 9, r['groups'][0]['topics'][0]['partitions'][0]['committed_offset'])
        r = c.request('Heartbeat', 4, {'group_id': 'raw-simple', 'generation_id': 0, 'member_id': 'nobody',
                                       'group_instance_id': None})
        tk.eq('Heartbeat v4 from an unknown member of a simple group -> 25', k.UNKNOWN_MEMBER_ID, r['error_code'])
        r = c.request('JoinGroup', 5, {'group_id': 'raw-j', 'session_timeout_ms': 5999, 'rebalance_timeout_ms': 5999,
                                       'member_id': '', 'group_instance_id': None, 'protocol_type': 'consumer',
                                       'protocols': [{'name': 'range', 'metadata': b''}]})
        tk.eq('JoinGroup below group.min.session.timeout.ms -> 26 INVALID_SESSION_TIMEOUT', 26, r['error_code'])


def phase1():
    tk.run('setup topic', setup_topic)
    tk.run('raw OffsetCommit/OffsetFetch', test_raw_offsets)
    tk.run('range assignor and a killed member', test_range_and_kill)
    tk.run('cooperative-sticky assignor', test_cooperative)
    tk.run('two groups', test_two_groups)
    tk.run('kafka-python', test_kafka_python)
    tk.run('static membership', test_static_membership)
    tk.run('admin', test_admin)
    tk.run('commit half', test_commit_half)
    tk.run('kafka-dump-log', test_dump_log)
    tk.run('offsets of a deleted topic', test_deleted_topic_offsets)


def phase2():
    with open(STATE) as f:
        first = {tuple(x) for x in json.load(f)}
    c = Consumer({'bootstrap.servers': B, 'group.id': 'grp-dur', 'enable.auto.commit': False,
                  'auto.offset.reset': 'earliest'})
    c.subscribe([TOPIC])
    second = []
    t0 = time.monotonic()
    idle = None
    while time.monotonic() - t0 < 40:
        m = c.poll(0.5)
        if m is None or m.error():
            if len(second) >= N - len(first):
                idle = idle or time.monotonic()
                if time.monotonic() - idle > 2:
                    break
            continue
        idle = None
        second.append((m.partition(), m.offset()))
    c.close()
    tk.eq('after a broker SIGKILL and restart the group resumes: nothing repeated', [], sorted(first & set(second)))
    tk.eq('after the restart: nothing lost (both halves make the topic)', N, len(first | set(second)))
    tk.eq('after the restart: no record delivered twice in the second half', len(second), len(set(second)))
    tk.eq('after the restart: the deleted topic\'s old offset stays deleted (tombstone replayed)', -1001,
          group_offset('grp-del', 'grp-deleted-topic', 0))
    groups = {g.group_id for g in admin().list_consumer_groups(request_timeout=10).result().valid}
    tk.check('after the restart: the groups are listed again', {'grp-range', 'grp-a', 'grp-dur'} <= groups,
             sorted(groups))


if __name__ == '__main__':
    try:
        (phase1 if sys.argv[1] == 'phase1' else phase2)()
    finally:
        for p in procs:
            stop(p, signal.SIGKILL)
    tk.finish()
