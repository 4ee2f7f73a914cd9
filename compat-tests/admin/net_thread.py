"""admin/net_thread.py: topic metadata operations leave the network thread free (Gregor issue #4).

Runs against a broker started with GREGOR_NET_THREAD_AUDIT=1 (admin/run.sh does), whose log is
$BROKER_DIR/broker.log: every call that may wait for the disk made on the network thread after start is
logged there as "net-thread disk call: <op> <path>". Each step below must add none:
  - Metadata auto-creation (answered UNKNOWN_TOPIC_OR_PARTITION as before; the next Metadata lists it);
  - CreateTopics with 50 partitions, while a second connection sends ApiVersions and Metadata in a loop:
    their answer times are printed (before the change the network thread was blocked for the whole
    creation), and at least two must come back while the creation runs;
  - two CreateTopics of one name in flight on two connections: one creates, the other gets
    TOPIC_ALREADY_EXISTS;
  - CreatePartitions, AlterConfigs, IncrementalAlterConfigs (confluent-kafka AdminClient);
  - DeleteTopics followed at once by CreateTopics of the same name;
  - the first group use (FindCoordinator creates __consumer_offsets lazily), then an offset commit.
Prints one line per check and ends with "RESULT <passed> <failed> <expected-fail>" (compat-tests/lib).
Read next: server/handlers/topic_ops.c, storage/store.h (gr_topic_op_*).
"""
import os
import select
import time

import kafka_raw as kr
import testkit as tk
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)

BOOT = tk.broker()
LOG = os.path.join(os.environ.get('BROKER_DIR', ''), 'broker.log')
adm = AdminClient({'bootstrap.servers': BOOT, 'client.id': 'gregor-net-thread-test'})
UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS = 3, 36


def audit_lines():
    with open(LOG, errors='replace') as f:
        return [line.rstrip() for line in f if 'net-thread disk call' in line]


def no_new_audit(step, before):
    time.sleep(0.2)  # completions the answer did not wait for (e.g. a log line after it) are in the log
    new = audit_lines()[len(before):]
    tk.check(f'{step}: no blocking call on the network thread', not new, '; '.join(new[:5]))
    return audit_lines()


def wait(futures, timeout=60):
    out = {}
    for k, f in futures.items():
        try:
            out[k] = f.result(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - the exception is the answer under test
            out[k] = e
    return out


def partitions(conn, name):
    t = kr.metadata(conn, [name], allow_auto=False)['topics'][0]
    return t['error_code'], len(t['partitions'])


def create_raw(conn, name, count):
    return conn.send('CreateTopics', 7, {
        'topics': [{'name': name, 'num_partitions': count, 'replication_factor': -1, 'configs': []}],
        'timeout_ms': 30000, 'validate_only': False})


def t_audit_on():
    with open(LOG, errors='replace') as f:
        text = f.read()
    tk.check('the broker runs with the network-thread audit on', 'network thread audit on' in text)


def t_all():
    seen = audit_lines()
    with kr.Conn(BOOT, timeout=30) as a, kr.Conn(BOOT, timeout=30) as b:
        # Metadata auto-creation
        r = kr.metadata(a, ['nt-auto'])['topics'][0]
        tk.eq('Metadata auto-creates nt-auto: answered UNKNOWN_TOPIC_OR_PARTITION while creating',
              UNKNOWN_TOPIC_OR_PARTITION, r['error_code'])
        tk.eq('the next Metadata lists nt-auto with 1 partition', (0, 1), partitions(a, 'nt-auto'))
        seen = no_new_audit('Metadata auto-creation', seen)

        # CreateTopics with 50 partitions; another connection is served meanwhile
        t0 = time.monotonic()
        corr = create_raw(a, 'nt-big', 50)
        lat_av, lat_md, during = [], [], 0
        while True:
            s = time.monotonic()
            kr.api_versions(b)
            lat_av.append(time.monotonic() - s)
            s = time.monotonic()
            kr.metadata(b, ['nt-auto'], allow_auto=False)
            lat_md.append(time.monotonic() - s)
            if select.select([a.sock], [], [], 0)[0] or a.buf:
                break
            during += 1
        res = a.recv('CreateTopics', 7, corr, timeout=60)[1]['topics'][0]
        create_ms = (time.monotonic() - t0) * 1000
        tk.eq('CreateTopics nt-big with 50 partitions', (0, 50), (res['error_code'], res['num_partitions']))
        tk.eq('Metadata lists nt-big with 50 partitions', (0, 50), partitions(a, 'nt-big'))
        print(f'  figure: 50-partition CreateTopics took {create_ms:.1f} ms; meanwhile another connection got '
              f'{len(lat_av)} ApiVersions (max {max(lat_av) * 1000:.2f} ms, median '
              f'{sorted(lat_av)[len(lat_av) // 2] * 1000:.2f} ms) and {len(lat_md)} Metadata answers (max '
              f'{max(lat_md) * 1000:.2f} ms)', flush=True)
        tk.check('another connection is answered while the 50-partition CreateTopics runs',
                 during >= 2, f'{during} ApiVersions+Metadata rounds answered in {create_ms:.0f} ms')
        seen = no_new_audit('CreateTopics (50 partitions)', seen)

        # two CreateTopics of one name in flight
        ca, cb = create_raw(a, 'nt-twice', 4), create_raw(b, 'nt-twice', 4)
        ra = a.recv('CreateTopics', 7, ca, timeout=60)[1]['topics'][0]['error_code']
        rb = b.recv('CreateTopics', 7, cb, timeout=60)[1]['topics'][0]['error_code']
        tk.eq('two CreateTopics of one name in flight: one creates, the other gets TOPIC_ALREADY_EXISTS',
              [0, TOPIC_ALREADY_EXISTS], sorted([ra, rb]))
        seen = no_new_audit('concurrent CreateTopics', seen)

        # CreatePartitions
        r = wait(adm.create_partitions([NewPartitions('nt-big', 60)]))
        tk.check('CreatePartitions nt-big to 60', r['nt-big'] is None, r)
        tk.eq('Metadata lists nt-big with 60 partitions', (0, 60), partitions(a, 'nt-big'))
        seen = no_new_audit('CreatePartitions', seen)

        # AlterConfigs and IncrementalAlterConfigs
        res = ConfigResource('topic', 'nt-big', set_config={'retention.ms': '3600000'})
        r = wait(adm.alter_configs([res]))
        tk.check('AlterConfigs retention.ms on nt-big', all(v is None for v in r.values()), r)
        res = ConfigResource('topic', 'nt-big', incremental_configs=[
            ConfigEntry('segment.bytes', '2000000', incremental_operation=AlterConfigOpType.SET)])
        r = wait(adm.incremental_alter_configs([res]))
        tk.check('IncrementalAlterConfigs segment.bytes on nt-big', all(v is None for v in r.values()), r)
        d = wait(adm.describe_configs([ConfigResource('topic', 'nt-big')]))
        cfg = next(iter(d.values()))
        got = None if isinstance(cfg, Exception) else (cfg['retention.ms'].value, cfg['segment.bytes'].value)
        tk.eq('DescribeConfigs shows both changes', ('3600000', '2000000'), got)
        seen = no_new_audit('AlterConfigs and IncrementalAlterConfigs', seen)

        # DeleteTopics, then CreateTopics of the same name at once
        r = wait(adm.delete_topics(['nt-big']))
        tk.check('DeleteTopics nt-big', r['nt-big'] is None, r)
        r = wait(adm.create_topics([NewTopic('nt-big', 3, 1)]))
        tk.check('CreateTopics nt-big again at once', r['nt-big'] is None, r)
        tk.eq('Metadata lists the new nt-big with 3 partitions', (0, 3), partitions(a, 'nt-big'))
        seen = no_new_audit('DeleteTopics + CreateTopics of the same name', seen)

        # first group use: __consumer_offsets is created lazily
        r = a.request('FindCoordinator', 3, {'key': 'nt-group', 'key_type': 0}, timeout=60)
        tk.eq('FindCoordinator on first group use answers this node', (0, 1), (r['error_code'], r['node_id']))
        tk.eq('__consumer_offsets exists with 50 partitions', (0, 50), partitions(a, '__consumer_offsets'))
    c = Consumer({'bootstrap.servers': BOOT, 'group.id': 'nt-group', 'enable.auto.commit': False})
    try:
        c.commit(offsets=[TopicPartition('nt-big', 0, 0)], asynchronous=False)
        got = c.committed([TopicPartition('nt-big', 0)], timeout=30)
        tk.eq('an offset commit in the new group is read back', 0, got[0].offset)
    finally:
        c.close()
    no_new_audit('first group use (lazy __consumer_offsets) and an offset commit', seen)


if __name__ == '__main__':
    tk.run('audit mode', t_audit_on)
    tk.run('topic operations off the network thread', t_all)
    tk.finish()
