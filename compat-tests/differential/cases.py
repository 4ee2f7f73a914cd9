"""cases.py: the differential suite's requests, as data.

CASES is a list of dicts, run in this order against each broker (so both see the same history):
  api       API name (as in protocol/schema, CamelCase)
  name      scenario (unique per API): the case is called `<api> v<version> <name>`
  versions  'max' (default), 'min', 'minmax', 'all' (every version both brokers and the schema serve), or
            version: an int or list of ints sent as they are (unsupported versions)
  request   values dict, or fn(side, version) -> values (side.ctx holds ids captured by earlier cases)
  raw       fn(side, version) -> bytes: a whole frame sent instead of an encoded request
  after     fn(side, version, response): captures generated values for later cases
  settle    fn(side, version): bounded wait until the broker's metadata shows the change just made
            (Kafka applies topic changes through its controller; reads right after may not see them yet)
setup(side) creates the shared topics and data through the same requests on both sides.
Read next: diff.py (how answers are normalised and compared).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402

# One timestamp for every produced record, on both sides (answers that echo timestamps compare equal).
T0 = (int(time.time() * 1000) // 1000) * 1000
MAIN = 'd-main'        # 2 partitions; Produce cases append to partition 0
COMPACT = 'd-compact'  # cleanup.policy=compact
DEL = 'd-del'          # 10 records in partition 0, for DeleteRecords
IDEM = 'd-idem'        # one idempotent batch, for DescribeProducers
CP = 'd-cp'            # CreatePartitions grows it
ALTER = 'd-alter'      # AlterConfigs / IncrementalAlterConfigs change it
TS = 'd-ts'            # message.timestamp.before.max.ms=3600000
GROUP = 'dg-classic'   # the classic group of the group cases
SIMPLE = 'dg-simple'   # offsets committed without membership
MISSING = 'd-missing'  # never created (auto-creation off in requests that allow it)
DUP = 'd-dup'          # Produce naming its partition twice
SEQ = 'd-seq'          # idempotence errors (sequence gap, old epoch)
DCMP = 'd-dcmp'        # max.decompressed.message.bytes=40 (Kafka 4.4)


def batch(n=1, key=b'k', compact_ok=True, **kw):
    recs = [(key, b'value-%d' % i) for i in range(n)]
    return kr.build_batch(recs, base_timestamp=T0, **kw)


def tid(side, name):
    return side.ctx.get('topic_ids', {}).get(name, kr.ZERO_UUID)


def metadata_ready(side, names, partitions=None, gone=False, timeout=30.0):
    """Bounded wait until Metadata shows every topic with leaders (or shows them gone)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with side.conn() as c:
                resp = c.request('Metadata', 12, {'topics': [{'name': n, 'topic_id': kr.ZERO_UUID} for n in names],
                                                  'allow_auto_topic_creation': False})
            ok = True
            for t in resp['topics']:
                if gone:
                    ok &= t['error_code'] == kr.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                ok &= t['error_code'] == 0 and all(p['error_code'] == 0 and p['leader_id'] >= 0
                                                   for p in t['partitions'])
                if partitions is not None:
                    ok &= len(t['partitions']) == partitions
                if t['error_code'] == 0:
                    side.ctx.setdefault('topic_ids', {})[t['name']] = t['topic_id']
                    side.topic_ids[t['topic_id']] = t['name']
            if ok:
                return True
        except (OSError, kr.ConnectionClosed, kr.DecodeError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f'{side.label}: metadata for {names} not ready after {timeout}s')
        time.sleep(0.2)


def produce_ready(side, topic, partition, timeout=30.0):
    """Bounded wait until a partition accepts a ListOffsets (Kafka: the leader has loaded it)."""
    deadline = time.monotonic() + timeout
    while True:
        with side.conn() as c:
            p = kr.list_offsets(c, topic, partition, -1)
        if p['error_code'] == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f'{side.label}: {topic}-{partition} not ready: {p["error_code"]}')
        time.sleep(0.2)


def setup(side):
    topics = [(MAIN, 2, {}), (COMPACT, 1, {'cleanup.policy': 'compact'}), (DEL, 1, {}), (IDEM, 1, {}),
              (CP, 1, {}), (ALTER, 1, {}), (TS, 1, {'message.timestamp.before.max.ms': '3600000'}),
              (DUP, 1, {}), (SEQ, 1, {}), (DCMP, 1, {'max.decompressed.message.bytes': '40'})]
    with side.conn() as c:
        for name, parts, cfg in topics:
            r = kr.create_topic(c, name, parts, cfg, version=7)
            if r['error_code']:
                raise RuntimeError(f'{side.label}: CreateTopics {name}: {r["error_code"]}')
    metadata_ready(side, [t[0] for t in topics])
    for name, parts, _ in topics:
        for p in range(parts):
            produce_ready(side, name, p)
    with side.conn() as c:
        r = kr.produce(c, DEL, 0, batch(10))
        assert r['error_code'] == 0, r
        r = kr.produce(c, COMPACT, 0, batch(2))
        assert r['error_code'] == 0, r
        deadline = time.monotonic() + 30
        while True:  # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its producer id manager is ready
            ip = c.request('InitProducerId', 4, {'transactional_id': None, 'transaction_timeout_ms': 60000})
            if ip['error_code'] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert ip['error_code'] == 0, ip
        side.ctx['idem_pid'] = ip['producer_id']
        r = kr.produce(c, IDEM, 0, batch(3, producer_id=ip['producer_id'], producer_epoch=0, base_sequence=0))
        assert r['error_code'] == 0, r
        deadline = time.monotonic() + 60
        while True:  # both create __consumer_offsets on first group use; Kafka answers 15 until it is loaded
            fc = c.request('FindCoordinator', 3, {'key': 'dg-warmup', 'key_type': 0})
            if fc['error_code'] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert fc['error_code'] == 0, fc


def settle_topics(names, partitions=None, gone=False):
    return lambda side, v: metadata_ready(side, [n.format(v=v) for n in names], partitions, gone)


def _topics(names):
    return [{'name': n, 'topic_id': kr.ZERO_UUID} for n in names]


CASES = []


def case(api, name, **kw):
    CASES.append(dict(api=api, name=name, **kw))


def unsupported(api, versions):
    """An API version no broker serves: Kafka closes the connection (ApiVersions: a v0 answer, KIP-511)."""
    case(api, 'unsupported-version', version=versions, request={})


# --- ApiVersions --------------------------------------------------------------------------------
case('ApiVersions', 'normal', versions='all',
     request={'client_software_name': 'gregor-differential', 'client_software_version': '1.0'})
case('ApiVersions', 'invalid-client-name', version=[3, 4],
     request={'client_software_name': '', 'client_software_version': '1.0'})
unsupported('ApiVersions', [99])

# --- Metadata -----------------------------------------------------------------------------------
case('Metadata', 'one-topic', versions='all',
     request=lambda s, v: {'topics': _topics([MAIN]), 'allow_auto_topic_creation': False})
case('Metadata', 'unknown-topic-no-auto', version=[4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
     request=lambda s, v: {'topics': _topics([MISSING]), 'allow_auto_topic_creation': False})
case('Metadata', 'old-version-auto-creates', version=[0, 1, 2, 3],
     request=lambda s, v: {'topics': _topics([f'd-old-{v}'])}, settle=settle_topics(['d-old-{v}']))
case('Metadata', 'empty-list', versions='minmax', request={'topics': [], 'allow_auto_topic_creation': False})
case('Metadata', 'all-topics', version=[1, 13], request={'topics': None, 'allow_auto_topic_creation': False})
case('Metadata', 'name-too-long', versions='max',
     request={'topics': _topics(['x' * 250]), 'allow_auto_topic_creation': True})
case('Metadata', 'invalid-name', versions='max',
     request={'topics': _topics(['bad/name']), 'allow_auto_topic_creation': True})
case('Metadata', 'by-unknown-topic-id', version=[12, 13],
     request={'topics': [{'name': None, 'topic_id': b'\x01' * 16}], 'allow_auto_topic_creation': False})
case('Metadata', 'auto-create', versions='max',
     request={'topics': _topics(['d-auto']), 'allow_auto_topic_creation': True},
     settle=settle_topics(['d-auto']))
case('Metadata', 'auto-created', versions='max',
     request={'topics': _topics(['d-auto']), 'allow_auto_topic_creation': False})
unsupported('Metadata', [99])

# --- Produce ------------------------------------------------------------------------------------


def _produce(topic, partition, records_fn, acks=-1, txn=None):
    def build(side, v):
        return {'transactional_id': txn, 'acks': acks, 'timeout_ms': 10000,
                'topic_data': [{'name': topic, 'topic_id': tid(side, topic),
                                'partition_data': [{'index': partition, 'records': records_fn()}]}]}
    return build


case('Produce', 'normal', versions='all', request=_produce(MAIN, 0, lambda: batch(2)))
case('Produce', 'gzip', versions='max', request=_produce(MAIN, 0, lambda: batch(2, codec=kr.CODEC_GZIP)))
case('Produce', 'acks-1', versions='max', request=_produce(MAIN, 0, lambda: batch(1), acks=1))
# Gregor's high watermark is the fsynced offset (README "Durability"): an acks=-1 append right after the
# acks=1 one makes it cover both, so later Fetch and ListOffsets answers do not depend on flush timing.
case('Produce', 'acks-all-after-acks-1', versions='max', request=_produce(MAIN, 0, lambda: batch(1)))
case('Produce', 'unknown-topic', versions='max', request=_produce(MISSING, 0, lambda: batch(1)))
case('Produce', 'unknown-partition', versions='max', request=_produce(MAIN, 99, lambda: batch(1)))
case('Produce', 'bad-crc', versions='max', request=_produce(MAIN, 0, lambda: kr.flip_crc_byte(batch(1))))
case('Produce', 'invalid-acks', versions='max', request=_produce(MAIN, 0, lambda: batch(1), acks=2))
case('Produce', 'keyless-on-compacted', versions='max', request=_produce(COMPACT, 0, lambda: batch(1, key=None)))
case('Produce', 'transactional-bit-no-txn-id', versions='max',
     request=_produce(MAIN, 0, lambda: batch(1, attributes_extra=0x10, producer_id=1000, producer_epoch=0,
                                                base_sequence=0)))
case('Produce', 'future-timestamp', versions='max',
     request=lambda s, v: {'acks': -1, 'timeout_ms': 10000, 'topic_data': [
         {'name': MAIN, 'topic_id': tid(s, MAIN),
          'partition_data': [{'index': 1, 'records': kr.build_batch([(b'k', b'v')], base_timestamp=T0 + 7200 * 1000)}]}]})
case('Produce', 'later-record-too-old', versions='max',
     request=_produce(TS, 0, lambda: kr.build_batch([(b'k', b'a'), (b'k', b'b')], base_timestamp=T0,
                                                    timestamp_deltas=[0, -7200 * 1000])))
case('Produce', 'to-consumer-offsets', versions='max', request=_produce('__consumer_offsets', 0, lambda: batch(1)))
case('Produce', 'to-consumer-offsets-by-name', version=[9], request=_produce('__consumer_offsets', 0, lambda: batch(1)))
case('Produce', 'empty-topic-data', versions='max', request={'acks': -1, 'timeout_ms': 10000, 'topic_data': []})
case('Produce', 'null-records', versions='max', request=_produce(MAIN, 1, lambda: None), timeout=5.0)
case('Produce', 'magic-1', versions='max', request=_produce(MAIN, 1, lambda: kr.build_message_set_v1(b'k', b'v', T0)))
# A partition named twice in one request (Kafka keeps one of the two), then what the log holds.
case('Produce', 'duplicate-partition', versions='max',
     request=lambda s, v: {'acks': -1, 'timeout_ms': 10000, 'topic_data': [
         {'name': DUP, 'topic_id': tid(s, DUP),
          'partition_data': [{'index': 0, 'records': batch(1)}, {'index': 0, 'records': batch(3)}]}]})
case('Produce', 'duplicate-topic', versions='max',
     request=lambda s, v: {'acks': -1, 'timeout_ms': 10000, 'topic_data': [
         {'name': DUP, 'topic_id': tid(s, DUP), 'partition_data': [{'index': 0, 'records': batch(2)}]},
         {'name': DUP, 'topic_id': tid(s, DUP), 'partition_data': [{'index': 0, 'records': batch(1)}]}]})
case('ListOffsets', 'after-duplicate-produce', versions='max', request=lambda s, v: {
    'replica_id': -1, 'isolation_level': 0, 'timeout_ms': 10000, 'topics': [
        {'name': DUP, 'partitions': [{'partition_index': 0, 'current_leader_epoch': -1, 'timestamp': -1}]}]})
# Errors Kafka meets inside the log: which carry an error_message (compared as null or not).
case('Produce', 'sequence-first', versions='max',
     request=lambda s, v: _produce(SEQ, 0, lambda: batch(1, producer_id=s.ctx['idem_pid'], producer_epoch=0,
                                                         base_sequence=0))(s, v))
case('Produce', 'sequence-gap', versions='max',
     request=lambda s, v: _produce(SEQ, 0, lambda: batch(1, producer_id=s.ctx['idem_pid'], producer_epoch=0,
                                                         base_sequence=5))(s, v))
case('Produce', 'new-epoch', versions='max',
     request=lambda s, v: _produce(SEQ, 0, lambda: batch(1, producer_id=s.ctx['idem_pid'], producer_epoch=1,
                                                         base_sequence=0))(s, v))
case('Produce', 'old-epoch', versions='max',
     request=lambda s, v: _produce(SEQ, 0, lambda: batch(1, producer_id=s.ctx['idem_pid'], producer_epoch=0,
                                                         base_sequence=1))(s, v))
case('Produce', 'negative-sequence', versions='max',
     request=lambda s, v: _produce(SEQ, 0, lambda: batch(1, producer_id=s.ctx['idem_pid'], producer_epoch=1,
                                                         base_sequence=-1))(s, v))
case('Produce', 'wrong-last-offset-delta', versions='max',
     request=_produce(MAIN, 1, lambda: batch(2, last_offset_delta=5)))
case('Produce', 'record-count-too-high', versions='max',
     request=_produce(MAIN, 1, lambda: batch(2, record_count=3, last_offset_delta=2)))
case('Produce', 'garbage-records', versions='max',
     request=_produce(MAIN, 1, lambda: kr.build_batch([(b'k', b'v')], base_timestamp=T0,
                                                      raw_records=b'\x7f\x00\x00\x00\x00')))
case('Produce', 'truncated-batch', versions='max', request=_produce(MAIN, 1, lambda: batch(1)[:-3]))
# Kafka 4.4's max.decompressed.message.bytes (40): a gzip batch whose second record is 41 bytes long.
case('Produce', 'decompressed-record-too-long', versions='max',
     request=_produce(DCMP, 0, lambda: kr.build_batch([(b'k', b'x' * 33), (b'k', b'x' * 34)], base_timestamp=T0,
                                                      codec=kr.CODEC_GZIP)))
case('Produce', 'decompressed-record-at-bound', versions='max',
     request=_produce(DCMP, 0, lambda: kr.build_batch([(b'k', b'x' * 33)], base_timestamp=T0,
                                                      codec=kr.CODEC_GZIP)))
case('Produce', 'uncompressed-record-over-bound', versions='max',
     request=_produce(DCMP, 0, lambda: kr.build_batch([(b'k', b'x' * 60)], base_timestamp=T0)))
case('Produce', 'unknown-topic-id', version=[13],
     request={'acks': -1, 'timeout_ms': 10000, 'topic_data': [
         {'name': '', 'topic_id': b'\x02' * 16, 'partition_data': [{'index': 0, 'records': batch(1)}]}]})
unsupported('Produce', [2, 99])

# --- Fetch --------------------------------------------------------------------------------------


def _fetch(topic, partition, offset, topic_id=None):
    def build(side, v):
        return {'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 0x7fffffff, 'isolation_level': 0, 'session_id': 0,
                'session_epoch': -1,
                'topics': [{'topic': topic, 'topic_id': topic_id or tid(side, topic),
                            'partitions': [{'partition': partition, 'fetch_offset': offset,
                                            'partition_max_bytes': 1048576}]}]}
    return build


case('Fetch', 'from-start', versions='all', request=_fetch(MAIN, 0, 0))
case('Fetch', 'read-committed', versions='max',
     request=lambda s, v: dict(_fetch(MAIN, 0, 0)(s, v), isolation_level=1))
case('Fetch', 'mid-batch-offset', versions='max', request=_fetch(MAIN, 0, 1))
case('Fetch', 'at-end', versions='max', request=_fetch(DEL, 0, 10))
case('Fetch', 'out-of-range', versions='max', request=_fetch(MAIN, 0, 100000))
case('Fetch', 'unknown-topic', version=[12], request=_fetch(MISSING, 0, 0))
case('Fetch', 'unknown-partition', versions='max', request=_fetch(MAIN, 99, 0))
case('Fetch', 'unknown-topic-id', versions='max', request=_fetch('', 0, 0, topic_id=b'\x03' * 16))
case('Fetch', 'empty-topics', versions='max',
     request={'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 1000, 'session_id': 0, 'session_epoch': -1,
              'topics': []})
case('Fetch', 'max-bytes-smaller-than-batch', versions='max',
     request=lambda s, v: dict(_fetch(MAIN, 0, 0)(s, v), max_bytes=10))
case('Fetch', 'partition-max-bytes-small', versions='max',
     request=lambda s, v: {**_fetch(MAIN, 0, 0)(s, v), 'topics': [
         {'topic': MAIN, 'topic_id': tid(s, MAIN),
          'partitions': [{'partition': 0, 'fetch_offset': 0, 'partition_max_bytes': 10}]}]})
case('Fetch', 'long-poll-expires', versions='max',
     request=lambda s, v: dict(_fetch(DEL, 0, 10)(s, v), max_wait_ms=300, min_bytes=1000))
case('Fetch', 'two-partitions', versions='all',
     request=lambda s, v: {**_fetch(MAIN, 0, 0)(s, v), 'topics': [
         {'topic': MAIN, 'topic_id': tid(s, MAIN),
          'partitions': [{'partition': p, 'fetch_offset': 0, 'partition_max_bytes': 1048576} for p in (0, 1)]}]})
case('Fetch', 'compacted-topic', versions='max', request=_fetch(COMPACT, 0, 0))
unsupported('Fetch', [3, 99])

# --- ListOffsets --------------------------------------------------------------------------------


def _list_offsets(topic, parts):
    return lambda s, v: {'replica_id': -1, 'isolation_level': 0, 'timeout_ms': 10000,
                         'topics': [{'name': topic, 'partitions': [
                             {'partition_index': p, 'current_leader_epoch': -1, 'timestamp': ts} for p, ts in parts]}]}


case('ListOffsets', 'latest', versions='all', request=_list_offsets(MAIN, [(0, -1)]))
case('ListOffsets', 'earliest', versions='all', request=_list_offsets(DEL, [(0, -2)]))
case('ListOffsets', 'by-timestamp', versions='all', request=_list_offsets(MAIN, [(0, T0)]))
case('ListOffsets', 'max-timestamp', versions='max', request=_list_offsets(MAIN, [(0, -3)]))
case('ListOffsets', 'future-timestamp', versions='max', request=_list_offsets(MAIN, [(0, T0 + 10 ** 9)]))
case('ListOffsets', 'unknown-topic', versions='max', request=_list_offsets(MISSING, [(0, -1)]))
case('ListOffsets', 'unknown-partition', versions='max', request=_list_offsets(MAIN, [(99, -1)]))
case('ListOffsets', 'duplicate-partition', versions='max', request=_list_offsets(MAIN, [(0, -1), (0, -2)]))
case('ListOffsets', 'empty-topics', versions='max', request={'replica_id': -1, 'topics': []})
case('ListOffsets', 'topic-without-partitions', versions='all',
     request={'replica_id': -1, 'isolation_level': 0, 'timeout_ms': 10000,
              'topics': [{'name': MAIN, 'partitions': []}]})
case('ListOffsets', 'one-topic-without-partitions', versions='max', request=lambda s, v: {
    'replica_id': -1, 'isolation_level': 0, 'timeout_ms': 10000, 'topics': [
        {'name': DEL, 'partitions': []},
        {'name': MAIN, 'partitions': [{'partition_index': 0, 'current_leader_epoch': -1, 'timestamp': -2}]}]})
unsupported('ListOffsets', [0, 99])

# --- OffsetForLeaderEpoch -----------------------------------------------------------------------


def _ofle(topic, part, epoch, current=-1):
    return lambda s, v: {'replica_id': -1, 'topics': [{'topic': topic, 'partitions': [
        {'partition': part, 'current_leader_epoch': current, 'leader_epoch': epoch}]}]}


case('OffsetForLeaderEpoch', 'epoch-0', versions='all', request=_ofle(MAIN, 0, 0))
case('OffsetForLeaderEpoch', 'future-epoch', versions='max', request=_ofle(MAIN, 0, 50))
case('OffsetForLeaderEpoch', 'fenced-current-epoch', versions='max', request=_ofle(MAIN, 0, 0, current=99))
case('OffsetForLeaderEpoch', 'unknown-topic', versions='max', request=_ofle(MISSING, 0, 0))
case('OffsetForLeaderEpoch', 'unknown-partition', versions='max', request=_ofle(MAIN, 99, 0))
case('OffsetForLeaderEpoch', 'empty-topics', versions='max', request={'replica_id': -1, 'topics': []})
unsupported('OffsetForLeaderEpoch', [99])

# --- CreateTopics / CreatePartitions / DeleteTopics ---------------------------------------------


def _create(name, parts=3, rf=-1, configs=None, validate_only=False, extra=()):
    def build(side, v):
        ts = [{'name': name.format(v=v), 'num_partitions': parts, 'replication_factor': rf, 'assignments': [],
               'configs': [{'name': k, 'value': val} for k, val in (configs or {}).items()]}]
        ts += [dict(t) for t in extra]
        return {'topics': ts, 'timeout_ms': 10000, 'validate_only': validate_only}
    return build


def _capture_created(side, v, resp):
    for t in resp.get('topics', []):
        if t.get('error_code') == 0 and t.get('topic_id', kr.ZERO_UUID) != kr.ZERO_UUID:
            side.topic_ids[t['topic_id']] = t['name']
            side.ctx.setdefault('topic_ids', {})[t['name']] = t['topic_id']


case('CreateTopics', 'normal', versions='all', request=_create('d-ct-{v}'), after=_capture_created,
     settle=settle_topics(['d-ct-{v}'], 3))
case('CreateTopics', 'with-configs', versions='max',
     request=_create('d-ct-cfg', 1, configs={'retention.ms': '1000', 'cleanup.policy': 'compact'}),
     after=_capture_created, settle=settle_topics(['d-ct-cfg'], 1))
case('CreateTopics', 'manual-assignment', versions='max',
     request=lambda s, v: {'topics': [{'name': 'd-ct-manual', 'num_partitions': -1, 'replication_factor': -1,
                                       'assignments': [{'partition_index': 0, 'broker_ids': [1]},
                                                       {'partition_index': 1, 'broker_ids': [1]}],
                                       'configs': []}], 'timeout_ms': 10000},
     after=_capture_created, settle=settle_topics(['d-ct-manual'], 2))
case('CreateTopics', 'default-partitions', versions='max', request=_create('d-ct-default', -1),
     after=_capture_created, settle=settle_topics(['d-ct-default'], 1))
case('CreateTopics', 'assignment-unknown-broker', versions='max',
     request=lambda s, v: {'topics': [{'name': 'd-ct-badassign', 'num_partitions': -1, 'replication_factor': -1,
                                       'assignments': [{'partition_index': 0, 'broker_ids': [7]}],
                                       'configs': []}], 'timeout_ms': 10000})
case('CreateTopics', 'consumer-offsets', versions='max', request=_create('__consumer_offsets', 1))
case('CreateTopics', 'already-exists', versions='max', request=_create(MAIN))
case('CreateTopics', 'zero-partitions', versions='max', request=_create('d-ct-zero', 0))
case('CreateTopics', 'replication-factor-3', versions='max', request=_create('d-ct-rf', 1, rf=3))
case('CreateTopics', 'unknown-config', versions='max', request=_create('d-ct-badcfg', 1, configs={'no.such': '1'}))
case('CreateTopics', 'bad-config-value', versions='max',
     request=_create('d-ct-badval', 1, configs={'retention.ms': 'abc'}))
case('CreateTopics', 'invalid-name', versions='max', request=_create('bad/name', 1))
case('CreateTopics', 'validate-only', versions='max', request=_create('d-ct-val', 2, validate_only=True))
case('CreateTopics', 'duplicate-name', versions='max',
     request=_create('d-ct-dup', 1, extra=[{'name': 'd-ct-dup', 'num_partitions': 1, 'replication_factor': -1,
                                            'assignments': [], 'configs': []}]))
case('CreateTopics', 'empty-list', versions='max', request={'topics': [], 'timeout_ms': 10000})
unsupported('CreateTopics', [1, 99])

case('CreatePartitions', 'grow', versions='all',
     request=lambda s, v: {'topics': [{'name': CP, 'count': v + 2, 'assignments': None}], 'timeout_ms': 10000},
     settle=lambda s, v: metadata_ready(s, [CP], v + 2))
case('CreatePartitions', 'same-count', versions='max',
     request={'topics': [{'name': MAIN, 'count': 2, 'assignments': None}], 'timeout_ms': 10000})
case('CreatePartitions', 'fewer', versions='max',
     request={'topics': [{'name': MAIN, 'count': 1, 'assignments': None}], 'timeout_ms': 10000})
case('CreatePartitions', 'unknown-topic', versions='max',
     request={'topics': [{'name': MISSING, 'count': 3, 'assignments': None}], 'timeout_ms': 10000})
case('CreatePartitions', 'validate-only', versions='max',
     request={'topics': [{'name': MAIN, 'count': 5, 'assignments': None}], 'timeout_ms': 10000,
              'validate_only': True})
case('CreatePartitions', 'duplicate-topic', versions='max',
     request={'topics': [{'name': CP, 'count': 9, 'assignments': None}, {'name': CP, 'count': 9, 'assignments': None}],
              'timeout_ms': 10000})
case('CreatePartitions', 'empty-list', versions='max', request={'topics': [], 'timeout_ms': 10000})
unsupported('CreatePartitions', [99])


def _delete_topics(names=(), ids=None):
    def build(side, v):
        ns = [n.format(v=v) for n in names]
        if v >= 6:
            ts = [{'name': n, 'topic_id': kr.ZERO_UUID} for n in ns]
            ts += [{'name': None, 'topic_id': i(side) if callable(i) else i} for i in (ids or [])]
            return {'topics': ts, 'timeout_ms': 10000}
        return {'topic_names': ns, 'timeout_ms': 10000}
    return build


case('DeleteTopics', 'normal', versions='all', request=_delete_topics(['d-ct-{v}']),
     settle=settle_topics(['d-ct-{v}'], gone=True))
case('DeleteTopics', 'unknown-topic', versions='max', request=_delete_topics([MISSING]))
case('DeleteTopics', 'by-topic-id', version=[6], request=_delete_topics(ids=[lambda s: tid(s, 'd-ct-cfg')]),
     settle=lambda s, v: metadata_ready(s, ['d-ct-cfg'], gone=True))
case('DeleteTopics', 'unknown-topic-id', version=[6], request=_delete_topics(ids=[b'\x04' * 16]))
case('DeleteTopics', 'empty-list', versions='max', request=_delete_topics([]))
case('DeleteTopics', 'duplicate-id', version=[6], request=_delete_topics(ids=[b'\x05' * 16, b'\x05' * 16]))
case('DeleteTopics', 'duplicate-name', versions='max', request=_delete_topics([MISSING, 'd-nope-2', MISSING]))
unsupported('DeleteTopics', [0, 99])

# --- DeleteRecords ------------------------------------------------------------------------------


def _delete_records(topic, part, offset):
    return lambda s, v: {'topics': [{'name': topic, 'partitions': [
        {'partition_index': part, 'offset': offset(v) if callable(offset) else offset}]}], 'timeout_ms': 10000}


case('DeleteRecords', 'normal', versions='all', request=_delete_records(DEL, 0, lambda v: v + 1))
case('DeleteRecords', 'to-high-watermark', versions='max', request=_delete_records(DEL, 0, -1))
case('DeleteRecords', 'beyond-high-watermark', versions='max', request=_delete_records(DEL, 0, 500))
case('DeleteRecords', 'unknown-topic', versions='max', request=_delete_records(MISSING, 0, 1))
case('DeleteRecords', 'unknown-partition', versions='max', request=_delete_records(MAIN, 99, 1))
case('DeleteRecords', 'compacted-topic', versions='max', request=_delete_records(COMPACT, 0, 1))
case('DeleteRecords', 'empty-list', versions='max', request={'topics': [], 'timeout_ms': 10000})
unsupported('DeleteRecords', [99])

# --- ElectLeaders (one node: its only replica leads every partition) --------------------------------
def _elect(etype, topics):
    return {'election_type': etype, 'topic_partitions': topics, 'timeout_ms': 10000}


case('ElectLeaders', 'preferred', versions='all', request=_elect(0, [{'topic': MAIN, 'partitions': [0, 1]}]))
case('ElectLeaders', 'unclean', versions='max', request=_elect(1, [{'topic': MAIN, 'partitions': [0]}]))
case('ElectLeaders', 'unknown-topic', versions='max', request=_elect(0, [{'topic': MISSING, 'partitions': [0]}]))
case('ElectLeaders', 'unknown-partition', versions='max', request=_elect(0, [{'topic': MAIN, 'partitions': [99]}]))
case('ElectLeaders', 'all-partitions', versions='max', request=_elect(0, None))
case('ElectLeaders', 'empty-list', versions='max', request=_elect(0, []))
unsupported('ElectLeaders', [99])

# --- UpdateFeatures (nothing changes on either side: refusals, validate-only, no updates) ---------------
def _features(updates, validate_only=False):
    def build(s, v):
        fu = [dict({'feature': n, 'max_version_level': lv},
                   **({'upgrade_type': ut} if v >= 1 else {'allow_downgrade': ut != 1})) for n, lv, ut in updates]
        return dict({'timeout_ms': 10000, 'feature_updates': fu}, **({'validate_only': validate_only} if v >= 1 else {}))
    return build


case('UpdateFeatures', 'unknown-feature', versions='all', request=_features([('no.such.feature', 1, 1)]))
case('UpdateFeatures', 'above-max', versions='all', request=_features([('transaction.version', 99, 1)]))
case('UpdateFeatures', 'below-zero', versions='max', request=_features([('transaction.version', -1, 2)]))
case('UpdateFeatures', 'unknown-upgrade-type', version=[1, 2], request=_features([('transaction.version', 1, 9)]))
case('UpdateFeatures', 'downgrade-typed-upgrade', version=[1, 2], request=_features([('transaction.version', 0, 1)]))
case('UpdateFeatures', 'validate-only-downgrade', version=[1, 2],
     request=_features([('transaction.version', 0, 2)], validate_only=True))
case('UpdateFeatures', 'empty-list', versions='all', request=_features([]))
unsupported('UpdateFeatures', [99])

# --- AlterPartitionReassignments / ListPartitionReassignments (one node: its own id is the only target) ---
def _reassign(parts, v1_allow=True):
    return lambda s, v: dict({'timeout_ms': 10000, 'topics': [{'name': t, 'partitions': [
        {'partition_index': p, 'replicas': r} for p, r in ps]} for t, ps in parts]},
        **({'allow_replication_factor_change': v1_allow} if v >= 1 else {}))


case('AlterPartitionReassignments', 'unknown-broker', versions='all', request=_reassign([(MAIN, [(0, [9])])]))
case('AlterPartitionReassignments', 'empty-replicas', versions='max', request=_reassign([(MAIN, [(0, [])])]))
case('AlterPartitionReassignments', 'cancel-none', versions='max', request=_reassign([(MAIN, [(0, None)])]))
case('AlterPartitionReassignments', 'unknown-topic', versions='max', request=_reassign([(MISSING, [(0, [9])])]))
case('AlterPartitionReassignments', 'empty-list', versions='max', request=_reassign([]))
unsupported('AlterPartitionReassignments', [99])
case('ListPartitionReassignments', 'all', versions='all', request={'timeout_ms': 10000, 'topics': None})
case('ListPartitionReassignments', 'named', versions='max',
     request={'timeout_ms': 10000, 'topics': [{'name': MAIN, 'partition_indexes': [0, 1]}]})
unsupported('ListPartitionReassignments', [99])

# --- InitProducerId / DescribeProducers ---------------------------------------------------------
case('InitProducerId', 'idempotent', versions='all',
     request={'transactional_id': None, 'transaction_timeout_ms': 60000})
case('InitProducerId', 'transactional', versions='max',
     request={'transactional_id': 'd-txn', 'transaction_timeout_ms': 60000}, timeout=20.0)
unsupported('InitProducerId', [99])

case('DescribeProducers', 'normal', versions='all',
     request={'topics': [{'name': IDEM, 'partition_indexes': [0]}]})
case('DescribeProducers', 'no-producers', versions='max',
     request={'topics': [{'name': MAIN, 'partition_indexes': [1]}]})
case('DescribeProducers', 'unknown-topic', versions='max',
     request={'topics': [{'name': MISSING, 'partition_indexes': [0]}]})
case('DescribeProducers', 'unknown-partition', versions='max',
     request={'topics': [{'name': MAIN, 'partition_indexes': [99]}]})
case('DescribeProducers', 'empty-list', versions='max', request={'topics': []})
unsupported('DescribeProducers', [99])

# --- Configs ------------------------------------------------------------------------------------
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def _describe_configs(rtype, name, keys, synonyms=False):
    return lambda s, v: {'resources': [{'resource_type': rtype, 'resource_name': name, 'configuration_keys': keys}],
                         'include_synonyms': synonyms, 'include_documentation': False}


case('DescribeConfigs', 'topic-all', versions='all', request=_describe_configs(TOPIC, MAIN, None))
case('DescribeConfigs', 'topic-keys-synonyms', versions='max',
     request=_describe_configs(TOPIC, COMPACT, ['cleanup.policy', 'retention.ms', 'segment.bytes'], True))
case('DescribeConfigs', 'topic-unknown-key', versions='max', request=_describe_configs(TOPIC, MAIN, ['no.such']))
case('DescribeConfigs', 'unknown-topic', versions='max', request=_describe_configs(TOPIC, MISSING, None))
case('DescribeConfigs', 'broker-keys', versions='max',
     request=_describe_configs(BROKER, '1', ['log.retention.hours', 'auto.create.topics.enable',
                                             'log.cleanup.policy', 'compression.type']))
case('DescribeConfigs', 'unknown-broker', versions='max', request=_describe_configs(BROKER, '7', ['num.partitions']))
case('DescribeConfigs', 'empty-list', versions='max', request={'resources': []})
unsupported('DescribeConfigs', [0, 99])


def _alter(rtype, name, configs, validate_only=False):
    return lambda s, v: {'resources': [{'resource_type': rtype, 'resource_name': name,
                                        'configs': [{'name': k, 'value': val} for k, val in configs.items()]}],
                         'validate_only': validate_only}


case('AlterConfigs', 'topic', versions='all', request=_alter(TOPIC, ALTER, {'retention.ms': '86400000'}))
case('DescribeConfigs', 'after-alter', versions='max',
     request=_describe_configs(TOPIC, ALTER, ['retention.ms', 'segment.ms', 'cleanup.policy']))
case('AlterConfigs', 'unknown-config', versions='max', request=_alter(TOPIC, ALTER, {'no.such': '1'}))
case('AlterConfigs', 'bad-value', versions='max', request=_alter(TOPIC, ALTER, {'retention.ms': 'x'}))
case('AlterConfigs', 'unknown-topic', versions='max', request=_alter(TOPIC, MISSING, {'retention.ms': '1'}))
case('AlterConfigs', 'validate-only', versions='max',
     request=_alter(TOPIC, ALTER, {'retention.ms': '5'}, validate_only=True))
case('AlterConfigs', 'broker', versions='max', request=_alter(BROKER, '1', {'log.retention.ms': '3600000'}))
case('AlterConfigs', 'empty-list', versions='max', request={'resources': []})
# (AlterConfigs naming a resource twice is not a case: Kafka 4.4 leaves it unanswered, the client waits for its
# timeout; Gregor answers INVALID_REQUEST "Each resource must appear at most once." for each, as
# IncrementalAlterConfigs does on both.)
unsupported('AlterConfigs', [99])

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _incr(rtype, name, ops, validate_only=False):
    return lambda s, v: {'resources': [{'resource_type': rtype, 'resource_name': name, 'configs': [
        {'name': k, 'config_operation': op, 'value': val} for k, op, val in ops]}], 'validate_only': validate_only}


case('IncrementalAlterConfigs', 'set', versions='all', request=_incr(TOPIC, ALTER, [('segment.ms', SET, '3600000')]))
case('IncrementalAlterConfigs', 'delete', versions='max', request=_incr(TOPIC, ALTER, [('segment.ms', DELETE, None)]))
case('IncrementalAlterConfigs', 'append-list', versions='max',
     request=_incr(TOPIC, ALTER, [('cleanup.policy', APPEND, 'compact')]))
case('IncrementalAlterConfigs', 'append-non-list', versions='max',
     request=_incr(TOPIC, ALTER, [('retention.ms', APPEND, '1')]))
case('IncrementalAlterConfigs', 'unknown-op', versions='max', request=_incr(TOPIC, ALTER, [('retention.ms', 9, '1')]))
case('IncrementalAlterConfigs', 'unknown-topic', versions='max',
     request=_incr(TOPIC, MISSING, [('retention.ms', SET, '1')]))
case('IncrementalAlterConfigs', 'duplicate-key', versions='max',
     request=_incr(TOPIC, ALTER, [('retention.ms', SET, '1'), ('retention.ms', SET, '2')]))
case('IncrementalAlterConfigs', 'broker', versions='max',
     request=_incr(BROKER, '1', [('log.retention.ms', SET, '3600000')]))
case('IncrementalAlterConfigs', 'broker-default', versions='max',
     request=_incr(BROKER, '', [('log.retention.ms', SET, '3600000')]))
case('IncrementalAlterConfigs', 'broker-logger', versions='max',
     request=_incr(BROKER_LOGGER, '1', [('kafka', SET, 'INFO')]))
case('IncrementalAlterConfigs', 'empty-list', versions='max', request={'resources': []})
case('IncrementalAlterConfigs', 'duplicate-resource', versions='max', request=lambda s, v: {'resources': [
    {'resource_type': TOPIC, 'resource_name': n, 'configs': [
        {'name': 'retention.ms', 'config_operation': SET, 'value': '86400000'}]}
    for n in (ALTER, MISSING, ALTER)], 'validate_only': True})
unsupported('IncrementalAlterConfigs', [99])

def _without_internal_topics(ans):
    """DescribeLogDirs of every topic: the internal topics' sizes depend on each broker's own records."""
    if isinstance(ans, dict):
        for d in (ans.get('results') or {}).values():
            if isinstance(d.get('topics'), dict):
                d['topics'] = {k: t for k, t in d['topics'].items() if not k.startswith('__')}
    return ans


# --- DescribeLogDirs / DescribeCluster ----------------------------------------------------------
case('DescribeLogDirs', 'topics', versions='all',
     request={'topics': [{'topic': MAIN, 'partitions': [0, 1]}, {'topic': DEL, 'partitions': [0]}]})
case('DescribeLogDirs', 'all-topics', versions='minmax', request={'topics': None},
     normalise=lambda s, v, ans: _without_internal_topics(ans))
case('DescribeLogDirs', 'unknown-topic', versions='max', request={'topics': [{'topic': MISSING, 'partitions': [0]}]})
case('DescribeLogDirs', 'unknown-partition', versions='max', request={'topics': [{'topic': MAIN, 'partitions': [99]}]})
case('DescribeLogDirs', 'empty-list', versions='max', request={'topics': []})
unsupported('DescribeLogDirs', [0, 99])


def _log_dir(side):
    """The side's one log directory, as its DescribeLogDirs spells it (each broker's path differs)."""
    if 'log_dir' not in side.ctx:
        with side.conn() as c:
            side.ctx['log_dir'] = c.request('DescribeLogDirs', 4, {'topics': None})['results'][0]['log_dir']
    return side.ctx['log_dir']


def _alter_dirs(*dirs):
    """AlterReplicaLogDirs values: each dir a (path, [(topic, partitions)]); path None = the side's own."""
    return lambda s, v: {'dirs': [{'path': _log_dir(s) if path is None else path,
                                   'topics': [{'name': t, 'partitions': ps} for t, ps in topics]}
                                  for path, topics in dirs]}


# --- AlterReplicaLogDirs ------------------------------------------------------------------------
case('AlterReplicaLogDirs', 'own-dir', versions='all',
     request=_alter_dirs((None, [(MAIN, [0, 1, 99]), (MISSING, [0])])))
case('AlterReplicaLogDirs', 'other-dirs', versions='max',
     request=_alter_dirs(('/nonexistent-differential-dir', [(MAIN, [0]), (MISSING, [0])]), ('data', [(DEL, [0])])))
case('AlterReplicaLogDirs', 'named-twice', versions='max',
     request=_alter_dirs(('/nonexistent-differential-dir', [(MAIN, [0])]), (None, [(MAIN, [0, 1])]),
                         ('/nonexistent-differential-dir', [(MAIN, [1])])))
case('AlterReplicaLogDirs', 'long-topic', versions='max',
     request=_alter_dirs(('/nonexistent-differential-dir', [('x' * 214, [0])]), (None, [('x' * 213, [0])])))
case('AlterReplicaLogDirs', 'empty-list', versions='max', request={'dirs': []})
unsupported('AlterReplicaLogDirs', [0, 99])

case('DescribeCluster', 'brokers', versions='all', request={'include_cluster_authorized_operations': False})
case('DescribeCluster', 'include-fenced', version=[2], request={'include_fenced_brokers': True})
case('DescribeCluster', 'controllers-endpoint', version=[1, 2], request={'endpoint_type': 2})
unsupported('DescribeCluster', [99])

# --- Groups -------------------------------------------------------------------------------------
PROTOCOL_META = b'\x00\x03\x00\x00\x00\x01\x00\x06d-main\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff'


def _find(key, key_type=0):
    return lambda s, v: {'key': key, 'key_type': key_type, 'coordinator_keys': [key]}


case('FindCoordinator', 'group', versions='all', request=_find(GROUP))
case('FindCoordinator', 'transaction', versions='max', request=_find('d-txn', 1))
case('FindCoordinator', 'bad-key-type', versions='max', request=_find(GROUP, 7))
case('FindCoordinator', 'empty-keys', version=[4, 5, 6], request={'key_type': 0, 'coordinator_keys': []})
unsupported('FindCoordinator', [99])


def _join(member_key=None, group=GROUP, protocol_type='consumer'):
    def build(side, v):
        return {'group_id': group, 'session_timeout_ms': 30000, 'rebalance_timeout_ms': 30000,
                'member_id': side.ctx.get(member_key, '') if member_key else '', 'group_instance_id': None,
                'protocol_type': protocol_type, 'protocols': [{'name': 'range', 'metadata': PROTOCOL_META}],
                'reason': None}
    return build


def _keep_member(side, v, resp):
    if resp.get('member_id'):
        side.ctx['member'] = resp['member_id']
    if resp.get('generation_id', -1) >= 0:
        side.ctx['generation'] = resp['generation_id']


case('JoinGroup', 'new-group-each-version', versions='all',
     request=lambda s, v: dict(_join(group=f'dg-join-{v}')(s, v), session_timeout_ms=6000), timeout=30.0,
     after=lambda s, v, r: s.ctx.__setitem__(f'join-{v}', r.get('member_id', '')))
case('JoinGroup', 'member-id-required', versions='max', request=_join(), after=_keep_member)
case('JoinGroup', 'join', versions='max', request=_join('member'), after=_keep_member, timeout=30.0)
case('SyncGroup', 'leader-assigns', versions='max',
     request=lambda s, v: {'group_id': GROUP, 'generation_id': s.ctx.get('generation', -1),
                           'member_id': s.ctx.get('member', ''), 'protocol_type': 'consumer', 'protocol_name': 'range',
                           'assignments': [{'member_id': s.ctx.get('member', ''), 'assignment': b'\x00\x01'}]})


def _hb(gen_delta=0, member=True, group=GROUP):
    return lambda s, v: {'group_id': group, 'generation_id': s.ctx.get('generation', -1) + gen_delta,
                         'member_id': s.ctx.get('member', '') if member else 'nobody', 'group_instance_id': None}


case('Heartbeat', 'normal', versions='all', request=_hb())
case('Heartbeat', 'wrong-generation', versions='max', request=_hb(gen_delta=5))
case('Heartbeat', 'unknown-member', versions='max', request=_hb(member=False))
case('Heartbeat', 'unknown-group', versions='max', request=_hb(group='dg-none'))
case('JoinGroup', 'unknown-member', versions='max',
     request=lambda s, v: dict(_join()(s, v), member_id='nobody'))
case('JoinGroup', 'bad-session-timeout', versions='max',
     request=lambda s, v: dict(_join(group='dg-timeout')(s, v), session_timeout_ms=10))
case('JoinGroup', 'empty-protocols', versions='max',
     request=lambda s, v: dict(_join(group='dg-noproto')(s, v), protocols=[]))
case('JoinGroup', 'inconsistent-protocol-type', versions='max', request=_join('member', protocol_type='other'))
case('SyncGroup', 'unknown-member', versions='max',
     request=lambda s, v: {'group_id': GROUP, 'generation_id': s.ctx.get('generation', -1), 'member_id': 'nobody',
                           'protocol_type': 'consumer', 'protocol_name': 'range', 'assignments': []})


def _commit(group, member=True, parts=((0, 3),), topic=MAIN, metadata='m'):
    def build(side, v):
        return {'group_id': group, 'generation_id_or_member_epoch': side.ctx.get('generation', -1) if member else -1,
                'member_id': side.ctx.get('member', '') if member else '', 'group_instance_id': None,
                'retention_time_ms': -1,
                'topics': [{'name': topic, 'topic_id': tid(side, topic), 'partitions': [
                    {'partition_index': p, 'committed_offset': o, 'committed_leader_epoch': -1,
                     'committed_metadata': metadata} for p, o in parts]}]}
    return build


case('OffsetCommit', 'member', versions='all', request=_commit(GROUP))
case('OffsetCommit', 'simple', versions='all', request=_commit(SIMPLE, member=False, parts=((0, 2), (1, 0))))
case('OffsetCommit', 'wrong-generation', versions='max',
     request=lambda s, v: dict(_commit(GROUP)(s, v), generation_id_or_member_epoch=77))
case('OffsetCommit', 'unknown-topic', versions='max', request=_commit(SIMPLE, member=False, topic=MISSING))
case('OffsetCommit', 'unknown-partition', versions='max', request=_commit(SIMPLE, member=False, parts=((99, 1),)))
case('OffsetCommit', 'metadata-too-large', versions='max',
     request=_commit(SIMPLE, member=False, metadata='x' * 5000))
case('OffsetCommit', 'empty-topics', versions='max',
     request={'group_id': SIMPLE, 'generation_id_or_member_epoch': -1, 'member_id': '', 'topics': []})
unsupported('OffsetCommit', [1, 99])


def _offset_fetch(group, topics):
    def build(side, v):
        if v >= 8:
            ts = None if topics is None else [{'name': n, 'topic_id': tid(side, n), 'partition_indexes': p}
                                              for n, p in topics]
            return {'groups': [{'group_id': group, 'member_id': None, 'member_epoch': -1, 'topics': ts}],
                    'require_stable': False}
        ts = None if topics is None else [{'name': n, 'partition_indexes': p} for n, p in topics]
        return {'group_id': group, 'topics': ts, 'require_stable': False}
    return build


case('OffsetFetch', 'partitions', versions='all', request=_offset_fetch(SIMPLE, [(MAIN, [0, 1])]))
case('OffsetFetch', 'all-topics', versions='max', request=_offset_fetch(SIMPLE, None))
case('OffsetFetch', 'unknown-group', versions='max', request=_offset_fetch('dg-none', [(MAIN, [0])]))
case('OffsetFetch', 'unknown-topic', versions='max', request=_offset_fetch(SIMPLE, [(MISSING, [0])]))
case('OffsetFetch', 'empty-topics', versions='max', request=_offset_fetch(SIMPLE, []))
unsupported('OffsetFetch', [0, 99])

case('DescribeGroups', 'stable-group', versions='all',
     request={'groups': [GROUP], 'include_authorized_operations': False})
case('DescribeGroups', 'unknown-group', versions='max', request={'groups': ['dg-none']})
case('DescribeGroups', 'empty-list', versions='max', request={'groups': []})
unsupported('DescribeGroups', [99])

case('ListGroups', 'all', versions='all', request={'states_filter': [], 'types_filter': []})
case('ListGroups', 'stable-only', versions='max', request={'states_filter': ['Stable'], 'types_filter': []})
case('ListGroups', 'consumer-type', versions='max', request={'states_filter': [], 'types_filter': ['consumer']})
unsupported('ListGroups', [99])

case('OffsetDelete', 'simple-group', versions='all',
     request={'group_id': SIMPLE, 'topics': [{'name': MAIN, 'partitions': [{'partition_index': 1}]}]})
case('OffsetDelete', 'subscribed-topic', versions='max',
     request={'group_id': GROUP, 'topics': [{'name': MAIN, 'partitions': [{'partition_index': 0}]}]})
case('OffsetDelete', 'unknown-group', versions='max',
     request={'group_id': 'dg-none', 'topics': [{'name': MAIN, 'partitions': [{'partition_index': 0}]}]})
case('OffsetDelete', 'unknown-topic', versions='max',
     request={'group_id': SIMPLE, 'topics': [{'name': MISSING, 'partitions': [{'partition_index': 0}]}]})
unsupported('OffsetDelete', [99])

case('LeaveGroup', 'member', versions='max',
     request=lambda s, v: {'group_id': GROUP, 'member_id': s.ctx.get('member', ''), 'members': [
         {'member_id': s.ctx.get('member', ''), 'group_instance_id': None, 'reason': None}]})
case('LeaveGroup', 'each-version-group', versions='all',
     request=lambda s, v: {'group_id': f'dg-join-{v}', 'member_id': s.ctx.get(f'join-{v}', ''), 'members': [
         {'member_id': s.ctx.get(f'join-{v}', ''), 'group_instance_id': None, 'reason': None}]})
case('LeaveGroup', 'unknown-member', versions='max',
     request={'group_id': GROUP, 'member_id': 'nobody', 'members': [{'member_id': 'nobody', 'group_instance_id': None}]})
case('LeaveGroup', 'unknown-group', versions='max',
     request={'group_id': 'dg-none', 'member_id': 'nobody', 'members': [{'member_id': 'nobody'}]})
unsupported('LeaveGroup', [99])
unsupported('Heartbeat', [99])
unsupported('JoinGroup', [99])
unsupported('SyncGroup', [99])

case('DeleteGroups', 'groups', versions='max', request={'groups_names': [SIMPLE, GROUP, 'dg-none']})
case('DeleteGroups', 'empty-list', versions='all', request={'groups_names': []})
unsupported('DeleteGroups', [99])

# --- SCRAM credentials and client quotas (issue #23) -----------------------------------------------
# Run in this order on each side: none at first, then upsertions with Kafka's refusals, describes, deletions.
SCRAM_SALTED = bytes(range(32))


def scram_up(name, mech=1, iterations=4096, salted=SCRAM_SALTED):
    return {'name': name, 'mechanism': mech, 'iterations': iterations, 'salt': b'differential-salt',
            'salted_password': salted}


def settle_scram(expected, timeout=15.0):
    """Bounded wait until DescribeUserScramCredentials shows `expected` ({user: {mechanism}}): Kafka applies a
    change through its controller and the metadata log, so a describe right after an alter may see the state
    before it (Gregor answers once the change is on disk)."""
    def fn(side, v):
        deadline = time.monotonic() + timeout
        while True:
            with side.conn() as c:
                r = c.request('DescribeUserScramCredentials', 0, {'users': None})
            got = {u['user']: {i['mechanism'] for i in u['credential_infos']} for u in r.get('results') or []}
            if got == expected:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f'{side.label}: SCRAM credentials {got} not {expected} after {timeout}s')
            time.sleep(0.2)
    return fn


case('DescribeUserScramCredentials', 'none-yet', versions='all', request={'users': None})
case('AlterUserScramCredentials', 'upsertions', versions='all', request={'deletions': [], 'upsertions': [
    scram_up('dc-alice'), scram_up('dc-bob', 2, 8192, bytes(64)), scram_up('dc-mech0', 0), scram_up('dc-mech3', 3),
    scram_up('', 1), scram_up('dc-few', 1, 4095), scram_up('dc-many', 2, 16385), scram_up('dc-twice', 1),
    scram_up('dc-twice', 2)]}, settle=settle_scram({'dc-alice': {1}, 'dc-bob': {2}}))
case('DescribeUserScramCredentials', 'all-null', versions='all', request={'users': None})
case('DescribeUserScramCredentials', 'all-empty', versions='all', request={'users': []})
case('DescribeUserScramCredentials', 'named', versions='all', request={'users': [
    {'name': 'dc-alice'}, {'name': 'nobody'}, {'name': 'dc-bob'}, {'name': 'dc-bob'}]})
case('AlterUserScramCredentials', 'deletions', versions='all', request={'upsertions': [scram_up('dc-alice', 2)],
     'deletions': [{'name': 'dc-bob', 'mechanism': 1}, {'name': 'nobody', 'mechanism': 1},
                   {'name': 'dc-alice', 'mechanism': 1}, {'name': 'dc-zero', 'mechanism': 0}]},
     settle=settle_scram({'dc-alice': {1}, 'dc-bob': {2}}))  # dc-alice named twice: DUPLICATE_RESOURCE, unchanged
case('AlterUserScramCredentials', 'delete-last', versions='all',
     request={'upsertions': [], 'deletions': [{'name': 'dc-bob', 'mechanism': 2}]},
     settle=settle_scram({'dc-alice': {1}}))
case('DescribeUserScramCredentials', 'after-deletions', versions='all', request={'users': None})
unsupported('DescribeUserScramCredentials', [99])
unsupported('AlterUserScramCredentials', [99])
case('DescribeClientQuotas', 'users-any', versions='all',
     request={'components': [{'entity_type': 'user', 'match_type': 2, 'match': None}], 'strict': False})
case('DescribeClientQuotas', 'client-exact', versions='all',
     request={'components': [{'entity_type': 'client-id', 'match_type': 0, 'match': 'dc-client'}], 'strict': True})
unsupported('DescribeClientQuotas', [99])

# --- Transactions (issue #21) ------------------------------------------------------------------
# One transactional id, TXN_ID, over TXN_TOPIC-0 and the offsets of TXN_GROUP, committed; then the errors of a
# finished transaction. Both sides start from no __transaction_state: the first case's request function first
# waits (bounded) until FindCoordinator key type 1 and InitProducerId answer (Kafka answers
# COORDINATOR_NOT_AVAILABLE while it creates and loads the topic; Gregor parks the lookup meanwhile), so the
# compared answers do not depend on how long either takes to load.
TXN_ID = 'd-txn'
TXN_TOPIC = 'd-txn-topic'
TXN_GROUP = 'dg-txn'


def _txn_retry(side, api, version, values, ok=lambda r: r.get('error_code') == 0, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        with side.conn() as c:
            r = c.request(api, version, values)
        if ok(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def _txn_ready(side, v):
    """Bounded warm-up (not compared): TXN_TOPIC made, the coordinator answering, TXN_ID's producer id kept."""
    with side.conn() as c:
        r = kr.create_topic(c, TXN_TOPIC, 1, {}, version=7)
        assert r['error_code'] == 0, r
    metadata_ready(side, [TXN_TOPIC])
    produce_ready(side, TXN_TOPIC, 0)
    r = _txn_retry(side, 'FindCoordinator', 3, {'key': TXN_ID, 'key_type': 1})
    assert r['error_code'] == 0, r
    r = _txn_retry(side, 'InitProducerId', 4, {'transactional_id': TXN_ID, 'transaction_timeout_ms': 60000})
    assert r['error_code'] == 0, r
    side.ctx['txn_pid'], side.ctx['txn_epoch'] = r['producer_id'], r['producer_epoch']
    return {'key': TXN_ID, 'key_type': 1}


def _txn(extra=None, **kw):
    def build(side, v):
        d = {'transactional_id': TXN_ID, 'producer_id': side.ctx['txn_pid'], 'producer_epoch': side.ctx['txn_epoch']}
        d.update(kw)
        if extra:
            d.update(extra(side, v))
        return d
    return build


def _txn_settle(side, v):
    """Bounded wait until TXN_ID's transaction is complete (no Prepare* state: its markers are written)."""
    _txn_retry(side, 'DescribeTransactions', 0, {'transactional_ids': [TXN_ID]},
               ok=lambda r: r['transaction_states'][0]['transaction_state'] in ('CompleteCommit', 'CompleteAbort',
                                                                               'Empty'), timeout=30.0)


def _txn_start_time(side, v, norm):
    """DescribeTransactions' start time is each broker's clock: compared as set (>= 0) or -1."""
    for s in norm.get('transaction_states', []) if isinstance(norm, dict) else []:
        if isinstance(s.get('transaction_start_time_ms'), int) and s['transaction_start_time_ms'] > 0:
            s['transaction_start_time_ms'] = '<time>'
    return norm


case('FindCoordinator', 'transaction-ready', version=[3], request=_txn_ready)
case('FindCoordinator', 'transaction-batched', versions='max', request={'key_type': 1, 'coordinator_keys': [TXN_ID, 'd-txn-2']})
case('InitProducerId', 'transaction-timeout-too-long', versions='max',
     request={'transactional_id': 'd-txn-long', 'transaction_timeout_ms': 900001})
case('AddPartitionsToTxn', 'client', version=[3], request=lambda s, v: {
    'v3_and_below_transactional_id': TXN_ID, 'v3_and_below_producer_id': s.ctx['txn_pid'],
    'v3_and_below_producer_epoch': s.ctx['txn_epoch'],
    'v3_and_below_topics': [{'name': TXN_TOPIC, 'partitions': [0]}, {'name': MISSING, 'partitions': [0]}]})
case('AddPartitionsToTxn', 'client-added', version=[3], request=lambda s, v: {
    'v3_and_below_transactional_id': TXN_ID, 'v3_and_below_producer_id': s.ctx['txn_pid'],
    'v3_and_below_producer_epoch': s.ctx['txn_epoch'], 'v3_and_below_topics': [{'name': TXN_TOPIC, 'partitions': [0]}]})
case('AddPartitionsToTxn', 'verify-only', versions='max', request=lambda s, v: {'transactions': [
    {'transactional_id': TXN_ID, 'producer_id': s.ctx['txn_pid'], 'producer_epoch': s.ctx['txn_epoch'],
     'verify_only': True, 'topics': [{'name': TXN_TOPIC, 'partitions': [0]}, {'name': MAIN, 'partitions': [0]}]}]})
# Produce v11 (the highest a transaction version 1 client sends transactionally): from v12 both brokers add
# the partition to the transaction themselves (KIP-890 part 2, by the request version whatever the finalized
# transaction.version, 2 on both by default: Kafka 4.4 formats at 2, Gregor's default since 2026-12-04).
case('Produce', 'transactional', version=[11], request=lambda s, v: _produce(
    TXN_TOPIC, 0, lambda: batch(2, attributes_extra=0x10, producer_id=s.ctx['txn_pid'],
                                producer_epoch=s.ctx['txn_epoch'], base_sequence=0), txn=TXN_ID)(s, v))
case('Produce', 'transactional-partition-not-added', version=[11], request=lambda s, v: _produce(
    MAIN, 1, lambda: batch(1, attributes_extra=0x10, producer_id=s.ctx['txn_pid'],
                           producer_epoch=s.ctx['txn_epoch'], base_sequence=0), txn=TXN_ID)(s, v))
case('Produce', 'to-transaction-state', version=[9],
     request=_produce('__transaction_state', 0, lambda: batch(1)))
case('AddOffsetsToTxn', 'group', versions='max', request=_txn(group_id=TXN_GROUP))
case('TxnOffsetCommit', 'simple', versions='max', request=lambda s, v: {
    'transactional_id': TXN_ID, 'group_id': TXN_GROUP, 'producer_id': s.ctx['txn_pid'],
    'producer_epoch': s.ctx['txn_epoch'], 'generation_id': -1, 'member_id': '', 'group_instance_id': None,
    'topics': [{'name': TXN_TOPIC, 'partitions': [{'partition_index': 0, 'committed_offset': 2,
                                                   'committed_leader_epoch': -1, 'committed_metadata': ''}]}]})
case('DescribeTransactions', 'ongoing', versions='max', request={'transactional_ids': [TXN_ID, 'd-txn-none']},
     normalise=_txn_start_time)
case('ListTransactions', 'ongoing', versions='max',
     request={'state_filters': ['Ongoing'], 'producer_id_filters': [], 'duration_filter': -1})
case('ListOffsets', 'read-committed-open-transaction', versions='max', request=lambda s, v: {
    'replica_id': -1, 'isolation_level': 1, 'topics': [{'name': TXN_TOPIC, 'partitions': [
        {'partition_index': 0, 'current_leader_epoch': -1, 'timestamp': -1}]}]})
case('EndTxn', 'commit', versions='max', request=_txn(committed=True), settle=_txn_settle)
case('EndTxn', 'commit-again', versions='max', request=_txn(committed=True))
case('EndTxn', 'abort-after-commit', versions='max', request=_txn(committed=False))
case('EndTxn', 'other-epoch', versions='max', request=lambda s, v: _txn(committed=True)(s, v) | {
    'producer_epoch': s.ctx['txn_epoch'] + 1})
case('DescribeTransactions', 'committed', versions='max', request={'transactional_ids': [TXN_ID]},
     normalise=_txn_start_time)
case('Fetch', 'read-committed-after-commit', versions='max', request=lambda s, v: dict(
    _fetch(TXN_TOPIC, 0, 0)(s, v), isolation_level=1))
case('OffsetFetch', 'after-transactional-commit', versions='max', request=_offset_fetch(TXN_GROUP, [(TXN_TOPIC, [0])]))
case('DescribeTransactions', 'unknown-id', versions='max', request={'transactional_ids': ['d-txn-none']})
case('ListTransactions', 'all', versions='max',
     request={'state_filters': [], 'producer_id_filters': [], 'duration_filter': -1})
unsupported('EndTxn', [99])

# Last, since it is destructive on Kafka (it deletes the group coordinator's topic and every group with it).
case('DeleteTopics', 'consumer-offsets', versions='max', request=_delete_topics(['__consumer_offsets']))
