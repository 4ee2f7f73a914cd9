"""admin/run.py: the admin APIs against a running broker, driven by real clients.

Two clients, both independent of Gregor's codec:
  - kafka-python 3 (pure Python, messages generated from Kafka's own JSON schemas) sends each API at each
    served version with hand-chosen fields, so exact error codes, messages and field values are asserted;
  - confluent-kafka (librdkafka) AdminClient does what applications do: create/delete topics, create
    partitions, describe/alter/incrementally alter configs, delete records, describe the cluster.
Phases (argv[1]): "main" (everything below, against a fresh broker), "restarted" (after the suite restarted
Gregor on the same data: configs and partition counts persisted), "nodelete" (delete.topic.enable=false).

The same script runs against Apache Kafka 4.4.0 (run.sh --bootstrap HOST:PORT): the target is detected by
DescribeConfigs on the broker (Gregor has gregor.* keys). Where Gregor deliberately differs, both answers are
written down (`if GREGOR ... else ...`), so a comparison run shows exactly those differences and nothing
else; checks that would damage a Kafka broker (deleting __consumer_offsets) are Gregor-only.
Prints one line per check and ends with "RESULT <passed> <failed> <expected-fail>" (compat-tests/lib).
Read next: compat-tests/admin/run.sh, server/handlers/describe_configs.c.
"""
import os
import sys
import time
import uuid

import testkit as tk
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import (AlterConfigsRequest, AlterReplicaLogDirsRequest, CreatePartitionsRequest,
                                  CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
                                  DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest,
                                  IncrementalAlterConfigsRequest)
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic)

TOPIC, BROKER_RES, LOGGER_RES = 2, 4, 8
DYNAMIC_TOPIC, STATIC_BROKER, DEFAULT = 1, 4, 5
INT, LONG, LIST, BOOLEAN, STRING, DOUBLE = 3, 5, 7, 1, 2, 6
INT32_MIN = -2**31

BOOT = tk.broker()
PHASE = sys.argv[1] if len(sys.argv) > 1 else 'main'
raw = KafkaAdminClient(bootstrap_servers=BOOT, client_id='gregor-admin-test', request_timeout_ms=20000)
adm = AdminClient({'bootstrap.servers': BOOT, 'client.id': 'gregor-admin-test'})


def send(cls, version, **fields):
    """Sends one request at exactly `version` to the (only) broker and returns the response as a dict."""
    req = cls(min_version=version, max_version=version, **fields)

    async def go():
        return await raw._manager.send(req, node_id=raw._manager.cluster.brokers()[0].node_id)
    return raw._manager.run(go).to_dict()


def wait(futures, timeout=30):
    """Results of a confluent-kafka future dict: {key: result or exception}."""
    out = {}
    for k, f in futures.items():
        try:
            out[k] = f.result(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - the exception is the answer under test
            out[k] = e
    return out


def kafka_code(exc):
    """The Kafka error code inside a confluent-kafka exception, or None."""
    err = exc.args[0] if getattr(exc, 'args', None) else None
    return err.code() if hasattr(err, 'code') else None


def describe(rtype, name, keys=None, version=4, synonyms=False, doc=False):
    r = send(DescribeConfigsRequest, version, resources=[(rtype, name, keys)], include_synonyms=synonyms,
             include_documentation=doc)
    return r['results'][0]


def cfg(rtype, name, keys=None, **kw):
    res = describe(rtype, name, keys, **kw)
    return {c['name']: c for c in res['configs']}


def alter(resources, version=2, validate=False):
    r = send(AlterConfigsRequest, version, resources=resources, validate_only=validate)
    return [(x['error_code'], x['error_message']) for x in r['responses']]


def ialter(resources, version=1, validate=False):
    r = send(IncrementalAlterConfigsRequest, version, resources=resources, validate_only=validate)
    return [(x['error_code'], x['error_message']) for x in r['responses']]


def metadata_topics():
    r = send(MetadataRequest, 12, topics=None, allow_auto_topic_creation=False,
             include_topic_authorized_operations=False)
    return {t['name']: t for t in r['topics']}


def node_id():
    return raw._manager.cluster.brokers()[0].node_id


def is_gregor():
    return 'gregor.log.level' in cfg(BROKER_RES, str(node_id()), ['gregor.log.level'])


GREGOR = is_gregor()
NODE = node_id()


def create(name, partitions, config=None):
    res = wait(adm.create_topics([NewTopic(name, partitions, 1, config=config or {})]))
    tk.check(f'create topic {name}', res[name] is None, repr(res[name]))
    deadline = time.time() + 10
    while name not in metadata_topics() and time.time() < deadline:
        time.sleep(0.1)


def produce(topic, partition, count):
    p = Producer({'bootstrap.servers': BOOT, 'acks': 'all', 'linger.ms': 0})
    for i in range(count):
        p.produce(topic, key=b'k%d' % i, value=b'value-%d' % i, partition=partition)
        p.flush(10)  # one batch per record: offsets and batch boundaries are predictable
    tk.eq(f'all {count} records to {topic}-{partition} delivered', 0, p.flush(10))


# ---------------------------------------------------------------- DescribeCluster

def t_describe_cluster():
    md = send(MetadataRequest, 12, topics=[], allow_auto_topic_creation=False)
    for v in (0, 1, 2):
        kw = {'include_cluster_authorized_operations': False}
        if v >= 1:
            kw['endpoint_type'] = 1
        if v >= 2:
            kw['include_fenced_brokers'] = True
        r = send(DescribeClusterRequest, v, **kw)
        tk.eq(f'DescribeCluster v{v}: error', 0, r['error_code'])
        tk.eq(f'DescribeCluster v{v}: cluster id = Metadata cluster id', md['cluster_id'], r['cluster_id'])
        tk.eq(f'DescribeCluster v{v}: controller', NODE, r['controller_id'])
        b = r['brokers']
        tk.eq(f'DescribeCluster v{v}: one broker at the bootstrap address', [(NODE, BOOT)],
              [(x['broker_id'], f"{x['host']}:{x['port']}") for x in b])
        tk.eq(f'DescribeCluster v{v}: no operations when not asked', None, r['authorized_operations'])
        if v >= 2:
            tk.eq('DescribeCluster v2: broker not fenced', False, b[0]['is_fenced'])
    r = send(DescribeClusterRequest, 2, include_cluster_authorized_operations=True, endpoint_type=1,
             include_fenced_brokers=False)
    tk.eq('DescribeCluster: cluster operations when asked (no authorizer)', [5, 7, 8, 9, 10, 11, 12],
          sorted(r['authorized_operations']))
    r = send(DescribeClusterRequest, 1, include_cluster_authorized_operations=False, endpoint_type=2)
    tk.eq('DescribeCluster: controller endpoint type -> MISMATCHED_ENDPOINT_TYPE', (114, -1, ''),
          (r['error_code'], r['controller_id'], r['cluster_id']))
    r = send(DescribeClusterRequest, 1, include_cluster_authorized_operations=False, endpoint_type=3)
    tk.eq('DescribeCluster: unknown endpoint type', (115, 'Unsupported endpoint type 3'),
          (r['error_code'], r['error_message']))
    d = adm.describe_cluster().result(timeout=20)
    tk.eq('AdminClient.describe_cluster: cluster id and controller', (md['cluster_id'], NODE),
          (d.cluster_id, d.controller.id))
    tk.eq('AdminClient.describe_cluster: nodes', [(NODE, BOOT)], [(n.id, f'{n.host}:{n.port}') for n in d.nodes])


# ---------------------------------------------------------------- DescribeConfigs

# Kafka 4.4.0's 37 topic configs with their types (what a Kafka 4.4.0 broker answers).
TOPIC_TYPES = {
    'cleanup.policy': LIST, 'compression.gzip.level': INT, 'compression.lz4.level': INT,
    'compression.type': STRING, 'compression.zstd.level': INT, 'delete.retention.ms': LONG,
    'errors.deadletterqueue.group.enable': BOOLEAN, 'file.delete.delay.ms': LONG, 'flush.messages': LONG, 'flush.ms': LONG,
    'follower.replication.throttled.replicas': LIST, 'index.interval.bytes': INT,
    'leader.replication.throttled.replicas': LIST, 'local.retention.bytes': LONG, 'local.retention.ms': LONG,
    'max.compaction.lag.ms': LONG, 'max.decompressed.message.bytes': INT, 'max.message.bytes': INT, 'message.timestamp.after.max.ms': LONG,
    'message.timestamp.before.max.ms': LONG, 'message.timestamp.type': STRING, 'min.cleanable.dirty.ratio': DOUBLE,
    'min.compaction.lag.ms': LONG, 'min.insync.replicas': INT, 'preallocate': BOOLEAN,
    'remote.copy.lag.bytes': LONG, 'remote.copy.lag.ms': LONG, 'remote.log.copy.disable': BOOLEAN, 'remote.log.delete.on.disable': BOOLEAN, 'remote.storage.enable': BOOLEAN,
    'retention.bytes': LONG, 'retention.ms': LONG, 'segment.bytes': INT, 'segment.index.bytes': INT,
    'segment.jitter.ms': LONG, 'segment.ms': LONG, 'unclean.leader.election.enable': BOOLEAN,
}
# Defaults (and the broker synonyms listed for them) that a broker started without overrides shows.
TOPIC_DEFAULTS = {
    'cleanup.policy': ('delete', [('log.cleanup.policy', 'delete', DEFAULT)]),
    'compression.type': ('producer', [('compression.type', 'producer', DEFAULT)]),
    'flush.ms': ('9223372036854775807', []),
    'min.cleanable.dirty.ratio': ('0.5', [('log.cleaner.min.cleanable.ratio', '0.5', DEFAULT)]),
    'segment.bytes': ('1073741824', [('log.segment.bytes', '1073741824', DEFAULT)]),
    'segment.ms': ('604800000', []),
    'file.delete.delay.ms': ('60000', [('log.segment.delete.delay.ms', '60000', DEFAULT)]),
    'leader.replication.throttled.replicas': ('', []),
    'unclean.leader.election.enable': ('false', [('unclean.leader.election.enable', 'false', DEFAULT)]),
    'local.retention.ms': ('-2', [('log.local.retention.ms', '-2', DEFAULT)]),
    # Kafka 4.4's additions
    'max.decompressed.message.bytes': ('2147483639', [('max.decompressed.message.bytes', '2147483639', DEFAULT)]),
    'remote.copy.lag.ms': ('0', [('log.remote.copy.lag.ms', '0', DEFAULT)]),
    'remote.copy.lag.bytes': ('-1', [('log.remote.copy.lag.bytes', '-1', DEFAULT)]),
    'errors.deadletterqueue.group.enable': ('false', []),
}


def syn(entry):
    return [(s['name'], s['value'], s['source']) for s in entry['synonyms']]


def t_describe_configs_topic():
    max_bytes = cfg(BROKER_RES, str(NODE), ['message.max.bytes'])['message.max.bytes']['value']
    for v in (1, 2, 3, 4):
        res = describe(TOPIC, 'adm-a', version=v, synonyms=True, doc=v >= 3)
        tk.eq(f'DescribeConfigs v{v} topic: error', 0, res['error_code'])
        c = {x['name']: x for x in res['configs']}
        tk.eq(f'DescribeConfigs v{v} topic: Kafka 4.4 full topic config set', sorted(TOPIC_TYPES), sorted(c))
        r = c['retention.ms']
        tk.eq(f'DescribeConfigs v{v} topic: override value, source, synonyms',
              ('3600000', DYNAMIC_TOPIC, [('retention.ms', '3600000', DYNAMIC_TOPIC)]),
              (r['value'], r['config_source'], syn(r)))
        tk.eq(f'DescribeConfigs v{v} topic: max.message.bytes follows message.max.bytes={max_bytes} (static)',
              (max_bytes, STATIC_BROKER, [('message.max.bytes', max_bytes, STATIC_BROKER),
                                          ('message.max.bytes', '1048588', DEFAULT)]),
              (c['max.message.bytes']['value'], c['max.message.bytes']['config_source'], syn(c['max.message.bytes'])))
        if v >= 3:
            tk.eq(f'DescribeConfigs v{v} topic: config_type of every key', TOPIC_TYPES,
                  {k: x['config_type'] for k, x in c.items()})
            tk.check(f'DescribeConfigs v{v} topic: documentation when asked',
                     all(x['documentation'] for x in c.values()), 'a config without documentation')
        tk.check(f'DescribeConfigs v{v} topic: nothing read-only or sensitive',
                 not any(x['read_only'] or x['is_sensitive'] for x in c.values()))
    c = cfg(TOPIC, 'adm-a', synonyms=True)
    got = {k: (c[k]['value'], syn(c[k])) for k in TOPIC_DEFAULTS}
    tk.eq('DescribeConfigs topic: defaults and their broker synonyms', TOPIC_DEFAULTS, got)
    tk.eq('DescribeConfigs topic: default source', DEFAULT, c['segment.bytes']['config_source'])
    c = cfg(TOPIC, 'adm-a', synonyms=False, doc=False)
    tk.check('DescribeConfigs topic: no synonyms unless asked', all(x['synonyms'] == [] for x in c.values()))
    tk.check('DescribeConfigs topic: no documentation unless asked', all(x['documentation'] is None for x in c.values()))
    c = cfg(TOPIC, 'adm-a', ['retention.ms', 'no.such.key', 'cleanup.policy'])
    tk.eq('DescribeConfigs topic: configuration_keys filter (unknown names left out)',
          ['cleanup.policy', 'retention.ms'], sorted(c))
    tk.eq('DescribeConfigs topic: unknown topic', 3, describe(TOPIC, 'adm-nope')['error_code'])
    r = describe(TOPIC, '')
    tk.eq('DescribeConfigs topic: empty name', (17, 'Topic name is invalid: the empty string is not allowed'),
          (r['error_code'], r['error_message']))
    tk.eq('DescribeConfigs topic: invalid name', 17, describe(TOPIC, 'bad name!')['error_code'])
    # confluent-kafka (librdkafka) reads the same answer
    res = wait(adm.describe_configs([ConfigResource('TOPIC', 'adm-a')]))
    entries = list(res.values())[0]
    tk.eq('AdminClient.describe_configs topic: 37 entries', 37, len(entries))
    tk.eq('AdminClient.describe_configs topic: retention.ms is a dynamic topic config',
          ('3600000', ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
          (entries['retention.ms'].value, entries['retention.ms'].source))


def t_describe_configs_broker():
    c = cfg(BROKER_RES, str(NODE), version=4, synonyms=True, doc=True)
    tk.check('DescribeConfigs broker: has the broker table', {'message.max.bytes', 'log.retention.hours',
                                                              'num.partitions', 'log.dirs'} <= set(c))
    m = c['message.max.bytes']
    tk.eq('DescribeConfigs broker: a static value with its default as synonym',
          (STATIC_BROKER, INT, [('message.max.bytes', m['value'], STATIC_BROKER), ('message.max.bytes', '1048588', DEFAULT)]),
          (m['config_source'], m['config_type'], syn(m)))
    r = c['log.retention.ms']
    tk.eq('DescribeConfigs broker: log.retention.ms is null by default, no synonyms',
          (None, DEFAULT, [], LONG), (r['value'], r['config_source'], syn(r), r['config_type']))
    h = c['log.retention.hours']
    tk.eq('DescribeConfigs broker: log.retention.hours default', ('168', DEFAULT, [('log.retention.hours', '168', DEFAULT)]),
          (h['value'], h['config_source'], syn(h)))
    tk.eq('DescribeConfigs broker: read-only unless dynamic (DynamicBrokerConfig.AllDynamicConfigs)',
          {'message.max.bytes': False, 'log.retention.ms': False, 'log.retention.hours': True,
           'num.partitions': True, 'log.dirs': True}, {k: c[k]['read_only'] for k in
                                                        ('message.max.bytes', 'log.retention.ms', 'log.retention.hours',
                                                         'num.partitions', 'log.dirs')})
    if GREGOR:
        tk.check('DescribeConfigs broker: documented', all(x['documentation'] for x in c.values()))
    r = describe(BROKER_RES, '')
    tk.eq('DescribeConfigs broker "": cluster-wide dynamic defaults', 0, r['error_code'])
    if GREGOR:  # Kafka's storage format tool sets min.insync.replicas there
        tk.eq('DescribeConfigs broker "": none set yet', [], r['configs'])
    r = describe(BROKER_RES, str(NODE + 1))
    tk.eq('DescribeConfigs broker: another node id',
          (42, f'Unexpected broker id, expected {NODE} or empty string, but received {NODE + 1}'),
          (r['error_code'], r['error_message']))
    r = describe(BROKER_RES, 'x')
    tk.eq('DescribeConfigs broker: not a number', (42, 'Broker id must be an integer, but it is: x'),
          (r['error_code'], r['error_message']))
    r = describe(LOGGER_RES, str(NODE))
    tk.eq('DescribeConfigs broker logger: error', 0, r['error_code'])
    tk.check('DescribeConfigs broker logger: loggers with source DYNAMIC_BROKER_LOGGER_CONFIG',
             r['configs'] and all(x['config_source'] == 6 for x in r['configs']))
    if GREGOR:
        tk.eq('DescribeConfigs broker logger: Gregor has one logger, root at gregor.log.level',
              [('root', 'INFO')], [(x['name'], x['value']) for x in r['configs']])
    r = describe(LOGGER_RES, '')
    tk.eq('DescribeConfigs broker logger: empty name', (42, 'Broker id must not be empty'),
          (r['error_code'], r['error_message']))
    tk.eq('DescribeConfigs: unknown resource type', 42, describe(3, 'x')['error_code'])
    res = wait(adm.describe_configs([ConfigResource('BROKER', str(NODE))]))
    entries = list(res.values())[0]
    tk.eq('AdminClient.describe_configs broker: message.max.bytes', m['value'], entries['message.max.bytes'].value)


# ---------------------------------------------------------------- CreateTopics configs (v5+)

def t_create_topics_configs():
    """Kafka's ReplicationControlManager lists every topic config of the new topic, sorted by name, with the
    value and source DescribeConfigs shows (validate_only too); Gregor used to send an empty list. Topic-level
    values come back as the request gave them (KafkaConfigSchema.toConfigEntry keeps a String as is)."""
    for v in (5, 7):
        for validate in (True, False):
            name = f'adm-ctc{v}'
            r = send(CreateTopicsRequest, v, topics=[(name, 1, -1, [], [('retention.ms', ' 3600000'),
                                                                        ('cleanup.policy', 'compact, delete')])],
                     timeout_ms=30000, validate_only=validate)
            t = r['topics'][0]
            what = f'CreateTopics v{v} validate_only={validate}'
            tk.eq(f'{what}: created', (0, 1, 1), (t['error_code'], t['num_partitions'], t['replication_factor']))
            got = {c['name']: c for c in t['configs']}
            tk.eq(f'{what}: every topic config, sorted by name', (37, sorted(got)), (len(t['configs']),
                                                                                    [c['name'] for c in t['configs']]))
            tk.eq(f'{what}: topic-level values as given (KafkaConfigSchema), source DYNAMIC_TOPIC_CONFIG',
                  {'retention.ms': (' 3600000', DYNAMIC_TOPIC), 'cleanup.policy': ('compact, delete', DYNAMIC_TOPIC)},
                  {k: (got[k]['value'], got[k]['config_source']) for k in ('retention.ms', 'cleanup.policy')})
            tk.eq(f'{what}: message.max.bytes from the static broker value (STATIC_BROKER_CONFIG)',
                  ('2000000', STATIC_BROKER), (got['max.message.bytes']['value'], got['max.message.bytes']['config_source']))
            tk.eq(f'{what}: segment.ms default from log.roll.hours (DEFAULT_CONFIG)',
                  ('604800000', DEFAULT), (got['segment.ms']['value'], got['segment.ms']['config_source']))
            tk.check(f'{what}: none read-only or sensitive',
                     not any(c['read_only'] or c['is_sensitive'] for c in t['configs']))
            d = cfg(TOPIC, name) if not validate else None
            if d:  # DescribeConfigs normalises what CreateTopics echoed (Kafka 4.1.1 checked side by side)
                norm = {'retention.ms': '3600000', 'cleanup.policy': 'compact,delete'}
                tk.eq(f'{what}: the same values and sources as DescribeConfigs, which normalises',
                      {k: (x['value'], x['config_source']) for k, x in d.items()},
                      {k: (norm.get(k, x['value']), x['config_source']) for k, x in got.items()})


# ---------------------------------------------------------------- AlterConfigs

def t_alter_configs():
    for v in (0, 1, 2):
        tk.eq(f'AlterConfigs v{v}: set two keys', [(0, None)],
              alter([(TOPIC, 'adm-b', [('retention.ms', '7200000'), ('segment.ms', ' 600000 ')])], version=v))
        c = cfg(TOPIC, 'adm-b', ['retention.ms', 'segment.ms', 'cleanup.policy'])
        tk.eq(f'AlterConfigs v{v}: both are topic configs, values normalised',
              {'retention.ms': ('7200000', DYNAMIC_TOPIC), 'segment.ms': ('600000', DYNAMIC_TOPIC),
               'cleanup.policy': ('delete', DEFAULT)},
              {k: (x['value'], x['config_source']) for k, x in c.items()})
        tk.eq(f'AlterConfigs v{v}: replace with one key', [(0, None)],
              alter([(TOPIC, 'adm-b', [('segment.ms', '900000')])], version=v))
        c = cfg(TOPIC, 'adm-b', ['retention.ms', 'segment.ms'])
        tk.eq(f'AlterConfigs v{v}: keys not sent return to their defaults',
              {'retention.ms': ('604800000', DEFAULT), 'segment.ms': ('900000', DYNAMIC_TOPIC)},
              {k: (x['value'], x['config_source']) for k, x in c.items()})
    tk.eq('AlterConfigs: validate_only', [(0, None)],
          alter([(TOPIC, 'adm-b', [('retention.ms', '1')])], validate=True))
    tk.eq('AlterConfigs: validate_only changed nothing', ('604800000', '900000'),
          tuple(cfg(TOPIC, 'adm-b', ['retention.ms', 'segment.ms'])[k]['value'] for k in ('retention.ms', 'segment.ms')))
    tk.eq('AlterConfigs: empty set clears every override', [(0, None)], alter([(TOPIC, 'adm-b', [])]))
    tk.eq('AlterConfigs: nothing left at topic level', [],
          [k for k, x in cfg(TOPIC, 'adm-b').items() if x['config_source'] == DYNAMIC_TOPIC])
    cases = [
        ('unknown key', [('foo.bar', '1')], (40, 'Unknown topic config name: foo.bar')),
        ('not a number', [('retention.ms', 'abc')],
         (40, 'Invalid value abc for configuration retention.ms: Not a number of type LONG')),
        ('below the minimum', [('segment.ms', '0')],
         (40, 'Invalid value 0 for configuration segment.ms: Value must be at least 1')),
        ('not one of', [('compression.type', 'brotli')],
         (40, 'Invalid value brotli for configuration compression.type: String must be one of: uncompressed, '
              'zstd, lz4, snappy, gzip, producer')),
        ('bad list item', [('cleanup.policy', 'delete,foo')],
         (40, 'Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete')),
        ('bad boolean', [('preallocate', 'yes')],
         (40, 'Invalid value yes for configuration preallocate: Expected value to be either true or false')),
        ('double above max', [('min.cleanable.dirty.ratio', '1.5')],
         (40, 'Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1')),
        ('null value', [('retention.ms', None)], (42, 'Null value not supported for : retention.ms')),
        ('duplicate keys', [('retention.ms', '1'), ('retention.ms', '2')], (42, 'Error due to duplicate config keys')),
        ('compaction lags', [('min.compaction.lag.ms', '10'), ('max.compaction.lag.ms', '5')],
         (40, 'conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)')),
    ]
    for name, configs, expected in cases:
        tk.eq(f'AlterConfigs: {name}', [expected], alter([(TOPIC, 'adm-b', configs)]))
    tk.eq('AlterConfigs: unknown topic', [(3, "The topic 'adm-nope' does not exist.")],
          alter([(TOPIC, 'adm-nope', [('retention.ms', '5')])]))
    tk.eq('AlterConfigs: default topic resource', [(42, 'Default topic resources are not allowed.')],
          alter([(TOPIC, '', [('retention.ms', '5')])]))
    tk.eq('AlterConfigs: unknown resource type', [(42, 'Unknown resource type 3')], alter([(3, 'x', [])]))
    tk.eq('AlterConfigs: broker of another node', [(42, f'Unexpected broker id, expected {NODE}, but received {NODE + 1}')],
          alter([(BROKER_RES, str(NODE + 1), [('log.retention.ms', '5')])], validate=True))
    # values Kafka accepts but Gregor would not enforce: refused with a message, never accepted silently
    refused = [('min.insync.replicas', '2'),
               ('remote.storage.enable', 'true'), ('preallocate', 'true'),
               ('segment.jitter.ms', '100')]
    for k, val in refused:
        got = alter([(TOPIC, 'adm-b', [(k, val)])], validate=True)
        if GREGOR:
            tk.check(f'AlterConfigs: Gregor refuses {k}={val} (INVALID_CONFIG with a message)',
                     got[0][0] == 40 and got[0][1], got)
        elif k != 'remote.storage.enable':  # Kafka needs remote.log.storage.system.enable for that one
            tk.eq(f'AlterConfigs: Kafka accepts {k}={val}', [(0, None)], got)
    # values with no effect on one node without compaction or tiered storage are accepted by both
    tk.eq('AlterConfigs: inert values accepted', [(0, None)],
          alter([(TOPIC, 'adm-b', [('delete.retention.ms', '1000'), ('unclean.leader.election.enable', 'true'),
                                   ('file.delete.delay.ms', '1000'),
                                   ('compression.zstd.level', '5'), ('local.retention.ms', '-2')])], validate=True))
    got = alter([(BROKER_RES, str(NODE), [('log.retention.ms', '5')])], validate=True)
    tk.eq('AlterConfigs broker: a dynamic broker config is accepted (validate_only)', [(0, None)], got)
    tk.eq('AlterConfigs broker: nothing to change is no error', [(0, None)], alter([(BROKER_RES, str(NODE), [])]))
    # confluent-kafka's alter_configs (AlterConfigs v0-v2 under the hood)
    res = wait(adm.alter_configs([ConfigResource('TOPIC', 'adm-b', set_config={'retention.bytes': '100000000'})]))
    tk.eq('AdminClient.alter_configs topic', [None], list(res.values()))
    tk.eq('AdminClient.alter_configs: visible in DescribeConfigs', ('100000000', DYNAMIC_TOPIC),
          tuple(cfg(TOPIC, 'adm-b', ['retention.bytes'])['retention.bytes'][k] for k in ('value', 'config_source')))


# ---------------------------------------------------------------- IncrementalAlterConfigs

def t_incremental_alter_configs():
    thr = 'follower.replication.throttled.replicas'
    for v in (0, 1):
        tk.eq(f'IncrementalAlterConfigs v{v}: SET two keys', [(0, None)],
              ialter([(TOPIC, 'adm-b', [('retention.ms', 0, '1800000'), ('segment.ms', 0, '700000')])], version=v))
    tk.eq('IncrementalAlterConfigs: DELETE one, APPEND to a list', [(0, None)],
          ialter([(TOPIC, 'adm-b', [('segment.ms', 1, None), (thr, 2, '0:1,1:1')])]))
    c = cfg(TOPIC, 'adm-b', ['retention.ms', 'segment.ms', thr, 'retention.bytes'])
    tk.eq('IncrementalAlterConfigs: other keys kept, deleted key back to default',
          {'retention.ms': ('1800000', DYNAMIC_TOPIC), 'segment.ms': ('604800000', DEFAULT),
           thr: ('0:1,1:1', DYNAMIC_TOPIC), 'retention.bytes': ('100000000', DYNAMIC_TOPIC)},
          {k: (x['value'], x['config_source']) for k, x in c.items()})
    tk.eq('IncrementalAlterConfigs: APPEND adds only new items', [(0, None)],
          ialter([(TOPIC, 'adm-b', [(thr, 2, '1:1,2:1')])]))
    tk.eq('IncrementalAlterConfigs: APPEND result', '0:1,1:1,2:1', cfg(TOPIC, 'adm-b', [thr])[thr]['value'])
    tk.eq('IncrementalAlterConfigs: SUBTRACT', [(0, None)], ialter([(TOPIC, 'adm-b', [(thr, 3, '0:1,9:9')])]))
    tk.eq('IncrementalAlterConfigs: SUBTRACT result', '1:1,2:1', cfg(TOPIC, 'adm-b', [thr])[thr]['value'])
    tk.eq('IncrementalAlterConfigs: SUBTRACT from the default list', [(0, None)],
          ialter([(TOPIC, 'adm-b', [('cleanup.policy', 3, 'delete')])]))
    tk.eq('IncrementalAlterConfigs: cleanup.policy is now empty at topic level', ('', DYNAMIC_TOPIC),
          tuple(cfg(TOPIC, 'adm-b', ['cleanup.policy'])['cleanup.policy'][k] for k in ('value', 'config_source')))
    tk.eq('IncrementalAlterConfigs: APPEND delete back', [(0, None)],
          ialter([(TOPIC, 'adm-b', [('cleanup.policy', 2, 'delete')])]))
    tk.eq('IncrementalAlterConfigs: APPEND to a non-list',
          [(40, "Can't APPEND to key retention.ms because its type is not LIST.")],
          ialter([(TOPIC, 'adm-b', [('retention.ms', 2, '5')])]))
    tk.eq('IncrementalAlterConfigs: SUBTRACT from a non-list',
          [(40, "Can't SUBTRACT to key retention.ms because its type is not LIST.")],
          ialter([(TOPIC, 'adm-b', [('retention.ms', 3, '5')])]))
    tk.eq('IncrementalAlterConfigs: null value for SET', [(42, 'Null value not supported for : retention.ms')],
          ialter([(TOPIC, 'adm-b', [('retention.ms', 0, None)])]))
    tk.eq('IncrementalAlterConfigs: DELETE of an unknown key is no error', [(0, None)],
          ialter([(TOPIC, 'adm-b', [('foo.bar', 1, None)])]))
    tk.eq('IncrementalAlterConfigs: SET of an unknown key', [(40, 'Unknown topic config name: foo.bar')],
          ialter([(TOPIC, 'adm-b', [('foo.bar', 0, 'x')])]))
    got = ialter([(TOPIC, 'adm-b', [('retention.ms', 7, '5')])], validate=True)
    tk.eq('IncrementalAlterConfigs: unknown operation', 42 if GREGOR else -1, got[0][0])
    got = ialter([(TOPIC, 'adm-b', [('cleanup.policy', 2, 'compact')])], validate=True)
    tk.eq('IncrementalAlterConfigs: APPEND compact accepted (log compaction is built)', [(0, None)], got)
    for val in ('compact', 'delete,compact'):
        tk.eq(f'AlterConfigs: cleanup.policy={val} accepted', [(0, None)],
              alter([(TOPIC, 'adm-b', [('cleanup.policy', val)])], validate=True))
    got = ialter([(LOGGER_RES, str(NODE), [('root', 0, 'DEBUG')])], validate=True)
    tk.eq('IncrementalAlterConfigs: broker logger (validate_only)', 0, got[0][0])
    # confluent-kafka
    res = wait(adm.incremental_alter_configs([ConfigResource('TOPIC', 'adm-b', incremental_configs=[
        ConfigEntry('retention.ms', '2400000', incremental_operation=AlterConfigOpType.SET),
        ConfigEntry('retention.bytes', None, incremental_operation=AlterConfigOpType.DELETE)])]))
    tk.eq('AdminClient.incremental_alter_configs', [None], list(res.values()))
    c = cfg(TOPIC, 'adm-b', ['retention.ms', 'retention.bytes'])
    tk.eq('AdminClient.incremental_alter_configs: result',
          {'retention.ms': ('2400000', DYNAMIC_TOPIC), 'retention.bytes': ('-1', DEFAULT)},
          {k: (x['value'], x['config_source']) for k, x in c.items()})
    res = wait(adm.incremental_alter_configs([ConfigResource('TOPIC', 'adm-b', incremental_configs=[
        ConfigEntry('min.insync.replicas', '2', incremental_operation=AlterConfigOpType.SET)])]), 20)
    e = list(res.values())[0]
    if GREGOR:
        tk.check('AdminClient.incremental_alter_configs: min.insync.replicas=2 refused (one node)',
                 e is not None and kafka_code(e) == 40 and 'single-node' in str(e), repr(e))
    else:
        tk.eq('AdminClient.incremental_alter_configs: Kafka accepts min.insync.replicas=2', None, e)
        wait(adm.incremental_alter_configs([ConfigResource('TOPIC', 'adm-b', incremental_configs=[
            ConfigEntry('min.insync.replicas', None, incremental_operation=AlterConfigOpType.DELETE)])]))


# ---------------------------------------------------------------- dynamic broker configs

DYNAMIC_BROKER, DYNAMIC_DEFAULT = 2, 3


def bsyn(name, key, rtype=BROKER_RES):
    e = cfg(rtype, name, [key], synonyms=True)[key]
    return (e['value'], e['config_source'], e['read_only'], syn(e))


def segment_files(topic, partition):
    d = os.path.join(os.environ.get('BROKER_DIR', ''), 'data', f'{topic}-{partition}')
    return len([f for f in os.listdir(d) if f.endswith('.log')]) if os.path.isdir(d) else -1


def eventually(name, expected, fn, timeout=5.0):
    """tk.eq once fn() returns `expected` or `timeout` passed: a KRaft broker applies a committed config change
    a few milliseconds after the controller answered (Gregor before it answers)."""
    deadline = time.time() + timeout
    got = fn()
    while got != expected and time.time() < deadline:
        time.sleep(0.1)
        got = fn()
    return tk.eq(name, expected, got)


def t_dynamic_broker_configs():
    """kafka-configs.sh --alter --entity-type brokers (--entity-name 1 / --entity-default) as Kafka 4.x answers
    it: ConfigAdminManager's checks, ConfigHelper's sources and synonym order, the topic that inherits."""
    node = str(NODE)
    tk.eq('IncrementalAlterConfigs broker: SET log.retention.ms', [(0, None)],
          ialter([(BROKER_RES, node, [('log.retention.ms', 0, '3600000')])]))
    eventually('DescribeConfigs broker: DYNAMIC_BROKER_CONFIG, then the default synonym',
               ('3600000', DYNAMIC_BROKER, False, [('log.retention.ms', '3600000', DYNAMIC_BROKER),
                                                   ('log.retention.hours', '168', DEFAULT)]),
               lambda: bsyn(node, 'log.retention.ms'))
    create('adm-dyn', 1)
    eventually('a topic without retention.ms follows log.retention.ms (DYNAMIC_BROKER_CONFIG)',
               ('3600000', DYNAMIC_BROKER), lambda: tuple(bsyn('adm-dyn', 'retention.ms', TOPIC)[:2]))
    mib, two_mib = str(1 << 20), str(2 << 20)  # Kafka 4.1's smallest log.segment.bytes is 1 MiB
    tk.eq('IncrementalAlterConfigs default: SET log.segment.bytes', [(0, None)],
          ialter([(BROKER_RES, '', [('log.segment.bytes', 0, mib)])]))
    eventually('DescribeConfigs broker "": the default level only',
               [('log.segment.bytes', mib, DYNAMIC_DEFAULT, False, [('log.segment.bytes', mib, DYNAMIC_DEFAULT)])],
               lambda: [(x['name'], x['value'], x['config_source'], x['read_only'], syn(x))
                        for x in describe(BROKER_RES, '', synonyms=True)['configs'] if x['name'] == 'log.segment.bytes'])
    eventually('a topic follows the new default at once (DYNAMIC_DEFAULT_BROKER_CONFIG)',
               (mib, DYNAMIC_DEFAULT, False, [('log.segment.bytes', mib, DYNAMIC_DEFAULT),
                                              ('log.segment.bytes', '1073741824', DEFAULT)]),
               lambda: bsyn('adm-dyn', 'segment.bytes', TOPIC))
    tk.eq('per-broker over default: SET log.segment.bytes on the node', [(0, None)],
          ialter([(BROKER_RES, node, [('log.segment.bytes', 0, two_mib)])]))
    eventually('synonyms in Kafka\'s order: per-broker, default, DEFAULT_CONFIG',
               (two_mib, DYNAMIC_BROKER, False, [('log.segment.bytes', two_mib, DYNAMIC_BROKER),
                                                 ('log.segment.bytes', mib, DYNAMIC_DEFAULT),
                                                 ('log.segment.bytes', '1073741824', DEFAULT)]),
               lambda: bsyn('adm-dyn', 'segment.bytes', TOPIC))
    tk.eq('DELETE the per-broker value: the default applies again', [(0, None)],
          ialter([(BROKER_RES, node, [('log.segment.bytes', 1, None)])]))
    eventually('after DELETE', (mib, DYNAMIC_DEFAULT), lambda: tuple(bsyn('adm-dyn', 'segment.bytes', TOPIC)[:2]))
    p = Producer({'bootstrap.servers': BOOT, 'acks': 'all', 'linger.ms': 5, 'batch.size': 65536})
    for i in range(2400):
        p.produce('adm-dyn', value=b'x' * 1000, partition=0)
        if i % 200 == 199:
            p.flush(30)
    tk.eq('2.4 MB produced', 0, p.flush(30))
    if GREGOR and os.environ.get('BROKER_DIR'):
        tk.check('behaviour: 2.4 MB into a topic inheriting log.segment.bytes=1 MiB rolls segments',
                 segment_files('adm-dyn', 0) >= 2, segment_files('adm-dyn', 0))
    for key in ('num.partitions', 'log.retention.hours', 'log.roll.hours'):
        tk.eq(f'IncrementalAlterConfigs broker: {key} is not dynamic in Kafka',
              [(42, f'Cannot update these configs dynamically: [{key}]')],
              ialter([(BROKER_RES, node, [(key, 0, '3')])]))
    tk.eq('broker-level min.insync.replicas: refused while ELR is on (Kafka 4.1+)',
          [(40, 'Broker-level min.insync.replicas cannot be altered while ELR is enabled.')],
          ialter([(BROKER_RES, node, [('min.insync.replicas', 0, '2')])]))
    tk.eq('a bad value: INVALID_REQUEST with ConfigDef\'s message',
          [(42, 'Invalid value abc for configuration log.retention.ms: Not a number of type LONG')],
          ialter([(BROKER_RES, node, [('log.retention.ms', 0, 'abc')])]))
    tk.eq('APPEND on a non-list config', [(40, 'Config value append is not allowed for config key: log.retention.ms')],
          ialter([(BROKER_RES, node, [('log.retention.ms', 2, '5')])]))
    tk.eq('validate_only changes nothing', [(0, None)],
          ialter([(BROKER_RES, node, [('log.retention.bytes', 0, '1000')])], validate=True))
    time.sleep(0.5 if not GREGOR else 0)
    tk.eq('validate_only: still the default', ('-1', DEFAULT), tuple(bsyn(node, 'log.retention.bytes')[:2]))
    tk.eq('APPEND compact to log.cleanup.policy (default level)', [(0, None)],
          ialter([(BROKER_RES, '', [('log.cleanup.policy', 2, 'compact')])]))
    eventually('APPEND result', ('delete,compact', DYNAMIC_DEFAULT),
               lambda: tuple(bsyn('', 'log.cleanup.policy')[:2]) if 'log.cleanup.policy' in cfg(BROKER_RES, '') else None)
    tk.eq('SUBTRACT delete', [(0, None)], ialter([(BROKER_RES, '', [('log.cleanup.policy', 3, 'delete')])]))
    eventually('the topic follows cleanup.policy=compact', ('compact', DYNAMIC_DEFAULT),
               lambda: tuple(bsyn('adm-dyn', 'cleanup.policy', TOPIC)[:2]))
    tk.eq('DELETE log.cleanup.policy', [(0, None)], ialter([(BROKER_RES, '', [('log.cleanup.policy', 1, None)])]))
    tk.eq('AlterConfigs broker replaces the whole per-broker set', [(0, None)],
          alter([(BROKER_RES, node, [('log.retention.bytes', '100000000'), ('log.retention.ms', '7200000')])]))
    eventually('AlterConfigs result', {'log.retention.bytes': ('100000000', DYNAMIC_BROKER),
                                       'log.retention.ms': ('7200000', DYNAMIC_BROKER),
                                       'log.segment.bytes': (mib, DYNAMIC_DEFAULT)},
               lambda: {k: (x['value'], x['config_source']) for k, x in
                        cfg(BROKER_RES, node, ['log.retention.bytes', 'log.retention.ms', 'log.segment.bytes']).items()})
    tk.eq('AlterConfigs broker: refused key', [(42, 'Cannot update these configs dynamically: [num.partitions]')],
          alter([(BROKER_RES, node, [('num.partitions', '3')])]))
    # the broker logger (Kafka's RuntimeLoggerManager): Gregor's one logger is root
    tk.eq('broker logger: SET root=DEBUG', [(0, None)], ialter([(LOGGER_RES, node, [('root', 0, 'DEBUG')])]))
    eventually('broker logger: described at DEBUG', ('DEBUG', 6, False),
               lambda: next((x['value'], x['config_source'], x['read_only'])
                            for x in describe(LOGGER_RES, node)['configs'] if x['name'] == 'root'))
    tk.eq('broker logger: SET root=INFO', [(0, None)], ialter([(LOGGER_RES, node, [('root', 0, 'INFO')])]))
    tk.eq('broker logger: a bad level', [(40, 'Cannot set the log level of root to LOUD as it is not a supported log '
                                              'level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN')],
          ialter([(LOGGER_RES, node, [('root', 0, 'LOUD')])]))
    tk.eq('broker logger: DELETE root', [(42, 'Removing the log level of the root logger is not allowed')],
          ialter([(LOGGER_RES, node, [('root', 1, None)])]))
    tk.eq('broker logger: APPEND', [(42, 'APPEND operation is not allowed for the BROKER_LOGGER resource')],
          ialter([(LOGGER_RES, node, [('root', 2, 'x')])]))
    if GREGOR:
        tk.eq('broker logger: Gregor has no other logger', [(40, 'Logger kafka.server does not exist!')],
              ialter([(LOGGER_RES, node, [('kafka.server', 0, 'DEBUG')])]))


# ---------------------------------------------------------------- CreatePartitions

def cp(topics, v=3, validate=False):
    r = send(CreatePartitionsRequest, v, topics=topics, timeout_ms=10000, validate_only=validate)
    return sorted((x['name'], x['error_code'], x['error_message']) for x in r['results'])


def partitions_after(topic, count):
    """Metadata's partitions of `topic` once there are `count` (Kafka propagates them asynchronously;
    Gregor has them before it answers CreatePartitions, so it gets no grace)."""
    deadline = time.time() + (0 if GREGOR else 15)
    while True:
        parts = metadata_topics()[topic]['partitions']
        if len(parts) >= count or time.time() >= deadline:
            return parts
        time.sleep(0.2)


def t_create_partitions():
    tk.eq('CreatePartitions: count equal to the current one',
          [('adm-a', 37, 'Topic already has 4 partition(s).')], cp([('adm-a', 4, None)]))
    tk.eq('CreatePartitions: decrease',
          [('adm-a', 37, 'The topic adm-a currently has 4 partition(s); 3 would not be an increase.')],
          cp([('adm-a', 3, None)]))
    tk.eq('CreatePartitions: duplicate name answered once', [('adm-a', 42, 'Duplicate topic name.')],
          cp([('adm-a', 5, None), ('adm-a', 6, None)]))
    tk.eq('CreatePartitions: unknown topic', [('adm-nope', 3, None)], cp([('adm-nope', 2, None)]))
    tk.eq('CreatePartitions: assignment to an unknown broker',
          [('adm-a', 39, f'The manual partition assignment includes broker {NODE + 7}, but no such broker is registered.')],
          cp([('adm-a', 5, [([NODE + 7],)])]))
    tk.eq('CreatePartitions: assignment count',
          [('adm-a', 39, 'Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.')],
          cp([('adm-a', 6, [([NODE],)])]))
    tk.eq('CreatePartitions: a broker twice in one assignment',
          [('adm-a', 39, f'The manual partition assignment includes the broker {NODE} more than once.')],
          cp([('adm-a', 5, [([NODE, NODE],)])]))
    tk.eq('CreatePartitions: validate_only', [('adm-a', 0, None)], cp([('adm-a', 5, [([NODE],)])], validate=True))
    tk.eq('CreatePartitions: validate_only changed nothing', 4, len(metadata_topics()['adm-a']['partitions']))
    for v in (0, 1, 2, 3):
        tk.eq(f'CreatePartitions v{v}: grow by one', [('adm-a', 0, None)], cp([('adm-a', 5 + v, None)], v=v))
    md = partitions_after('adm-a', 8)
    tk.eq('CreatePartitions: Metadata shows 8 partitions led by this node', [(p, NODE) for p in range(8)],
          sorted((p['partition_index'], p['leader_id']) for p in md))
    res = wait(adm.create_partitions([NewPartitions('adm-a', 9)]))
    tk.eq('AdminClient.create_partitions', [None], list(res.values()))
    tk.eq('AdminClient.create_partitions: 9 partitions', 9, len(partitions_after('adm-a', 9)))
    produce('adm-a', 8, 3)
    got = cp([('__consumer_offsets', 60, None)], validate=True)
    if GREGOR:
        tk.eq('CreatePartitions: Gregor refuses to grow __consumer_offsets', 42, got[0][1])
    else:
        tk.eq('CreatePartitions: Kafka lets __consumer_offsets grow', 0, got[0][1])


# ---------------------------------------------------------------- DeleteRecords / OffsetForLeaderEpoch

def dr(topics, v=2):
    r = send(DeleteRecordsRequest, v, topics=topics, timeout_ms=10000)
    return sorted((t['name'], p['partition_index'], p['low_watermark'], p['error_code'])
                  for t in r['topics'] for p in t['partitions'])


def t_delete_records():
    produce('adm-a', 0, 10)
    produce('adm-a', 1, 4)
    tk.eq('DeleteRecords: to offset 2, and -1 (high watermark) on another partition, unknown partition',
          [('adm-a', 0, 2, 0), ('adm-a', 1, 4, 0), ('adm-a', 99, -1, 3)],
          dr([('adm-a', [(0, 2), (1, -1), (99, 1)])]))
    for v in (0, 1, 2):
        tk.eq(f'DeleteRecords v{v}: to offset {3 + v}', [('adm-a', 0, 3 + v, 0)], dr([('adm-a', [(0, 3 + v)])], v=v))
    tk.eq('DeleteRecords: below the log start offset changes nothing', [('adm-a', 0, 5, 0)], dr([('adm-a', [(0, 1)])]))
    tk.eq('DeleteRecords: above the high watermark', [('adm-a', 0, -1, 1)], dr([('adm-a', [(0, 11)])]))
    tk.eq('DeleteRecords: -2 is not special', [('adm-a', 0, -1, 1)], dr([('adm-a', [(0, -2)])]))
    tk.eq('DeleteRecords: unknown topic', [('adm-nope', 0, -1, 3)], dr([('adm-nope', [(0, 1)])]))
    tk.eq('DeleteRecords: internal topic', [('__consumer_offsets', 0, -1, 17)], dr([('__consumer_offsets', [(0, 0)])]))
    res = wait(adm.delete_records([TopicPartition('adm-a', 0, 7)]))
    r = list(res.values())[0]
    tk.eq('AdminClient.delete_records: low watermark', 7, getattr(r, 'low_watermark', r))
    lo, hi = _watermarks('adm-a', 0)
    tk.eq('DeleteRecords: the log start offset moved for consumers (earliest, latest)', (7, 10), (lo, hi))


def _watermarks(topic, partition):
    from confluent_kafka import Consumer
    c = Consumer({'bootstrap.servers': BOOT, 'group.id': 'adm-wm', 'enable.auto.commit': False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


def ofle(topics, v=4, replica=-1):
    kw = {'topics': topics}
    if v >= 3:
        kw['replica_id'] = replica
    r = send(OffsetForLeaderEpochRequest, v, **kw)
    return [(t['topic'], p['partition'], p['error_code'], p['leader_epoch'], p['end_offset'])
            for t in r['topics'] for p in t['partitions']]


def t_offset_for_leader_epoch():
    parts = {p['partition_index']: p for p in metadata_topics()['adm-a']['partitions']}
    e = parts[0]['leader_epoch']
    tk.check('Metadata: a leader epoch >= 0', e >= 0, e)
    for v in (2, 3, 4):
        tk.eq(f'OffsetForLeaderEpoch v{v}: current epoch ends at the log end offset',
              [('adm-a', 0, 0, e, 10)], ofle([('adm-a', [(0, -1, e)])], v=v))
    tk.eq('OffsetForLeaderEpoch: with current_leader_epoch', [('adm-a', 0, 0, e, 10)], ofle([('adm-a', [(0, e, e)])]))
    tk.eq('OffsetForLeaderEpoch: empty partition', [('adm-a', 7, 0, parts[7]['leader_epoch'], 0)],
          ofle([('adm-a', [(7, -1, parts[7]['leader_epoch'])])]))
    tk.eq('OffsetForLeaderEpoch: a future epoch -> undefined', [('adm-a', 0, 0, -1, -1)],
          ofle([('adm-a', [(0, -1, e + 1)])]))
    tk.eq('OffsetForLeaderEpoch: epoch -1 -> undefined', [('adm-a', 0, 0, -1, -1)], ofle([('adm-a', [(0, -1, -1)])]))
    tk.eq('OffsetForLeaderEpoch: newer current_leader_epoch -> UNKNOWN_LEADER_EPOCH', [('adm-a', 0, 75, -1, -1)],
          ofle([('adm-a', [(0, e + 1, e)])]))
    if e > 0:
        tk.eq('OffsetForLeaderEpoch: older current_leader_epoch -> FENCED_LEADER_EPOCH', [('adm-a', 0, 74, -1, -1)],
              ofle([('adm-a', [(0, e - 1, e)])]))
    tk.eq('OffsetForLeaderEpoch: unknown partition and topic', [('adm-a', 99, 3, -1, -1), ('adm-nope', 0, 3, -1, -1)],
          ofle([('adm-a', [(99, -1, 0)]), ('adm-nope', [(0, -1, 0)])]))
    tk.eq('OffsetForLeaderEpoch: a follower replica id changes nothing', [('adm-a', 0, 0, e, 10)],
          ofle([('adm-a', [(0, -1, e)])], replica=NODE))


# ---------------------------------------------------------------- DescribeLogDirs

def dld(topics, v=4):
    return send(DescribeLogDirsRequest, v, topics=topics)


def t_describe_log_dirs():
    data_dir = os.environ.get('BROKER_DIR') and os.path.realpath(os.path.join(os.environ['BROKER_DIR'], 'data'))
    for v in (1, 2, 3, 4):
        r = dld([('adm-a', [0, 1, 99]), ('adm-nope', [0])], v=v)
        tk.eq(f'DescribeLogDirs v{v}: one log dir, no error', (1, 0),
              (len(r['results']), r['results'][0]['error_code']))
        res = r['results'][0]
        if GREGOR and data_dir:
            tk.eq(f'DescribeLogDirs v{v}: the absolute log dir path', data_dir, res['log_dir'])
        got = [(t['name'], sorted(p['partition_index'] for p in t['partitions'])) for t in res['topics']]
        tk.eq(f'DescribeLogDirs v{v}: existing requested partitions only', [('adm-a', [0, 1])], got)
        sizes = {p['partition_index']: p for p in res['topics'][0]['partitions']}
        tk.check(f'DescribeLogDirs v{v}: partition 0 has bytes, lag 0, not future',
                 sizes[0]['partition_size'] > 0 and sizes[0]['offset_lag'] == 0 and not sizes[0]['is_future_key'],
                 sizes[0])
        if GREGOR and data_dir:
            on_disk = sum(os.path.getsize(os.path.join(data_dir, 'adm-a-1', f))
                          for f in os.listdir(os.path.join(data_dir, 'adm-a-1')) if f.endswith('.log'))
            tk.eq(f'DescribeLogDirs v{v}: size = the .log files on disk', on_disk, sizes[1]['partition_size'])
        if v >= 4:
            tk.check('DescribeLogDirs v4: total and usable bytes', res['total_bytes'] >= res['usable_bytes'] > 0, res)
        if v >= 3:
            tk.eq(f'DescribeLogDirs v{v}: top-level error', 0, r['error_code'])
    res = dld(None)['results'][0]
    names = {t['name']: len(t['partitions']) for t in res['topics']}
    tk.check('DescribeLogDirs: null = every topic and partition',
             names.get('adm-a') == 9 and names.get('adm-b') == 1, names)
    tk.eq('DescribeLogDirs: empty list = no topics', [], dld([])['results'][0]['topics'])
    got = raw.describe_log_dirs(topic_partitions={'adm-b': [0]})
    tk.eq('KafkaAdminClient.describe_log_dirs', [['adm-b']],
          [[t['name'] for t in d['topics']] for b in got for d in b['log_dirs']])


# ---------------------------------------------------------------- AlterReplicaLogDirs

def arld(dirs, v=2):
    """AlterReplicaLogDirs at `v`: {(topic, partition): error} of the answer."""
    r = send(AlterReplicaLogDirsRequest, v, dirs=dirs)
    got = [((t['topic_name'], p['partition_index']), p['error_code']) for t in r['results'] for p in t['partitions']]
    tk.eq(f'AlterReplicaLogDirs v{v}: each partition answered once, each topic in one entry',
          (len(got), len(r['results'])), (len(dict(got)), len({t['topic_name'] for t in r['results']})))
    return dict(got)


def t_alter_replica_log_dirs():
    d = dld(None)['results'][0]['log_dir']  # the broker's one log directory, as DescribeLogDirs spells it
    for v in (1, 2):
        tk.eq(f'AlterReplicaLogDirs v{v}: the current directory of held replicas: NONE',
              {('adm-a', 0): 0, ('adm-a', 8): 0, ('adm-b', 0): 0},
              arld([(d, [('adm-a', [0, 8]), ('adm-b', [0])])], v))
        tk.eq(f'AlterReplicaLogDirs v{v}: another directory, a trailing slash, a relative path: LOG_DIR_NOT_FOUND',
              {('adm-a', 0): 57, ('adm-a', 1): 57, ('adm-a', 2): 57},
              arld([('/nonexistent-gregor-dir', [('adm-a', [0])]), (d + '/', [('adm-a', [1])]),
                    (os.path.basename(d), [('adm-a', [2])])], v))
    tk.eq('AlterReplicaLogDirs: unknown partition and topic: UNKNOWN_TOPIC_OR_PARTITION',
          {('adm-a', 99): 3, ('adm-nope', 0): 3}, arld([(d, [('adm-a', [99]), ('adm-nope', [0])])]))
    tk.eq('AlterReplicaLogDirs: the directory is checked before the partition',
          {('adm-nope', 0): 57}, arld([('/nonexistent-gregor-dir', [('adm-nope', [0])])]))
    tk.eq('AlterReplicaLogDirs: a partition named under two directories: the last one counts',
          {('adm-b', 0): 0, ('adm-a', 3): 57},
          arld([('/nonexistent-gregor-dir', [('adm-b', [0])]), (d, [('adm-a', [3]), ('adm-b', [0])]),
                ('/nonexistent-gregor-dir', [('adm-a', [3])])]))
    tk.eq('AlterReplicaLogDirs: a 214-character topic (its -future directory name would pass 255): '
          'INVALID_TOPIC_EXCEPTION, before the directory check',
          {('x' * 214, 0): 17, ('x' * 213, 0): 3},
          arld([('/nonexistent-gregor-dir', [('x' * 214, [0])]), (d, [('x' * 213, [0])])]))
    tk.eq('AlterReplicaLogDirs: nothing named, nothing answered', {}, arld([]))
    got = raw.alter_replica_log_dirs({('adm-b', 0, NODE): d, ('adm-a', 1, NODE): '/nonexistent-gregor-dir'})
    tk.eq('KafkaAdminClient.alter_replica_log_dirs', {('adm-b', 0): 'NoError', ('adm-a', 1): 'LogDirNotFoundError'},
          {(r[0], r[1]): e.__name__ for r, e in got.items()})


# ---------------------------------------------------------------- DeleteTopics

def dt(v, names=None, topics=None):
    kw = {'timeout_ms': 10000}
    if v >= 6:
        kw['topics'] = topics
    else:
        kw['topic_names'] = names
    r = send(DeleteTopicsRequest, v, **kw)
    return sorted(((x.get('name') or ''), x['error_code'], x.get('error_message')) for x in r['responses'])


def t_delete_topics():
    for v in (1, 2, 3, 4, 5):
        create(f'adm-del{v}', 1)
    ids = {n: t['topic_id'] for n, t in metadata_topics().items()}
    for v in (1, 2, 3, 4, 5):
        tk.eq(f'DeleteTopics v{v}: by name', [(f'adm-del{v}', 0, None)], dt(v, names=[f'adm-del{v}']))
    deadline = time.time() + (0 if GREGOR else 15)  # Kafka deletes asynchronously, Gregor before answering
    while [n for n in metadata_topics() if n.startswith('adm-del')] and time.time() < deadline:
        time.sleep(0.2)
    tk.eq('DeleteTopics: gone from Metadata', [], [n for n in metadata_topics() if n.startswith('adm-del')])
    tk.eq('DeleteTopics v5: unknown name and a duplicate (answered once)',
          [('adm-a', 42, 'Duplicate topic name.'), ('adm-nope', 3, 'This server does not host this topic-partition.')],
          dt(5, names=['adm-nope', 'adm-a', 'adm-a']))
    create('adm-del6', 2)
    tid = metadata_topics()['adm-del6']['topic_id']
    r = send(DeleteTopicsRequest, 6, topics=[(None, tid)], timeout_ms=10000)['responses']
    tk.eq('DeleteTopics v6: by id answers the name and id', [('adm-del6', str(tid), 0)],
          [(x['name'], str(x['topic_id']), x['error_code']) for x in r])
    tk.eq('DeleteTopics v6: the old id is unknown now', [('', 100, 'This server does not host this topic ID.')],
          dt(6, topics=[(None, tid)]))
    tk.eq('DeleteTopics v6: shape errors',
          [('', 42, 'Neither topic name nor id were specified.'),
           ('adm-a', 42, 'You may not specify both topic name and topic id.')],
          dt(6, topics=[(None, uuid.UUID(int=0)), ('adm-a', uuid.uuid4())]))
    create('adm-del7', 1)
    res = wait(adm.delete_topics(['adm-del7']))
    tk.eq('AdminClient.delete_topics', [None], list(res.values()))
    create('adm-del7', 3)
    tk.eq('DeleteTopics: a re-created topic has a new id and its new partition count',
          (True, 3), (metadata_topics()['adm-del7']['topic_id'] != ids.get('adm-del7'),
                      len(metadata_topics()['adm-del7']['partitions'])))
    if GREGOR:
        got = dt(6, topics=[('__consumer_offsets', uuid.UUID(int=0))])
        tk.check('DeleteTopics: Gregor refuses to delete __consumer_offsets (Kafka 4.1 deletes it)',
                 got[0][1] == 42 and got[0][2], got)
        tk.check('DeleteTopics: __consumer_offsets still there', '__consumer_offsets' in metadata_topics())


# ---------------------------------------------------------------- phases

def commit_offset():
    """A committed offset, so that __consumer_offsets exists on any broker."""
    from confluent_kafka import Consumer
    c = Consumer({'bootstrap.servers': BOOT, 'group.id': 'adm-g', 'enable.auto.commit': False})
    try:
        for attempt in range(40):  # Kafka answers NOT_COORDINATOR while it loads a new __consumer_offsets
            try:
                c.commit(offsets=[TopicPartition('adm-a', 0, 0)], asynchronous=False)
                break
            except Exception:  # noqa: BLE001 - retried, the last one raises
                if attempt == 39:
                    raise
                time.sleep(0.5)
    finally:
        c.close()
    tk.check('__consumer_offsets exists', '__consumer_offsets' in metadata_topics())


def main_phase():
    tk.run('DescribeCluster', t_describe_cluster)
    create('adm-a', 4, {'retention.ms': '3600000'})
    create('adm-b', 1)
    tk.run('commit an offset', commit_offset)
    tk.run('DescribeConfigs topic', t_describe_configs_topic)
    tk.run('DescribeConfigs broker', t_describe_configs_broker)
    tk.run('CreateTopics configs', t_create_topics_configs)
    tk.run('AlterConfigs', t_alter_configs)
    tk.run('IncrementalAlterConfigs', t_incremental_alter_configs)
    tk.run('CreatePartitions', t_create_partitions)
    tk.run('DeleteRecords', t_delete_records)
    tk.run('OffsetForLeaderEpoch', t_offset_for_leader_epoch)
    tk.run('DescribeLogDirs', t_describe_log_dirs)
    tk.run('AlterReplicaLogDirs', t_alter_replica_log_dirs)
    tk.run('DeleteTopics', t_delete_topics)
    tk.run('dynamic broker configs', t_dynamic_broker_configs)


def restarted_phase():
    def t():
        c = cfg(TOPIC, 'adm-b', ['retention.ms', 'follower.replication.throttled.replicas', 'cleanup.policy'])
        tk.eq('after restart: topic-level configs persisted',
              {'retention.ms': ('2400000', DYNAMIC_TOPIC), 'follower.replication.throttled.replicas':
               ('1:1,2:1', DYNAMIC_TOPIC), 'cleanup.policy': ('delete', DYNAMIC_TOPIC)},
              {k: (x['value'], x['config_source']) for k, x in c.items()})
        md = metadata_topics()
        tk.eq('after restart: partition count persisted', 9, len(md['adm-a']['partitions']))
        tk.eq('after restart: deleted topics stay deleted', ['adm-del7'], sorted(n for n in md if n.startswith('adm-del')))
        lo, hi = _watermarks('adm-a', 0)
        tk.eq('after restart: DeleteRecords log start offset persisted', (7, 10), (lo, hi))
        parts = {p['partition_index']: p for p in md['adm-a']['partitions']}
        e = parts[0]['leader_epoch']
        got = ofle([('adm-a', [(0, -1, e - 1)])])
        tk.eq('after restart: the previous epoch ends where the new one starts', [('adm-a', 0, 0, e - 1, 10)], got)
        tk.eq('after restart: dynamic broker configs persisted, both levels',
              {'log.retention.bytes': ('100000000', 2), 'log.retention.ms': ('7200000', 2),
               'log.segment.bytes': (str(1 << 20), 3), 'log.cleanup.policy': ('delete', DEFAULT)},
              {k: (x['value'], x['config_source']) for k, x in
               cfg(BROKER_RES, str(NODE), ['log.retention.bytes', 'log.retention.ms', 'log.segment.bytes',
                                           'log.cleanup.policy']).items()})
        tk.eq('after restart: the topic still inherits them', (str(1 << 20), 3),
              tuple((lambda e: (e['value'], e['config_source']))(cfg(TOPIC, 'adm-dyn', ['segment.bytes'])['segment.bytes'])))
    tk.run('restart', t)


def nodelete_phase():
    def t():
        tk.eq('delete.topic.enable=false: v1-v2 INVALID_REQUEST', [('adm-b', 42, None)], dt(2, names=['adm-b']))
        for v in (3, 5, 6):  # error_message exists from v5
            got = dt(v, names=['adm-b']) if v < 6 else dt(v, topics=[('adm-b', uuid.UUID(int=0))])
            tk.eq(f'delete.topic.enable=false: v{v} TOPIC_DELETION_DISABLED',
                  [('adm-b', 73, 'Topic deletion is disabled.' if v >= 5 else None)], got)
        tk.check('delete.topic.enable=false: the topic is still there', 'adm-b' in metadata_topics())
    tk.run('delete.topic.enable', t)


{'main': main_phase, 'restarted': restarted_phase, 'nodelete': nodelete_phase}[PHASE]()
raw.close()
tk.finish()
