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
"""
import os
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


def required_acks():
    with k.Conn(B) as c:
        k.create_topic(c, 'err-acks', 1)
        for acks in (2, -2, 5):
            pr = k.produce(c, 'err-acks', 0, k.build_batch([(b'k', b'v')]), acks=acks)
            tk.eq(f'acks={acks}: error 21 INVALID_REQUIRED_ACKS', k.INVALID_REQUIRED_ACKS, pr['error_code'])
    tk.eq('invalid acks appended nothing: HWM 0', 0, k.high_watermark(B, 'err-acks'))
    alive('acks')


for name, fn in (('oversized frame', oversized_frame), ('frame at the limit', frame_at_limit),
                 ('short frames', short_frames), ('malformed requests', malformed),
                 ('unsupported versions', unsupported_versions), ('produce to a missing topic', missing_topic),
                 ('future-dated batch', future_timestamp), ('required acks', required_acks)):
    tk.run(name, fn)
tk.finish()
