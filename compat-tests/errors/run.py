"""errors/run.py: raw-socket error paths against a running broker (BROKER, BROKER_DIR in the environment;
the broker runs with socket.request.max.bytes=1048576, see run.sh).

Each case sends hand-made bytes and asserts the exact answer: the connection closed without a response,
or an exact error code; after every case a new connection must still get an ApiVersions answer.
Cases (Kafka's rules, from its network layer and request handlers):
  frame size above socket.request.max.bytes      -> connection closed, no response (exactly the limit: served)
  frame size < 8 (no room for key/version/corr), 0, negative -> connection closed
  malformed request (garbage body, short header, unknown API key) -> connection closed
  ApiVersions v99 (and max+1)                     -> v0 response, error 35 UNSUPPORTED_VERSION, api_keys =
                                                     exactly [ApiVersions 0..max]; the connection stays open
  Metadata v99 (and max+1), Fetch below its minimum -> connection closed, no response
  Produce to a missing topic                      -> 3 UNKNOWN_TOPIC_OR_PARTITION by name (v3, v9), 100
                                                     UNKNOWN_TOPIC_ID by id (v13); the topic is not created
  batch timestamp now+2h                          -> 32 INVALID_TIMESTAMP (after.max.ms default 1 h), HWM same
  acks=2, acks=-2                                 -> 21 INVALID_REQUIRED_ACKS, nothing appended
  keyless records on a compacted topic, records  -> 87 / 32 with record_errors naming each refused record
  older than before.max.ms                           (batch_index, Kafka's message), Kafka's error_message, the
                                                     partition's log_start_offset, nothing appended
  transactional batch, null transactional id     -> 53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition,
                                                     no message, log_start_offset -1, nothing appended
  ListOffsets naming a partition twice           -> one entry for it, 42 INVALID_REQUEST; a topic named twice
                                                     gets one topic entry (Kafka keys answers by partition)
  DeleteRecords on cleanup.policy=compact         -> 44 POLICY_VIOLATION, low_watermark -1, log start offset
                                                     and records kept; compact,delete is accepted (Kafka 4.4)
  batch header max timestamp now+10y, records now -> stored with the header's max timestamp corrected to the
                                                     records' (Kafka's LogValidator), ListOffsets -3 answers the
                                                     record's time, retention.ms deletes it and the batch after it
  OffsetCommit whose records exceed the offsets -> 28 INVALID_COMMIT_OFFSET_SIZE on every partition, nothing
  topic's max.message.bytes (1048588)               committed; a smaller commit of the same group: 0
  Fetch v12+ LastFetchedEpoch 0, fetch offset    -> DivergingEpoch {0, end of epoch 0} and no records, answered at
  past epoch 0's end                                 once; an epoch above the leader's: 1 OFFSET_OUT_OF_RANGE
  300 bad frames in a row                         -> at most 10 "frame size" warnings per 10 s window in the
                                                     broker log (rate limited; run.sh checks the suppressed count)
"""
import os
import re
import socket
import struct
import time
import uuid

import kafka_raw as k
import testkit as tk

B = tk.broker()
FRAME_MAX = 1048576


def alive(case):
    try:
        with k.Conn(B) as c:
            resp = k.api_versions(c)
        tk.check(f'{case}: broker stays up, a new connection gets ApiVersions', resp['error_code'] == 0,
                 f'error {resp["error_code"]}')
    except Exception as e:  # noqa: BLE001
        tk.fail(f'{case}: broker stays up, a new connection gets ApiVersions', repr(e))


def send_and_expect_close(case, data):
    with k.Conn(B) as c:
        try:
            c.send_raw(data)
        except (BrokenPipeError, ConnectionResetError):
            tk.ok(f'{case}: connection closed (reset while sending)')
            return
        tk.check(f'{case}: connection closed without a response', c.closed_by_peer(5.0),
                 'the broker answered or kept the connection open')


def oversized_frame():
    hdr = k.request_header(18, 3, 1)
    send_and_expect_close('oversized frame (socket.request.max.bytes + 1)', struct.pack('>i', FRAME_MAX + 1) + hdr)
    alive('oversized frame')
    send_and_expect_close('oversized frame (2 GiB - 1)', struct.pack('>i', 0x7fffffff) + hdr)
    alive('oversized frame 2 GiB')


def frame_at_limit():
    """A Produce frame of exactly socket.request.max.bytes is served."""
    with k.Conn(B) as c:
        r = k.create_topic(c, 'err-big', 1)
        tk.eq('frame at the limit: CreateTopics err-big', 0, r['error_code'])
        size = FRAME_MAX - 200
        for _ in range(5):
            batch = k.build_batch([(None, b'x' * size)])
            values = {'transactional_id': None, 'acks': 1, 'timeout_ms': 10000,
                      'topic_data': [{'name': 'err-big', 'partition_data': [{'index': 0, 'records': batch}]}]}
            payload = k.request_header(0, 9, 7) + k.encode_body('Produce', 9, values)
            if len(payload) == FRAME_MAX:
                break
            size += FRAME_MAX - len(payload)
        tk.eq('frame at the limit: frame is exactly socket.request.max.bytes', FRAME_MAX, len(payload))
        c.send_raw(k.frame(payload))
        _, resp = c.recv('Produce', 9, 7, timeout=20)
        tk.eq('frame at the limit: Produce answered with error 0', 0,
              resp['responses'][0]['partition_responses'][0]['error_code'])
    alive('frame at the limit')


def short_frames():
    for size, body in ((0, b''), (4, struct.pack('>hh', 18, 3)), (7, struct.pack('>hhi', 18, 3, 1)[:7]),
                       (-1, b''), (-100, b'')):
        send_and_expect_close(f'frame size {size}', struct.pack('>i', size) + body)
        alive(f'frame size {size}')


def malformed():
    # Metadata v1 whose topics array claims 2^31-1 entries in a 4-byte body.
    send_and_expect_close('malformed: Metadata v1 topics count 2147483647',
                          k.frame(k.request_header(3, 1, 1) + struct.pack('>i', 0x7fffffff)))
    alive('malformed Metadata count')
    # Produce v9 with 64 bytes of garbage as body.
    send_and_expect_close('malformed: Produce v9 with a garbage body',
                          k.frame(k.request_header(0, 9, 1) + bytes(range(0xc0, 0x100))))
    alive('malformed Produce')
    # Header only: ApiVersions v3 is flexible and needs two compact strings and a tag section after it.
    send_and_expect_close('malformed: ApiVersions v3 with no body', k.frame(k.request_header(18, 3, 1)))
    alive('malformed ApiVersions body')
    # Client id length pointing past the end of the frame.
    send_and_expect_close('malformed: client id longer than the frame',
                          k.frame(struct.pack('>hhih', 3, 1, 1, 500) + b'abc'))
    alive('malformed client id')
    # Unknown API key.
    send_and_expect_close('malformed: unknown API key 9999', k.frame(struct.pack('>hhih', 9999, 0, 1, 0)))
    alive('unknown API key')
    # Trailing garbage after a complete Metadata v1 body.
    send_and_expect_close('malformed: Metadata v12 with a bad tag section',
                          k.frame(k.request_header(3, 12, 1) + b'\x01\x00\x00\x05\x09'))
    alive('malformed tags')


def unsupported_versions():
    ranges = k.api_version_ranges(B)
    av_max = ranges[18][1]
    for v in (99, av_max + 1):
        with k.Conn(B) as c:
            c.send_raw(k.frame(k.request_header(18, v, 42, header_version=2) + k.encode_body('ApiVersions', 3, {})))
            data = c.recv_frame()
            r = k.Reader(data)
            corr = r.int32()
            body = k.decode_response_body('ApiVersions', 0, data, r.p)
            tk.eq(f'ApiVersions v{v}: correlation id echoed in a v0 header', 42, corr)
            tk.eq(f'ApiVersions v{v}: error 35 UNSUPPORTED_VERSION', k.UNSUPPORTED_VERSION, body['error_code'])
            tk.eq(f'ApiVersions v{v}: api_keys is exactly the ApiVersions entry',
                  [{'api_key': 18, 'min_version': 0, 'max_version': av_max}], body['api_keys'])
            resp = k.api_versions(c, 3)
            tk.check(f'ApiVersions v{v}: same connection then serves ApiVersions v3',
                     resp['error_code'] == 0 and len(resp['api_keys']) >= 7, str(resp['error_code']))
            md = k.metadata(c, [], version=12)
            tk.eq(f'ApiVersions v{v}: same connection then serves Metadata v12', 1, len(md['brokers']))
        alive(f'ApiVersions v{v}')
    md_max = ranges[3][1]
    for v in (99, md_max + 1):
        send_and_expect_close(f'Metadata v{v}', k.frame(k.request_header(3, v, 1, header_version=2) + b'\x01\x01\x00'))
        alive(f'Metadata v{v}')
    fmin = ranges[1][0]
    if fmin > 0:
        send_and_expect_close(f'Fetch v{fmin - 1} (below the served minimum)',
                              k.frame(k.request_header(1, fmin - 1, 1) + struct.pack('>iiii', -1, 0, 1, 0)))
        alive('Fetch below minimum')


def missing_topic():
    names_before = k.topic_names(B)
    with k.Conn(B) as c:
        batch = k.build_batch([(b'k', b'v')])
        for v in (3, 9):
            pr = k.produce(c, 'err-missing', 0, batch, version=v)
            tk.eq(f'Produce v{v} to a missing topic by name: error 3', k.UNKNOWN_TOPIC_OR_PARTITION, pr['error_code'])
            tk.eq(f'Produce v{v} to a missing topic: base_offset -1', -1, pr['base_offset'])
        tid = uuid.uuid4().bytes
        resp = c.request('Produce', 13, {'acks': -1, 'timeout_ms': 5000, 'transactional_id': None, 'topic_data': [
            {'topic_id': tid, 'partition_data': [{'index': 0, 'records': batch}]}]})
        tk.eq('Produce v13 to an unknown topic id: topic id echoed', tid, resp['responses'][0]['topic_id'])
        tk.eq('Produce v13 to an unknown topic id: error 100', k.UNKNOWN_TOPIC_ID,
              resp['responses'][0]['partition_responses'][0]['error_code'])
        md = k.metadata(c, ['err-missing'], version=12, allow_auto=False)
        tk.eq('Produce did not create the topic: Metadata (no auto-create) answers 3',
              [('err-missing', k.UNKNOWN_TOPIC_OR_PARTITION, 0)],
              [(t['name'], t['error_code'], len(t['partitions'])) for t in md['topics']])
        # an existing topic, missing partition
        k.create_topic(c, 'err-one', 1)
        pr = k.produce(c, 'err-one', 7, batch)
        tk.eq('Produce to partition 7 of a 1-partition topic: error 3', k.UNKNOWN_TOPIC_OR_PARTITION, pr['error_code'])
    tk.eq('Produce did not create the topic: the topic list only gained err-one',
          sorted(names_before + ['err-one']), k.topic_names(B))
    alive('missing topic')


def future_timestamp():
    with k.Conn(B) as c:
        k.create_topic(c, 'err-ts', 1)
        now = int(time.time() * 1000)
        pr = k.produce(c, 'err-ts', 0, k.build_batch([(b'k', b'ok')], base_timestamp=now))
        tk.eq('timestamp now: accepted at offset 0', (0, 0), (pr['error_code'], pr['base_offset']))
        hwm = k.high_watermark(B, 'err-ts')
        pr = k.produce(c, 'err-ts', 0, k.build_batch([(b'k', b'future')], base_timestamp=now + 2 * 3600 * 1000))
        tk.eq('batch timestamp now+2h: error 32 INVALID_TIMESTAMP', k.INVALID_TIMESTAMP, pr['error_code'])
        tk.check('batch timestamp now+2h: error_message set (Produce v8+)', pr['error_message'] is not None)
        pr = k.produce(c, 'err-ts', 0, k.build_batch([(b'a', b'now'), (b'b', b'+2h')], base_timestamp=now,
                                                     timestamp_deltas=[0, 2 * 3600 * 1000]))
        tk.eq('second record at now+2h in a batch dated now: error 32', k.INVALID_TIMESTAMP, pr['error_code'])
        tk.eq('INVALID_TIMESTAMP appended nothing: HWM unchanged', hwm, k.high_watermark(B, 'err-ts'))
        pr = k.produce(c, 'err-ts', 0, k.build_batch([(b'k', b'soon')], base_timestamp=now + 30 * 60 * 1000))
        tk.eq('timestamp now+30min (inside after.max.ms): accepted at offset 1', (0, 1),
              (pr['error_code'], pr['base_offset']))
    alive('future timestamp')


def delete_records(c, topic, partition, offset):
    resp = c.request('DeleteRecords', 2, {'timeout_ms': 10000, 'topics': [
        {'name': topic, 'partitions': [{'partition_index': partition, 'offset': offset}]}]})
    return resp['topics'][0]['partitions'][0]


def delete_records_compact():
    """Issue 17 item 1: Kafka's Partition.deleteRecordsOnLeader refuses compact-without-delete topics."""
    with k.Conn(B) as c:
        for topic, policy in (('err-dr-compact', 'compact'), ('err-dr-both', 'compact,delete')):
            r = k.create_topic(c, topic, 1, configs={'cleanup.policy': policy})
            tk.eq(f'CreateTopics {topic} (cleanup.policy={policy})', 0, r['error_code'])
            pr = k.produce(c, topic, 0, k.build_batch([(b'a', b'1'), (b'b', b'2'), (b'c', b'3')]))
            tk.eq(f'{topic}: 3 keyed records at offset 0', (0, 0), (pr['error_code'], pr['base_offset']))
        dr = delete_records(c, 'err-dr-compact', 0, 2)
        tk.eq('DeleteRecords on cleanup.policy=compact: 44 POLICY_VIOLATION, low_watermark -1',
              (k.POLICY_VIOLATION, -1), (dr['error_code'], dr['low_watermark']))
        dr = delete_records(c, 'err-dr-compact', 0, -1)
        tk.eq('DeleteRecords -1 (high watermark) on cleanup.policy=compact: 44', k.POLICY_VIOLATION, dr['error_code'])
        lo = k.list_offsets(c, 'err-dr-compact', 0, -2)
        tk.eq('... the data is kept: ListOffsets earliest still 0', (0, 0), (lo['error_code'], lo['offset']))
        f = k.fetch(c, 'err-dr-compact', 0, 0)
        tk.eq('... and the 3 records still read from offset 0', [b'1', b'2', b'3'],
              [r['value'] for r in k.records_of(f['responses'][0]['partitions'][0])])
        dr = delete_records(c, 'err-dr-both', 0, 2)
        tk.eq('DeleteRecords on cleanup.policy=compact,delete: accepted, low_watermark 2', (0, 2),
              (dr['error_code'], dr['low_watermark']))
        tk.eq('... ListOffsets earliest 2', 2, k.list_offsets(c, 'err-dr-both', 0, -2)['offset'])
    alive('delete records compact')


def transactional_without_id():
    """Issue 17 item 5: Kafka's handleProduceRequest refuses the whole request when a partition's first batch
    has the transactional bit and the request has no transactional id."""
    with k.Conn(B) as c:
        k.create_topic(c, 'err-txn', 2)
        txn = k.build_batch([(b'k', b'v')], attributes_extra=0x10, producer_id=1000, producer_epoch=0,
                            base_sequence=0)
        plain = k.build_batch([(b'k', b'plain')])
        resp = c.request('Produce', 9, {'transactional_id': None, 'acks': -1, 'timeout_ms': 10000, 'topic_data': [
            {'name': 'err-txn', 'partition_data': [{'index': 0, 'records': plain}, {'index': 1, 'records': txn}]},
            {'name': 'err-txn-missing', 'partition_data': [{'index': 0, 'records': plain}]}]})
        got = [(t['name'], p['index'], p['error_code'], p['base_offset'], p['log_start_offset'], p['error_message'],
                p['record_errors']) for t in resp['responses'] for p in t['partition_responses']]
        tk.eq('transactional batch, no transactional id: 53 on every partition of the request (also the plain '
              'batch and the unknown topic), base_offset -1, log_start_offset -1, no message, no record_errors',
              [('err-txn', 0, 53, -1, -1, None, []), ('err-txn', 1, 53, -1, -1, None, []),
               ('err-txn-missing', 0, 53, -1, -1, None, [])], got)
        tk.eq('... nothing appended to either partition', (0, 0),
              (k.high_watermark(B, 'err-txn', 0), k.high_watermark(B, 'err-txn', 1)))
    alive('transactional batch without id')


def list_offsets_duplicates():
    """Issue 17 item 7: ListOffsetsRequest.duplicatePartitions; ReplicaManager.fetchOffset keys its answers by
    TopicPartition (one entry per partition named, INVALID_REQUEST for a repeated one) and groups them by topic."""
    def ask(c, topics):
        resp = c.request('ListOffsets', 6, {'replica_id': -1, 'isolation_level': 0, 'topics': [
            {'name': n, 'partitions': [{'partition_index': p, 'timestamp': ts} for p, ts in parts]}
            for n, parts in topics]})
        return sorted((t['name'], sorted((p['partition_index'], p['error_code'], p['timestamp'], p['offset'],
                                          p['leader_epoch']) for p in t['partitions'])) for t in resp['topics'])

    with k.Conn(B) as c:
        k.create_topic(c, 'err-lodup', 2)
        for p in (0, 1):
            k.produce(c, 'err-lodup', p, k.build_batch([(b'k', b'v')]))
        got = ask(c, [('err-lodup', [(0, -1), (0, -2), (1, -1)])])
        tk.eq('ListOffsets naming partition 0 twice: one entry for it, 42 INVALID_REQUEST (timestamp, offset, '
              'epoch -1); partition 1 answered', [('err-lodup', [(0, 42, -1, -1, -1), (1, 0, -1, 1, 0)])], got)
        got = ask(c, [('err-lodup', [(0, -1)]), ('err-lodup', [(0, -1), (1, -1)])])
        tk.eq('the same partition under the topic named twice: one topic entry, partition 0 42, 1 answered',
              [('err-lodup', [(0, 42, -1, -1, -1), (1, 0, -1, 1, 0)])], got)
        got = ask(c, [('err-lodup', [(1, -1), (1, -1), (1, -2)]), ('err-lodup-missing', [(0, -1), (0, -1)])])
        tk.eq('a partition named three times, and an unknown one twice: one entry each, 42 (before 3)',
              [('err-lodup', [(1, 42, -1, -1, -1)]), ('err-lodup-missing', [(0, 42, -1, -1, -1)])], got)
        got = ask(c, [('err-lodup', [(1, -1), (0, -1)])])
        tk.eq('no repeat: answered as before', [('err-lodup', [(0, 0, -1, 1, 0), (1, 0, -1, 1, 0)])], got)
    alive('list offsets duplicates')


def diverging_epoch():
    """KIP-320 (Partition.readRecords): a Fetch v12+ whose LastFetchedEpoch ends below its fetch offset here gets
    DivergingEpoch {epoch, end offset} and no records, at once; an epoch above the leader's is
    OFFSET_OUT_OF_RANGE; -1 or a consistent epoch reads as before."""
    def part(r):
        p = r['responses'][0]['partitions'][0]
        d = p.get('diverging_epoch') or {}  # a tagged field: absent when it holds its defaults
        return (p['error_code'], d.get('epoch', -1), d.get('end_offset', -1),
                len(p['records'] or b''), p['high_watermark'])

    with k.Conn(B) as c:
        k.create_topic(c, 'err-diverge', 1)
        for i in range(3):
            k.produce(c, 'err-diverge', 0, k.build_batch([(b'k', b'v%d' % i)]))
        t0 = time.monotonic()
        got = part(k.fetch(c, 'err-diverge', 0, 5, version=12, last_fetched_epoch=0, max_wait_ms=5000))
        waited = time.monotonic() - t0
        tk.eq('fetch offset 5, last fetched epoch 0 (which ends at 3): diverging {0, 3}, no records',
              (0, 0, 3, 0, 3), got)
        tk.check('... answered at once, not after max_wait_ms 5000', waited < 2.5, f'{waited:.2f} s')
        got = part(k.fetch(c, 'err-diverge', 0, 2, version=12, last_fetched_epoch=0))
        tk.check('fetch offset 2, last fetched epoch 0: no divergence, records from 2',
                 got[:3] == (0, -1, -1) and got[3] > 0, got)
        got = part(k.fetch(c, 'err-diverge', 0, 3, version=12, last_fetched_epoch=7))
        tk.eq('last fetched epoch 7, above the leader epoch 0: 1 OFFSET_OUT_OF_RANGE', 1, got[0])
        got = part(k.fetch(c, 'err-diverge', 0, 1, version=12))
        tk.check('no last fetched epoch: records from 1', got[:3] == (0, -1, -1) and got[3] > 0, got)
    alive('diverging epoch')


def record_errors():
    """Issue 17 items 3 and 4 (KIP-467, Kafka's LogValidator and ReplicaManager): every refused record named in
    record_errors with Kafka's message, error_message as Kafka words it, the partition's log start offset."""
    key_msg = 'Compacted topic cannot accept message without key in topic partition err-rec-key-0'
    with k.Conn(B) as c:
        r = k.create_topic(c, 'err-rec-key', 1, configs={'cleanup.policy': 'compact,delete'})
        tk.eq('CreateTopics err-rec-key (compact,delete)', 0, r['error_code'])
        k.produce(c, 'err-rec-key', 0, k.build_batch([(b'a', b'0'), (b'b', b'1')]))
        tk.eq('DeleteRecords err-rec-key to 2', 0, delete_records(c, 'err-rec-key', 0, 2)['error_code'])
        pr = k.produce(c, 'err-rec-key', 0, k.build_batch([(b'a', b'1'), (None, b'2'), (b'c', b'3'), (None, b'4')]))
        tk.eq('keyless records 1 and 3 on a compacted topic: 87, record_errors [(1, msg), (3, msg)], log_start_offset 2',
              (k.INVALID_RECORD, [(1, key_msg), (3, key_msg)], 2, -1),
              (pr['error_code'], [(e['batch_index'], e['batch_index_error_message']) for e in pr['record_errors']],
               pr['log_start_offset'], pr['base_offset']))
        tk.eq('... error_message as Kafka\'s RecordValidationException words it',
              'One or more records have been rejected due to 2 record errors in total, and only showing the first '
              f"three errors at most: [RecordError(batchIndex=1, message='{key_msg}'), "
              f"RecordError(batchIndex=3, message='{key_msg}')]", pr['error_message'])
        tk.eq('... nothing appended (HWM 2)', 2, k.high_watermark(B, 'err-rec-key'))

        r = k.create_topic(c, 'err-rec-ts', 1, configs={'message.timestamp.before.max.ms': '3600000'})
        tk.eq('CreateTopics err-rec-ts (before.max.ms 1 h)', 0, r['error_code'])
        now = int(time.time() * 1000)
        h2, h3 = 2 * 3600 * 1000, 3 * 3600 * 1000
        pr = k.produce(c, 'err-rec-ts', 0, k.build_batch([(b'a', b'0'), (b'b', b'1'), (b'c', b'2'), (b'd', b'3')],
                                                          base_timestamp=now, timestamp_deltas=[0, -h2, 0, -h3]))
        tk.eq('records 1 and 3 older than before.max.ms: 32, record_errors at indexes 1 and 3, log_start_offset 0',
              (k.INVALID_TIMESTAMP, [1, 3], 0), (pr['error_code'], [e['batch_index'] for e in pr['record_errors']],
                                                 pr['log_start_offset']))
        tk.eq('... error_message as Kafka words it', 'One or more records have been rejected due to invalid timestamp',
              pr['error_message'])
        for e, off, ts in zip(pr['record_errors'], (1, 3), (now - h2, now - h3)):
            m = re.fullmatch(rf'Timestamp {ts} of message with offset {off} is out of range\. The timestamp should be '
                             r'within \[(-?\d+), (-?\d+)\]', e['batch_index_error_message'] or '')
            tk.check(f'... record {off}: Kafka\'s message, bounds [now - 1 h, now + 1 h]',
                     m is not None and abs(int(m.group(1)) - (now - 3600000)) < 60000 and
                     int(m.group(2)) - int(m.group(1)) == 2 * 3600000, e['batch_index_error_message'])
        tk.eq('... nothing appended (HWM 0)', 0, k.high_watermark(B, 'err-rec-ts'))
    alive('record errors')


def required_acks():
    with k.Conn(B) as c:
        k.create_topic(c, 'err-acks', 1)
        for acks in (2, -2, 5):
            pr = k.produce(c, 'err-acks', 0, k.build_batch([(b'k', b'v')]), acks=acks)
            tk.eq(f'acks={acks}: error 21 INVALID_REQUIRED_ACKS', k.INVALID_REQUIRED_ACKS, pr['error_code'])
    tk.eq('invalid acks appended nothing: HWM 0', 0, k.high_watermark(B, 'err-acks'))
    alive('acks')


def header_timestamp():
    """Records say now, the header says now + 10 years (issue 26 defect 6): Kafka stores the records' max."""
    ten_years = 3650 * 24 * 3600 * 1000
    with k.Conn(B) as c:
        r = k.create_topic(c, 'err-hdrts', 1, configs={'retention.ms': '3000', 'segment.ms': '1000'})
        tk.eq('header timestamp: CreateTopics err-hdrts (retention.ms 3000, segment.ms 1000)', 0, r['error_code'])
        now = int(time.time() * 1000)
        t0 = time.time()
        pr = k.produce(c, 'err-hdrts', 0, k.build_batch([(b'k', b'a'), (b'k', b'b')], base_timestamp=now,
                                                         timestamp_deltas=[0, 5], max_timestamp=now + ten_years))
        tk.eq('header now+10y, records now: accepted at offset 0', (0, 0), (pr['error_code'], pr['base_offset']))
        lo = k.list_offsets(c, 'err-hdrts', 0, -3)
        tk.eq('ListOffsets -3 (max timestamp): the record\'s own time and offset, not 10 years ahead',
              (0, now + 5, 1), (lo['error_code'], lo['timestamp'], lo['offset']))
        f = k.fetch(c, 'err-hdrts', 0, 0)
        batches = k.parse_batches(f['responses'][0]['partitions'][0]['records'])  # CRC checked
        tk.eq('stored header max timestamp is the records\' max (CRC valid)', [now + 5],
              [b['max_timestamp'] for b in batches])
        time.sleep(1.2)
        pr = k.produce(c, 'err-hdrts', 0, k.build_batch([(b'k', b'c')]))
        tk.eq('a later batch: accepted at offset 2', (0, 2), (pr['error_code'], pr['base_offset']))
        # retention.ms 3000 after the records' time (log.retention.check.interval.ms 500, run.sh)
        earliest = -1
        while time.time() - t0 < 15 and earliest < 3:
            earliest = k.list_offsets(c, 'err-hdrts', 0, -2)['offset']
            if earliest < 3:
                time.sleep(0.25)
        took = time.time() - t0
        tk.check('retention.ms deletes the header-lied batch and the one after it (log start offset 3)',
                 earliest == 3, f'log start offset {earliest} after {took:.1f} s')
        tk.check('... not before retention.ms', took >= 3.0, f'{took:.1f} s')
    alive('header timestamp')


def big_commit():
    """An OffsetCommit whose records, as one batch, exceed max.message.bytes of __consumer_offsets (1048588):
    300 entries of a 2000-byte group id (in every record key) and 2000-byte metadata, a 0.6 MB request."""
    group = 'err-big-commit-' + 'g' * 2000

    def commit(n):
        vals = {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '', 'group_instance_id': None,
                'topics': [{'name': 'err-acks', 'partitions': [
                    {'partition_index': 0, 'committed_offset': i, 'committed_leader_epoch': -1,
                     'committed_metadata': 'm' * 2000} for i in range(n)]}]}
        r = c.request('OffsetCommit', 8, vals, timeout=30)
        return sorted({p['error_code'] for t in r['topics'] for p in t['partitions']})

    with k.Conn(B) as c:
        tk.eq('OffsetCommit of 300 x 4 KB records (1.2 MB > 1048588): 28 INVALID_COMMIT_OFFSET_SIZE on each',
              [k.INVALID_COMMIT_OFFSET_SIZE], commit(300))
        r = c.request('OffsetFetch', 7, {'group_id': group, 'topics': None, 'require_stable': False})
        tk.eq('... nothing committed', 0, sum(len(t['partitions']) for t in r['topics']))
        tk.eq('OffsetCommit of 10 such entries: accepted', [0], commit(10))
    alive('big commit')


def log_flood():
    """300 frames of size -1 on 300 connections: the per-frame warning is rate limited (issue 26 defect 8)."""
    log = os.path.join(os.environ['BROKER_DIR'], 'broker.log')
    start = os.path.getsize(log)
    for _ in range(300):
        with k.Conn(B) as c:
            try:
                c.send_raw(struct.pack('>i', -1))
                c.closed_by_peer(2.0)
            except (BrokenPipeError, ConnectionResetError):
                pass
    time.sleep(0.3)
    with open(log, 'rb') as fh:
        fh.seek(start)
        text = fh.read().decode('utf-8', 'replace')
    n = sum(1 for line in text.splitlines() if 'frame size -1 outside' in line)
    tk.check('300 bad frames: at most 20 "frame size" warnings logged (10 per 10 s window)', 1 <= n <= 20,
             f'{n} lines')
    alive('log flood')


for name, fn in (('oversized frame', oversized_frame), ('frame at the limit', frame_at_limit),
                 ('short frames', short_frames), ('malformed requests', malformed),
                 ('unsupported versions', unsupported_versions), ('produce to a missing topic', missing_topic),
                 ('future-dated batch', future_timestamp), ('required acks', required_acks),
                 ('DeleteRecords on a compacted topic', delete_records_compact),
                 ('transactional batch without a transactional id', transactional_without_id),
                 ('ListOffsets naming a partition twice', list_offsets_duplicates),
                 ('Fetch with LastFetchedEpoch (KIP-320)', diverging_epoch),
                 ('record_errors of refused records', record_errors),
                 ('header max timestamp', header_timestamp), ('big offset commit', big_commit),
                 ('log flood', log_flood)):
    tk.run(name, fn)
tk.finish()
