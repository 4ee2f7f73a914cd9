"""pitfalls/run.py: one test per known broker pitfall (issue #11), against a running broker (BROKER,
BROKER_DIR in the environment; pitfalls/run.sh starts it with num.partitions=3 for C17).

Each case is named by its id (C01..C32) and asserts the value a correct broker returns; the case texts
are summarised in pitfalls/CASES.md. Where a case shows a class of fault, the whole class is tested (every
advertised Fetch version, every Produce version, every error path of that kind). Cases whose feature is
not built are reported as expected-fail naming the feature (never as passed); when the broker starts to
advertise the feature's API, the case turns into a failure that says the test must now be switched on.
Stock tools (kcat, librdkafka 2.0.2) drive a case where one can; raw requests (kafka_raw.py) otherwise.
"""
import base64
import hashlib
import os
import random
import socket
import struct
import subprocess
import time
import uuid

import groups
import kafka_raw as k
import testkit as tk

B = tk.broker()
BROKER_DIR = os.environ.get('BROKER_DIR', '')
RANGES = k.api_version_ranges(B)
FETCH_VERSIONS = list(range(RANGES[1][0], RANGES[1][1] + 1))
PRODUCE_MAX = RANGES[0][1]
NOW = lambda: int(time.time() * 1000)  # noqa: E731
# librdkafka sends a batch uncompressed when compressing does not make it smaller: a compressible header
# on every record makes sure a kcat -z batch really is compressed.
PAD = 'pad=' + 'abcdefgh' * 64


# ---------------------------------------------------------------------------------------------------
# helpers

def kcat(args, stdin=None, timeout=30):
    """Runs kcat against the broker; returns (rc, stdout bytes, stderr text, seconds)."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(['kcat', '-b', B] + args, input=stdin, capture_output=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr.decode(errors='replace')
    except subprocess.TimeoutExpired as e:
        rc, out, err = 'timeout', e.stdout or b'', (e.stderr or b'').decode(errors='replace')
    return rc, out, err, time.monotonic() - t0


def create(name, partitions=1, configs=None):
    """Creates a topic and waits until Metadata shows a leader for every partition (Apache Kafka creates
    asynchronously; this lets the suite run against it for comparison)."""
    with k.Conn(B) as c:
        r = k.create_topic(c, name, partitions, configs)
        if r['error_code'] != 0:
            raise RuntimeError(f'CreateTopics {name}: error {r["error_code"]} {r["error_message"]}')
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            t = k.metadata(c, [name], allow_auto=False)['topics'][0]
            if t['error_code'] == 0 and len(t['partitions']) == partitions and all(
                    p['leader_id'] >= 0 and p['error_code'] == 0 for p in t['partitions']) and all(
                    k.list_offsets(c, name, p, -1)['error_code'] == 0 for p in range(partitions)):
                break
            time.sleep(0.05)
    return r['topic_id']


def produce(topic, partition, batch, version=9, acks=-1, topic_id=None):
    with k.Conn(B) as c:
        return k.produce(c, topic, partition, batch, version=version, acks=acks, topic_id=topic_id)


def hwm(topic, partition=0):
    return k.high_watermark(B, topic, partition)


def fetch_request(version, topic, tid, parts, max_wait_ms=0, min_bytes=1, max_bytes=0x7fffffff, isolation=0):
    """parts: list of (partition, offset, partition_max_bytes[, current_leader_epoch])."""
    return {'max_wait_ms': max_wait_ms, 'min_bytes': min_bytes, 'max_bytes': max_bytes, 'isolation_level': isolation,
            'session_id': 0, 'session_epoch': -1,
            'topics': [{'topic': topic, 'topic_id': tid or k.ZERO_UUID,
                        'partitions': [{'partition': q[0], 'fetch_offset': q[1], 'partition_max_bytes': q[2],
                                        'current_leader_epoch': q[3] if len(q) > 3 else -1} for q in parts]}]}


def fetch(version, topic, tid, parts, timeout=15.0, **kw):
    with k.Conn(B) as c:
        corr = c.send('Fetch', version, fetch_request(version, topic, tid, parts, **kw))
        return c.recv('Fetch', version, corr, timeout)[1]


def values_of(part):
    return [r['value'] for r in k.records_of(part)]


def feature_missing(case, api_keys, feature):
    """Expected-fail while none of `api_keys` is advertised; a failure once one is (the test must be
    switched on). Returns True when the case should be skipped."""
    present = [a for a in api_keys if a in RANGES]
    if present:
        tk.fail(f'{case}: {feature} is now advertised (API keys {present}): switch this case on')
    else:
        tk.xfail(case, feature)
    return True


def group_apis(case):
    """True when every classic group API is advertised; otherwise records `case` as expected-fail."""
    missing = [a for a in groups.GROUP_APIS if a not in RANGES]
    if missing:
        tk.xfail(case, f'consumer groups (API keys {missing} not advertised)')
        return False
    return True


def topic_config_accepted(name, key, value):
    """CreateTopics validate_only with one config: the error code (0 accepted, 40 refused)."""
    with k.Conn(B) as c:
        return k.create_topic(c, name, 1, {key: value}, validate_only=True)['error_code']


# ---------------------------------------------------------------------------------------------------
# C01 snappy framing

XERIAL_MAGIC = b'\x82SNAPPY\x00'


def xerial_snappy(data):
    """snappy-java framing: magic, int32 BE version 1, int32 BE compatible version 1, then
    [int32 BE block length][raw snappy block]..."""
    out = XERIAL_MAGIC + struct.pack('>ii', 1, 1)
    for i in range(0, max(len(data), 1), 32768):
        blk = k._snappy_raw(data[i:i + 32768])
        out += struct.pack('>i', len(blk)) + blk
    return out


def batch_with_payload(records, codec, payload_fn):
    raw = b''.join(k.encode_record(i, r[0], r[1]) for i, r in enumerate(records))
    b = k.build_batch(records, codec=k.CODEC_NONE, raw_records=raw)
    body = payload_fn(raw)
    tail = bytearray(b[21:61]) + body
    tail[0:2] = struct.pack('>h', codec)
    crc = k.crc32c(bytes(tail))
    return struct.pack('>qiibI', 0, len(tail) + 9, -1, 2, crc) + bytes(tail)


def same_batch(sent, stored):
    """A stored batch equals the sent one apart from base offset (0..8) and leader epoch (12..16)."""
    return sent[8:12] == stored[8:12] and sent[16:] == stored[16:]


def c01():
    create('c01', 1)
    recs = [(None, b'a'), (None, b'b'), (None, b'c')]
    for label, fn in (('snappy-java framed (xerial)', xerial_snappy), ('raw snappy (librdkafka)', k._snappy_raw)):
        sent = batch_with_payload(recs, k.CODEC_SNAPPY, fn)
        before = hwm('c01')
        pr = produce('c01', 0, sent)
        tk.eq(f'C01 Produce of a {label} batch accepted', 0, pr['error_code'])
        part = fetch(12, 'c01', None, [(0, before, 1 << 20)])['responses'][0]['partitions'][0]
        stored = k.parse_batches(part['records'], decode_records=False)
        tk.check(f'C01 {label} batch passed through unchanged (bytes after the base offset and leader epoch)',
                 len(stored) == 1 and same_batch(sent, part['records'][:stored[0]['size']]),
                 f'{len(stored)} batches')
    before = hwm('c01')
    rc, out, err, _ = kcat(['-P', '-t', 'c01', '-z', 'snappy', '-H', PAD, '-X', 'linger.ms=100'], b'a\nb\nc\n')
    tk.eq('C01 kcat -z snappy produce exits 0', 0, rc)
    part = fetch(12, 'c01', None, [(0, before, 1 << 20)])['responses'][0]['partitions'][0]
    tk.eq('C01 librdkafka snappy batches stored with codec 2 (passed through)', {2},
          {b['codec'] for b in k.parse_batches(part['records'], decode_records=False)})
    rc, out, err, _ = kcat(['-C', '-t', 'c01', '-o', '6', '-e', '-f', '%s\n'])
    tk.eq('C01 kcat consumes a,b,c from the snappy batch', (0, b'a\nb\nc\n'), (rc, out))
    rc, out, err, _ = kcat(['-C', '-t', 'c01', '-o', 'beginning', '-e', '-f', '%s,'])
    tk.eq('C01 kcat decodes both framings and its own batch', b'a,b,c,a,b,c,a,b,c,', out)
    topic_recompression_case('C01', 'c01-topic', 'snappy', k.CODEC_SNAPPY, check_snappy_framing)


def check_snappy_framing(batch_bytes):
    body = batch_bytes[61:]
    return body[:16] == XERIAL_MAGIC + b'\x00\x00\x00\x01\x00\x00\x00\x01'


def topic_recompression_case(case, topic, codec_name, codec, extra_check=None):
    """A topic with compression.type=<codec> fed uncompressed records: either the broker refuses the
    config (INVALID_CONFIG, recompression not built: expected-fail) or stores batches in that codec."""
    err = topic_config_accepted(topic, 'compression.type', codec_name)
    if err == k.INVALID_CONFIG:
        tk.ok(f'{case} CreateTopics compression.type={codec_name} refused with 40 (not accepted silently)')
        tk.xfail(f'{case} broker recompression into {codec_name} for a topic compression.type',
                 'broker-side recompression (topic compression.type)')
        return
    tk.eq(f'{case} CreateTopics compression.type={codec_name}: accepted or refused with 40', 0, err)
    create(topic, 1, {'compression.type': codec_name})
    produce(topic, 0, k.build_batch([(None, b'a'), (None, b'b'), (None, b'c')]))
    part = fetch(12, topic, None, [(0, 0, 1 << 20)])['responses'][0]['partitions'][0]
    batches = k.parse_batches(part['records'], decode_records=False)
    tk.check(f'{case} topic compression.type={codec_name}: stored batches use codec {codec}',
             batches and all(b['codec'] == codec for b in batches), str([b.get('codec') for b in batches]))
    if extra_check and batches:
        tk.check(f'{case} broker-written {codec_name} data has the correct framing',
                 extra_check(part['records'][:batches[0]['size']]))
    rc, out, err_text, _ = kcat(['-C', '-t', topic, '-o', 'beginning', '-e', '-f', '%s\n'])
    tk.eq(f'{case} kcat reads a,b,c from the recompressed topic', b'a\nb\nc\n', out)


# ---------------------------------------------------------------------------------------------------
# C05 Fetch field order, every version

def c05():
    tid = create('c05', 2)
    for i in range(3):
        produce('c05', 0, k.build_batch([(b'k%d' % i, b'r%d' % i)]))
    produce('c05', 1, k.build_batch([(b'k3', b's0'), (b'k4', b's1')]))
    want = {0: (3, [b'r0', b'r1', b'r2']), 1: (2, [b's0', b's1'])}
    for v in FETCH_VERSIONS:
        by_id = v >= 13
        for iso in (0, 1):
            name = f'C05 Fetch v{v} isolation {iso}'
            try:
                resp = fetch(v, 'c05', tid, [(0, 0, 1 << 20), (1, 0, 1 << 20), (9, 0, 1 << 20)], isolation=iso)
            except k.DecodeError as e:
                tk.fail(f'{name}: strict decode ends exactly at the frame length', str(e))
                continue
            tk.ok(f'{name}: strict decode ends exactly at the frame length')
            top = (resp.get('throttle_time_ms'), resp.get('error_code', 0), resp.get('session_id', 0),
                   len(resp['responses']))
            tk.eq(f'{name}: throttle 0, error 0, session id 0, one topic', (0, 0, 0, 1), top)
            t = resp['responses'][0]
            tk.eq(f'{name}: topic identified by {"id" if by_id else "name"}',
                  tid if by_id else 'c05', t['topic_id'] if by_id else t['topic'])
            got = []
            for p in t['partitions']:
                row = [p['partition_index'], p['error_code'], p['high_watermark'], p['last_stable_offset']]
                if v >= 5:
                    row.append(p['log_start_offset'])
                row.append(p['aborted_transactions'])
                if v >= 11:
                    row.append(p['preferred_read_replica'])
                row.append(values_of(p) if p['error_code'] == 0 else p['records'])
                if '_unknown_tags' in p:
                    row.append(p['_unknown_tags'])
                got.append(row)
            aborted = [] if iso == 1 else None
            exp = []
            for pi, (hw, vals) in want.items():
                row = [pi, 0, hw, hw] + ([0] if v >= 5 else []) + [aborted] + ([-1] if v >= 11 else []) + [vals]
                exp.append(row)
            # an error partition carries an empty (not null) aborted list in both isolation levels, as
            # Kafka's partition error response does
            exp.append([9, k.UNKNOWN_TOPIC_OR_PARTITION, -1, -1] + ([-1] if v >= 5 else []) + [[]] +
                       ([-1] if v >= 11 else []) + [b''])
            tk.eq(f'{name}: partitions in order: index, error, HWM, LSO, log start, aborted, preferred '
                  f'replica, records', exp, got)
            # errors found while reading the log: offsets -1 and a null aborted list (Kafka's read-error shape)
            read_errors = [('offset out of range', (0, 100, 1 << 20), k.OFFSET_OUT_OF_RANGE)]
            if v >= 9:
                read_errors.append(('leader epoch 99 ahead of the leader', (0, 0, 1 << 20, 99), 75))
            for label, q, code in read_errors:
                p = fetch(v, 'c05', tid, [q], isolation=iso)['responses'][0]['partitions'][0]
                row = [p['error_code'], p['high_watermark'], p['last_stable_offset'], p.get('log_start_offset', -1),
                       p['aborted_transactions'], p['records']]
                tk.eq(f'{name}: {label}: error {code}, HWM/LSO/log start -1, null aborted list, empty records',
                      [code, -1, -1, -1, None, b''], row)
    # The decoder is strict enough to see one field out of place: the v11 answer (which adds
    # preferred_read_replica) must not decode as v10, nor the v10 answer as v11.
    if 10 in FETCH_VERSIONS and 11 in FETCH_VERSIONS:
        for sent, wrong in ((11, 10), (10, 11)):
            with k.Conn(B) as c:
                corr = c.send('Fetch', sent, fetch_request(sent, 'c05', None, [(0, 0, 1 << 20), (1, 0, 1 << 20)]))
                data = c.recv_frame()
            try:
                k.decode_response_body('Fetch', wrong, data, 4)
                tk.fail(f'C05 decoder self-check: a Fetch v{sent} answer is rejected by the v{wrong} layout',
                        'decoded without error')
            except k.DecodeError:
                tk.ok(f'C05 decoder self-check: a Fetch v{sent} answer is rejected by the v{wrong} layout')
    rc, out, err, dt = kcat(['-C', '-t', 'c05', '-o', 'beginning', '-e', '-d', 'fetch,protocol', '-f', '%s\n'])
    tk.eq('C05 kcat -d fetch,protocol prints the 5 records', [b'r0', b'r1', b'r2', b's0', b's1'],
          sorted(out.split()))
    bad = [l for l in err.splitlines() if 'PROTOERR' in l or 'parse failure' in l.lower() or 'preferred read replica' in l.lower()]
    tk.eq('C05 kcat logs no protocol errors', [], bad[:3])


# ---------------------------------------------------------------------------------------------------
# C06 every Fetch is answered promptly

def c06():
    tid = create('c06', 1)
    produce('c06', 0, k.build_batch([(None, b'a'), (None, b'b'), (None, b'c')]))
    vmax = FETCH_VERSIONS[-1]
    for v, label in ((12, 'v12 by name'), (vmax, f'v{vmax} by id')):
        t0 = time.monotonic()
        resp = fetch(v, 'c06', tid, [(0, 0, 1 << 20)], max_wait_ms=5000)
        dt = time.monotonic() - t0
        p = resp['responses'][0]['partitions'][0]
        tk.eq(f'C06 Fetch {label} with data: 3 records, error 0', (0, [b'a', b'b', b'c']), (p['error_code'], values_of(p)))
        tk.check(f'C06 Fetch {label} with data answers at once (< 1 s with max_wait 5 s)', dt < 1.0, f'{dt:.2f}s')
    for v in sorted({13, vmax}):
        t0 = time.monotonic()
        resp = fetch(v, '', uuid.uuid4().bytes, [(0, 0, 1 << 20)], max_wait_ms=5000)
        dt = time.monotonic() - t0
        tk.eq(f'C06 Fetch v{v} unknown topic id: partition error 100', k.UNKNOWN_TOPIC_ID,
              resp['responses'][0]['partitions'][0]['error_code'])
        tk.check(f'C06 Fetch v{v} unknown topic id answered promptly (< 1 s with max_wait 5 s)', dt < 1.0, f'{dt:.2f}s')
    rc, out, err, dt = kcat(['-C', '-t', 'c06', '-p', '0', '-o', '0', '-e', '-f', '%s\n'])
    tk.eq('C06 kcat -p 0 -o 0 -e prints 3 records and exits 0', (0, b'a\nb\nc\n'), (rc, out))
    tk.check('C06 kcat reaches the end promptly (< 3 s including start-up)', dt < 3.0 and 'Reached end' in err,
             f'{dt:.2f}s')
    rc, out, err, _ = kcat(['-Q', '-t', 'c06:0:-1'])
    tk.eq('C06 kcat -Q latest offset', b'c06 [0] offset 3\n', out)


# ---------------------------------------------------------------------------------------------------
# C07 long poll

def c07():
    tid = create('c07', 1)
    vmax = FETCH_VERSIONS[-1]
    for v in (12, vmax):
        t0 = time.monotonic()
        resp = fetch(v, 'c07', tid, [(0, 0, 1 << 20)], max_wait_ms=500, min_bytes=1)
        dt = time.monotonic() - t0
        p = resp['responses'][0]['partitions'][0]
        tk.eq(f'C07 Fetch v{v} on an empty partition: error 0, empty (not null) records', (0, b''),
              (p['error_code'], p['records']))
        tk.check(f'C07 Fetch v{v} on an empty partition waits >= 0.9 x max_wait (500 ms)', dt >= 0.45, f'{dt * 1000:.0f} ms')
        tk.check(f'C07 Fetch v{v} on an empty partition answers within max_wait + 500 ms', dt < 1.0, f'{dt * 1000:.0f} ms')
    for v, wait_ms in ((12, 500), (vmax, 3000)):
        start = hwm('c07')
        with k.Conn(B) as c:
            t0 = time.monotonic()
            corr = c.send('Fetch', v, fetch_request(v, 'c07', tid, [(0, start, 1 << 20)], max_wait_ms=wait_ms))
            time.sleep(0.1)
            produce('c07', 0, k.build_batch([(None, b'landed-%d' % v)]), acks=1)
            _, resp = c.recv('Fetch', v, corr, 10)
            dt = time.monotonic() - t0
        p = resp['responses'][0]['partitions'][0]
        tk.eq(f'C07 Fetch v{v} (max_wait {wait_ms}): the record produced during the wait is returned',
              [b'landed-%d' % v], values_of(p))
        tk.check(f'C07 Fetch v{v} (max_wait {wait_ms}): answered early, < 450 ms after the request', dt < 0.45,
                 f'{dt * 1000:.0f} ms')
    rc, out, err, dt = kcat(['-C', '-t', 'c07', '-o', 'end', '-d', 'fetch'], timeout=3)
    fetches = sum(1 for l in err.splitlines() if 'Fetch 1/1/1 toppar' in l)
    tk.check('C07 kcat on an idle partition fetches about twice a second (2..10 fetches in 3 s)',
             2 <= fetches <= 10, f'{fetches} fetches in 3 s')


# ---------------------------------------------------------------------------------------------------
# C15 ListOffsets for a time after every record

def c15():
    create('c15', 1)
    produce('c15', 0, k.build_batch([(None, b'1'), (None, b'2'), (None, b'3')]))
    future = NOW() + 3600 * 1000
    for v in range(max(1, RANGES[2][0]), RANGES[2][1] + 1):
        with k.Conn(B) as c:
            p = k.list_offsets(c, 'c15', 0, future, version=v)
        got = (p['error_code'], p['timestamp'], p['offset']) + ((p['leader_epoch'],) if v >= 4 else ())
        tk.eq(f'C15 ListOffsets v{v} at now+1h: error 0, timestamp -1, offset -1' + (', leader epoch -1' if v >= 4 else ''),
              (0, -1, -1) + ((-1,) if v >= 4 else ()), got)
    rc, out, err, _ = kcat(['-Q', '-t', f'c15:0:{future}'])
    tk.eq('C15 kcat -Q at now+1h prints offset -1', b'c15 [0] offset -1\n', out)


# ---------------------------------------------------------------------------------------------------
# C16 KIP-74

def c16():
    create('c16', 2, {'max.message.bytes': '3000000'})
    big = base64.b64encode(random.Random(16).randbytes(1100000))
    rc, out, err, _ = kcat(['-P', '-t', 'c16', '-p', '0', '-X', 'message.max.bytes=4000000'], big + b'\n')
    tk.eq('C16 kcat produces one ~1.5 MB value', 0, rc)
    rc, out, err, _ = kcat(['-P', '-t', 'c16', '-p', '0'], b'small1\nsmall2\nsmall3\n')
    tk.eq('C16 kcat produces 3 small records after it', 0, rc)
    produce('c16', 1, k.build_batch([(None, b'p1-a'), (None, b'p1-b')]))
    rc, out, err, _ = kcat(['-C', '-t', 'c16', '-p', '0', '-o', 'beginning', '-e', '-X', 'fetch.message.max.bytes=1048576',
                            '-X', 'fetch.max.bytes=1048576', '-X', 'receive.message.max.bytes=5000000', '-f', '%S %s\n'])
    lines = out.split(b'\n')
    got = [(l.split(b' ', 1)[0], hashlib.sha1(l.split(b' ', 1)[1]).hexdigest()[:12]) for l in lines if l]
    exp = [(str(len(big)).encode(), hashlib.sha1(big).hexdigest()[:12])] + \
          [(b'6', hashlib.sha1(b'small%d' % i).hexdigest()[:12]) for i in (1, 2, 3)]
    tk.eq('C16 kcat with 1 MB fetch limits receives all 4 records in order', (0, exp), (rc, got))
    for v in (FETCH_VERSIONS[0], 12, FETCH_VERSIONS[-1]):
        tid = k.topic_id(B, 'c16')
        resp = fetch(v, 'c16', tid, [(0, 0, 1048576), (1, 0, 1048576)], max_bytes=1048576)
        p0, p1 = resp['responses'][0]['partitions']
        b0 = k.parse_batches(p0['records'], decode_records=True)
        tk.check(f'C16 Fetch v{v}: first partition returns its whole oversize first batch',
                 b0 and not b0[0].get('truncated') and b0[0]['size'] > 1048576 and b0[0]['records'][0]['value'] == big,
                 f'{len(p0["records"] or b"")} bytes')
        b1 = [b for b in k.parse_batches(p1['records'] or b'', decode_records=False) if not b.get('truncated')]
        tk.eq(f'C16 Fetch v{v}: the next partition obeys the exhausted max_bytes (no whole batch)', [], b1)
        resp = fetch(v, 'c16', tid, [(1, 0, 1048576), (0, 0, 1048576)], max_bytes=1048576)
        p1, p0 = resp['responses'][0]['partitions']
        tk.eq(f'C16 Fetch v{v} partition 1 first: its small records', [b'p1-a', b'p1-b'], values_of(p1))
        b0 = [b for b in k.parse_batches(p0['records'] or b'', decode_records=False) if not b.get('truncated')]
        tk.eq(f'C16 Fetch v{v} partition 1 first: the oversize batch is not forced into the rest', [], b0)


# ---------------------------------------------------------------------------------------------------
# C17 auto-creation through Metadata (the broker runs with num.partitions=3)

def md_topic(version, name, allow=True):
    with k.Conn(B) as c:
        t = [{'name': name, 'topic_id': k.ZERO_UUID}] if version >= 1 else [{'name': name}]
        resp = c.request('Metadata', version, {'topics': t, 'allow_auto_topic_creation': allow})
    return resp['topics'][0]


def c17():
    for v, name in ((9, 'c17-new'), (1, 'c17-v1')):
        first = md_topic(v, name)
        tk.eq(f'C17 Metadata v{v} first answer for {name}: error 3, no partitions', (name, 3, []),
              (first['name'], first['error_code'], first['partitions']))
        t0 = time.monotonic()
        t = first
        while time.monotonic() - t0 < 1.0:
            time.sleep(0.1)
            t = md_topic(v, name)
            if t['error_code'] == 0 and len(t['partitions']) == 3:
                break
        tk.eq(f'C17 Metadata v{v} within 1 s: {name} has 3 partitions led by node 1',
              (0, [(i, 0, 1, [1], [1]) for i in range(3)]),
              (t['error_code'], sorted((p['partition_index'], p['error_code'], p['leader_id'], p['replica_nodes'],
                                        p['isr_nodes']) for p in t['partitions'])))
    t = md_topic(4, 'c17-other', allow=False)
    tk.eq('C17 Metadata v4 allow_auto_topic_creation=false: error 3', 3, t['error_code'])
    t = md_topic(12, 'c17-other', allow=False)
    tk.eq('C17 Metadata v12 allow_auto_topic_creation=false: error 3', 3, t['error_code'])
    for v in (1, 9, 12):
        t = md_topic(v, 'a/b')
        tk.eq(f'C17 Metadata v{v} for a/b: error 17', k.INVALID_TOPIC_EXCEPTION, t['error_code'])
    names = k.topic_names(B)
    tk.check('C17 neither c17-other nor a/b was created', 'c17-other' not in names and 'a/b' not in names, str(names))
    rc, out, err, _ = kcat(['-P', '-t', 'c17-kcat'], b'hi\n')
    tk.eq('C17 kcat -P to a new topic exits 0', 0, rc)
    rc, out, err, _ = kcat(['-C', '-t', 'c17-kcat', '-o', 'beginning', '-e', '-f', '%s\n'])
    tk.eq('C17 kcat -C prints hi', (0, b'hi\n'), (rc, out))
    with k.Conn(B) as c:
        t = k.metadata(c, ['c17-kcat'], allow_auto=False)['topics'][0]
    tk.eq('C17 the auto-created topic has num.partitions=3 partitions', 3, len(t['partitions']))


# ---------------------------------------------------------------------------------------------------
# C19 response order on a pipelined connection; acks=0 gets no response

def c19():
    create('c19-empty', 1)
    create('c19-data', 1)
    with k.Conn(B) as c:
        t0 = time.monotonic()
        c.send('Fetch', 12, fetch_request(12, 'c19-empty', None, [(0, 0, 1 << 20)], max_wait_ms=500), correlation_id=101)
        c.send('Metadata', 12, {'topics': [{'name': 'c19-data', 'topic_id': k.ZERO_UUID}]}, correlation_id=102)
        c.send('ApiVersions', 3, {}, correlation_id=103)
        c.send('Produce', 9, {'transactional_id': None, 'acks': 1, 'timeout_ms': 5000, 'topic_data': [
            {'name': 'c19-data', 'partition_data': [{'index': 0, 'records': k.build_batch([(None, b'x')])}]}]},
            correlation_id=104)
        order, times = [], []
        for api, v in (('Fetch', 12), ('Metadata', 12), ('ApiVersions', 3), ('Produce', 9)):
            corr, body = c.recv(api, v, None, 10)
            order.append(corr)
            times.append(time.monotonic() - t0)
        tk.eq('C19 pipelined [Fetch(wait 500), Metadata, ApiVersions, Produce]: responses in request order',
              [101, 102, 103, 104], order)
        tk.check('C19 the parked Fetch came first, after its wait (>= 450 ms)', times[0] >= 0.45, f'{times[0]:.3f}s')
        before = hwm('c19-data')
        c.send('Produce', 9, {'transactional_id': None, 'acks': 0, 'timeout_ms': 5000, 'topic_data': [
            {'name': 'c19-data', 'partition_data': [{'index': 0, 'records': k.build_batch([(None, b'y')])}]}]},
            correlation_id=105)
        c.send('ApiVersions', 3, {}, correlation_id=106)
        corr, _ = c.recv('ApiVersions', 3, None, 10)
        tk.eq('C19 Produce acks=0 gets no response: the next response is the ApiVersions after it', 106, corr)
    deadline = time.monotonic() + 3
    while hwm('c19-data') < before + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    tk.eq('C19 the acks=0 record was appended', before + 1, hwm('c19-data'))
    with k.Conn(B) as c:
        c.send('Produce', 9, {'transactional_id': None, 'acks': 0, 'timeout_ms': 5000, 'topic_data': [
            {'name': 'c19-missing', 'partition_data': [{'index': 0, 'records': k.build_batch([(None, b'z')])}]}]},
            correlation_id=107)
        tk.check('C19 Produce acks=0 with a partition error: the broker closes the connection', c.closed_by_peer(3.0))


def c33():
    """A request read behind a parked one runs at its turn, as Kafka (one request per connection at a time):
    a Metadata behind a long-poll Fetch sees a topic created while the Fetch waited. Built at arrival, it
    told the past (issue #20: librdkafka moved a partition back to a killed leader from such an answer)."""
    create('c33-wait', 1)
    with k.Conn(B) as c:
        c.send('Fetch', 12, fetch_request(12, 'c33-wait', None, [(0, 0, 1 << 20)], max_wait_ms=1500,
                                          min_bytes=1 << 20), correlation_id=301)
        c.send('Metadata', 12, {'topics': [{'name': 'c33-new', 'topic_id': k.ZERO_UUID}],
                                'allow_auto_topic_creation': False}, correlation_id=302)
        time.sleep(0.2)  # both read by the broker: the Fetch parked, the Metadata behind it
        t0 = time.monotonic()
        create('c33-new', 2)  # another connection, while the Fetch waits
        made_s = time.monotonic() - t0
        corr, _ = c.recv('Fetch', 12, None, 10)
        tk.eq('C33 the parked Fetch is answered first', 301, corr)
        corr, md = c.recv('Metadata', 12, None, 10)
        tk.eq('C33 then the Metadata read behind it', 302, corr)
        t = md['topics'][0]
        tk.check('C33 the topic was created while the Fetch waited (within its 1.5 s)', made_s < 1.2,
                 f'{made_s:.3f}s')
        tk.eq('C33 the Metadata read behind the parked Fetch shows the topic created meanwhile: error 0',
              0, t['error_code'])
        tk.eq('C33 ... with its 2 partitions', 2, len(t['partitions']))


def c34():
    """A request held behind a parked one runs from the loop's top level, never inside the completion that
    released it: a member's LeaveGroup pipelined behind its own JoinGroup must not run while the group
    coordinator is still delivering that rebalance's joins (it freed the member the coordinator was at: a
    use-after-free that crashed librdkafka's 0019/0030 runs, found under ASan)."""
    join = {'group_id': 'c34', 'session_timeout_ms': 10000, 'rebalance_timeout_ms': 10000,
            'protocol_type': 'consumer', 'protocols': [{'name': 'range', 'metadata': b''}]}
    with k.Conn(B) as ca, k.Conn(B) as cb:
        r = ca.request('JoinGroup', 3, dict(join, member_id=''))
        tk.eq('C34 member A joins alone (generation 1)', (0, 1), (r['error_code'], r['generation_id']))
        a = r['member_id']
        r = cb.request('JoinGroup', 4, dict(join, member_id=''))
        tk.eq('C34 member B: MEMBER_ID_REQUIRED (79) with its id', 79, r['error_code'])
        b = r['member_id']
        cb.send('JoinGroup', 4, dict(join, member_id=b), correlation_id=401)  # B: parked, a rebalance
        cb.send('LeaveGroup', 0, {'group_id': 'c34', 'member_id': b}, correlation_id=402)  # held behind it
        time.sleep(0.2)
        r = ca.request('JoinGroup', 3, dict(join, member_id=a))  # A rejoins: the join phase completes
        tk.eq('C34 A rejoins: generation 2, no error', (0, 2), (r['error_code'], r['generation_id']))
        corr, rb = cb.recv('JoinGroup', 4, None, 10)
        tk.eq('C34 B\'s JoinGroup answered first, generation 2', (401, 0, 2),
              (corr, rb['error_code'], rb['generation_id']))
        corr, rl = cb.recv('LeaveGroup', 0, None, 10)
        tk.eq('C34 then B\'s LeaveGroup held behind it: no error', (402, 0), (corr, rl['error_code']))
    with k.Conn(B) as c:
        tk.eq('C34 the broker still answers', 0, k.api_versions(c)['error_code'])

# ---------------------------------------------------------------------------------------------------
# C20 empty record sets are present but empty

def c20():
    tid_d = create('c20-data', 1)
    tid_e = create('c20-empty', 1)
    produce('c20-data', 0, k.build_batch([(None, b'x'), (None, b'y')]))
    for v in FETCH_VERSIONS:
        got = []
        for topic, tid, off in (('c20-data', tid_d, 2), ('c20-empty', tid_e, 0)):
            p = fetch(v, topic, tid, [(0, off, 1 << 20)])['responses'][0]['partitions'][0]
            got.append((p['error_code'], p['records']))
        tk.eq(f'C20 Fetch v{v} at the HWM and on an empty topic: records present but empty '
              f'({"compact length 1" if v >= 12 else "length 0"}), not null', [(0, b''), (0, b'')], got)
    for topic in ('c20-data', 'c20-empty'):
        rc, out, err, dt = kcat(['-C', '-t', topic, '-o', 'end', '-e'])
        errs = [l for l in err.splitlines() if 'ERROR' in l or 'PROTOERR' in l or 'fail' in l.lower()]
        tk.check(f'C20 kcat -o end -e on {topic}: exits 0 at "Reached end", no protocol errors',
                 rc == 0 and 'Reached end' in err and not errs, f'rc {rc}: {errs[:2]}')
    if group_apis('C20 group part: a member without partitions gets an empty assignment (three kcat -G)'):
        groups.c20_group(B, RANGES, create, produce)


# ---------------------------------------------------------------------------------------------------
# C23 zstd with old Produce versions

def c23():
    tid = create('c23', 1)
    zbatch = lambda tag: k.build_batch([(None, b'zstd-' + tag)], codec=k.CODEC_ZSTD)  # noqa: E731
    for v in range(3, 7):
        before = hwm('c23')
        pr = produce('c23', 0, zbatch(b'v%d' % v), version=v)
        tk.eq(f'C23 Produce v{v} with a zstd batch: error 76 UNSUPPORTED_COMPRESSION_TYPE', k.UNSUPPORTED_COMPRESSION_TYPE,
              pr['error_code'])
        tk.eq(f'C23 Produce v{v} zstd: nothing appended', before, hwm('c23'))
    accepted = []
    for v in range(7, PRODUCE_MAX + 1):
        pr = produce('c23', 0, zbatch(b'v%d' % v), version=v, topic_id=tid if v >= 13 else None)
        tk.eq(f'C23 Produce v{v} with a zstd batch: accepted', 0, pr['error_code'])
        accepted.append(b'zstd-v%d' % v)
    p = fetch(12, 'c23', None, [(0, 0, 1 << 20)])['responses'][0]['partitions'][0]
    batches = k.parse_batches(p['records'], decode_records=False)
    tk.eq('C23 Fetch v12 returns the zstd batches as stored (codec 4)', [4] * len(accepted), [b['codec'] for b in batches])
    rc, out, err, _ = kcat(['-C', '-t', 'c23', '-o', 'beginning', '-e', '-f', '%s\n'])
    tk.eq('C23 kcat -C reads the zstd records', b''.join(a + b'\n' for a in accepted), out)
    err = topic_config_accepted('c23-z', 'compression.type', 'zstd')
    if err == k.INVALID_CONFIG:
        tk.ok('C23 CreateTopics compression.type=zstd refused with 40 (not accepted silently)')
        tk.xfail('C23 Fetch v<10 on a compression.type=zstd topic -> 76, v10+ -> records',
                 'broker-side recompression (topic compression.type=zstd)')
        return
    tk.eq('C23 CreateTopics compression.type=zstd: accepted or refused with 40', 0, err)
    ztid = create('c23-z', 1, {'compression.type': 'zstd'})
    rc, out, err_text, _ = kcat(['-P', '-t', 'c23-z', '-z', 'none'], b'a\nb\n')
    for v in FETCH_VERSIONS:
        p = fetch(v, 'c23-z', ztid, [(0, 0, 1 << 20)])['responses'][0]['partitions'][0]
        if v < 10:
            tk.eq(f'C23 Fetch v{v} on a zstd topic: error 76, no records', (76, b''), (p['error_code'], p['records']))
        else:
            tk.eq(f'C23 Fetch v{v} on a zstd topic: records', 0, p['error_code'])
    rc, out, err_text, _ = kcat(['-C', '-t', 'c23-z', '-o', 'beginning', '-e', '-f', '%s\n'])
    tk.eq('C23 kcat -C on the zstd topic', b'a\nb\n', out)


# ---------------------------------------------------------------------------------------------------
# C25 null versus empty

def c25():
    tid = create('c25', 1)
    hdrs = [('h', None), ('h', b''), ('h', b'x'), ('', b'empty-key')]
    recs = [(b'k-null-value', None, hdrs), (b'k-empty-value', b''), (None, b'null-key'), (b'', b'empty-key'),
            (None, None), (b'', b'', [('n', None)])]
    pr = produce('c25', 0, k.build_batch(recs))
    tk.eq('C25 raw produce of null/empty keys, values and headers', 0, pr['error_code'])
    exp = [(r[0], r[1], [(hk.encode(), hv) for hk, hv in (r[2] if len(r) > 2 else [])]) for r in recs]
    for v in (FETCH_VERSIONS[0], 12, FETCH_VERSIONS[-1]):
        p = fetch(v, 'c25', tid, [(0, 0, 1 << 20)])['responses'][0]['partitions'][0]
        got = [(r['key'], r['value'], r['headers']) for r in k.records_of(p)]
        tk.eq(f'C25 Fetch v{v}: keys, values and header values come back byte-exact (null stays null, '
              f'empty stays empty, header order and duplicates kept)', exp, got)
    kcat(['-P', '-t', 'c25', '-K:', '-Z'], b'k1:\n')
    kcat(['-P', '-t', 'c25', '-K:'], b'k2:\n')
    rc, out, err, _ = kcat(['-C', '-t', 'c25', '-o', '6', '-e', '-Z', '-f', '%k|%S|%s\n'])
    tk.eq('C25 kcat: k1 sent with -Z is null (-1, NULL), k2 is empty (0 bytes)', b'k1|-1|NULL\nk2|0|NULL\n', out)
    p = fetch(12, 'c25', None, [(0, 6, 1 << 20)])['responses'][0]['partitions'][0]
    tk.eq('C25 raw fetch of the kcat records: k1 value null, k2 value empty', [(b'k1', None), (b'k2', b'')],
          [(r['key'], r['value']) for r in k.records_of(p)])
    err = topic_config_accepted('c25-compact', 'cleanup.policy', 'compact')
    tk.eq('C25 CreateTopics cleanup.policy=compact accepted', 0, err)
    create('c25-compact', 1, {'cleanup.policy': 'compact', 'segment.bytes': '100', 'delete.retention.ms': '0',
                              'min.cleanable.dirty.ratio': '0.01'})
    pr = produce('c25-compact', 0, k.build_batch([(None, b'v')]))
    tk.eq('C25 compacted topic: a null key is rejected with 87', k.INVALID_RECORD, pr['error_code'])
    tk.check('C25 compacted topic: the rejection carries a message about the missing key',
             'without key' in (pr['error_message'] or ''), pr['error_message'])
    # Only null values are tombstones: an empty value survives compaction, a null value goes once its
    # delete horizon (delete.retention.ms=0) passed; one batch per produce, so every key has its own batch.
    for recs in ([(b'empty', b'old'), (b'null', b'old')], [(b'empty', b'')], [(b'null', None)]):
        tk.eq('C25 compacted topic: keyed produce accepted', 0, produce('c25-compact', 0, k.build_batch(recs))['error_code'])
    got, deadline, n = None, time.monotonic() + 40, 0
    while time.monotonic() < deadline:
        n += 1  # a new batch rolls the segment (segment.bytes=100) so the ones before become cleanable
        produce('c25-compact', 0, k.build_batch([(b'roll', str(n).encode())]))
        got, off = [], 0
        while True:  # a Fetch answers from one segment: continue after the last batch until the end
            p = fetch(12, 'c25-compact', None, [(0, off, 1 << 20)])['responses'][0]['partitions'][0]
            batches = [b for b in k.parse_batches(p['records'] or b'') if not b.get('truncated')]
            if not batches:
                break
            got += [(r['key'], r['value']) for b in batches for r in b.get('records', []) if r['key'] != b'roll']
            off = batches[-1]['base_offset'] + batches[-1]['last_offset_delta'] + 1
        if got == [(b'empty', b'')]:
            break
        time.sleep(0.5)
    tk.eq('C25 after compaction: the empty value is kept, the null value (tombstone) and older values are gone',
          [(b'empty', b'')], got)


# ---------------------------------------------------------------------------------------------------
# C26 null and empty client_id

def c26():
    create('c26', 1)
    for cid in (None, ''):
        label = 'null' if cid is None else 'empty'
        with k.Conn(B) as c:
            md = c.request('Metadata', 1, {'topics': [{'name': 'c26'}]}, client_id=cid)
            tk.eq(f'C26 Metadata v1 with a {label} client_id: normal answer', [('c26', 0, 1)],
                  [(t['name'], t['error_code'], len(t['partitions'])) for t in md['topics']])
            md = c.request('Metadata', 12, {'topics': None}, client_id=cid)
            tk.check(f'C26 Metadata v12 (header v2) with a {label} client_id: normal answer',
                     'c26' in [t['name'] for t in md['topics']])
            resp = c.request('Produce', 3, {'transactional_id': None, 'acks': -1, 'timeout_ms': 5000, 'topic_data': [
                {'name': 'c26', 'partition_data': [{'index': 0, 'records': k.build_batch([(None, b'x')])}]}]},
                client_id=cid)
            tk.eq(f'C26 Produce v3 with a {label} client_id: error 0', 0,
                  resp['responses'][0]['partition_responses'][0]['error_code'])
            resp = c.request('ApiVersions', 3, {}, client_id=cid)
            tk.eq(f'C26 ApiVersions v3 with a {label} client_id, same connection still open', 0, resp['error_code'])
    tk.eq('C26 both produces appended', 2, hwm('c26'))
    rc, out, err, _ = kcat(['-L', '-X', 'client.id='])
    tk.check('C26 kcat -L -X client.id= lists the broker', rc == 0 and b'broker 1 at' in out, f'rc {rc}')


# ---------------------------------------------------------------------------------------------------
# C27 record batch validation

def c27():
    tid = create('c27', 1)
    for v in (3, 9, PRODUCE_MAX):
        base = hwm('c27')
        ok = k.build_batch([(None, b'valid-%d' % v)])
        pr = produce('c27', 0, ok, version=v, topic_id=tid)
        tk.eq(f'C27 (a) Produce v{v} valid batch: error 0 at the HWM', (0, base), (pr['error_code'], pr['base_offset']))
        base += 1
        # Kafka 4.4 answers these errors, met while validating the batch, with a null error_message (only
        # record validation refusals, KIP-467, carry one); the differential suite compares it.
        cases = [
            ('(b) one CRC byte flipped', k.flip_crc_byte(k.build_batch([(None, b'crc')])), k.CORRUPT_MESSAGE),
            ('(c) record_count 3, lastOffsetDelta 1', k.build_batch([(None, b'1'), (None, b'2'), (None, b'3')],
                                                                     last_offset_delta=1), k.INVALID_RECORD),
            ('(d) two record batches for one partition', k.build_batch([(None, b'd1')]) + k.build_batch([(None, b'd2')]),
             k.INVALID_RECORD),
            ('(e) a magic-1 message set', k.build_message_set_v1(None, b'old'), k.INVALID_RECORD),
        ]
        for label, batch, code in cases:
            pr = produce('c27', 0, batch, version=v, topic_id=tid)
            tk.eq(f'C27 {label}, Produce v{v}: error {code}', code, pr['error_code'])
            if v >= 8:
                tk.eq(f'C27 {label}, Produce v{v}: null error_message (as Kafka 4.4)', None, pr['error_message'])
            tk.eq(f'C27 {label}, Produce v{v}: HWM unchanged', base, hwm('c27'))


# ---------------------------------------------------------------------------------------------------
# C30 max.message.bytes on the whole batch

def batch_of_size(total, tag=b''):
    size = total - 80
    for _ in range(6):
        b = k.build_batch([(None, tag + b'x' * (size - len(tag)))])
        if len(b) == total:
            return b
        size += total - len(b)
    raise RuntimeError(f'could not build a batch of {total} bytes')


def c30():
    create('c30', 2, {'max.message.bytes': '32768'})
    rnd = random.Random(30)
    lines = [base64.b64encode(rnd.randbytes(3800)) for _ in range(10)]
    base = hwm('c30')
    rc, out, err, _ = kcat(['-P', '-t', 'c30', '-p', '0', '-X', 'message.max.bytes=10000000', '-X', 'linger.ms=200'],
                           b'\n'.join(lines) + b'\n')
    failed = err.count('Message size too large')
    tk.check('C30 (a) ten ~5 KB records in one ~50 KB batch: every one fails with MESSAGE_TOO_LARGE',
             rc != 0 and failed == 10, f'rc {rc}, {failed} failures: {err.strip()[:200]}')
    tk.eq('C30 (a) nothing appended', base, hwm('c30'))
    rc, out, err, _ = kcat(['-P', '-t', 'c30', '-p', '0', '-X', 'message.max.bytes=10000000'],
                           base64.b64encode(rnd.randbytes(30000)) + b'\n')
    tk.check('C30 (b) one 40 KB record fails with MESSAGE_TOO_LARGE', rc != 0 and 'Message size too large' in err,
             f'rc {rc}: {err.strip()[:200]}')
    tk.eq('C30 (b) nothing appended', base, hwm('c30'))
    rc, out, err, _ = kcat(['-P', '-t', 'c30', '-p', '0', '-X', 'message.max.bytes=10000000', '-X', 'batch.num.messages=1'],
                           b'\n'.join(lines) + b'\n')
    tk.eq('C30 (c) the same ten records one per batch: all delivered', (0, base + 10), (rc, hwm('c30')))
    rc, out, err, _ = kcat(['-C', '-t', 'c30', '-p', '0', '-o', 'beginning', '-e', '-f', '%s\n'])
    tk.eq('C30 (c) consumed back exactly', b'\n'.join(lines) + b'\n', out)
    for total, code in ((32768, 0), (32769, k.MESSAGE_TOO_LARGE)):
        before = hwm('c30')
        pr = produce('c30', 0, batch_of_size(total))
        tk.eq(f'C30 raw batch of exactly {total} bytes (61-byte header included): error {code}', code, pr['error_code'])
        tk.eq(f'C30 raw batch of {total} bytes: HWM moved by {1 if code == 0 else 0}', before + (1 if code == 0 else 0),
              hwm('c30'))
    b0, b1 = hwm('c30', 0), hwm('c30', 1)
    with k.Conn(B) as c:
        resp = c.request('Produce', 9, {'transactional_id': None, 'acks': -1, 'timeout_ms': 5000, 'topic_data': [
            {'name': 'c30', 'partition_data': [{'index': 0, 'records': batch_of_size(40000)},
                                               {'index': 1, 'records': k.build_batch([(None, b'small')])}]}]})
    errs = sorted((p['index'], p['error_code']) for p in resp['responses'][0]['partition_responses'])
    tk.eq('C30 one Produce, partition 0 oversize and partition 1 small: 10 and 0', [(0, 10), (1, 0)], errs)
    tk.eq('C30 only partition 1 appended', (b0, b1 + 1), (hwm('c30', 0), hwm('c30', 1)))
    if 32 in RANGES:
        v = min(RANGES[32][1], 4)
        with k.Conn(B) as c:
            resp = c.request('DescribeConfigs', v, {'resources': [
                {'resource_type': 2, 'resource_name': 'c30', 'configuration_keys': ['max.message.bytes']}]})
        r = resp['results'][0]
        tk.eq(f'C30 DescribeConfigs v{v} on c30: max.message.bytes=32768', (0, [('max.message.bytes', '32768')]),
              (r['error_code'], [(c['name'], c['value']) for c in r['configs']]))
    else:
        tk.xfail('C30 DescribeConfigs reports max.message.bytes=32768', 'DescribeConfigs (admin APIs)')


# ---------------------------------------------------------------------------------------------------
# C31 topic names

def c31():
    cases = [('a/b', 17), ('', 17), ('.', 17), ('..', 17), ('x' * 249, 0), ('x' * 250, 17), ('with space', 17),
             ('a.b', 0), ('a_b', 17)]
    with k.Conn(B) as c:
        for name, code in cases:
            r = c.request('CreateTopics', 5, {'topics': [{'name': name, 'num_partitions': 1, 'replication_factor': 1}],
                                              'timeout_ms': 10000})['topics'][0]
            label = name if len(name) < 20 else f'x*{len(name)}'
            tk.eq(f'C31 CreateTopics v5 {label!r}: error {code}', code, r['error_code'])
            if code:
                tk.check(f'C31 CreateTopics v5 {label!r}: error message set', r['error_message'] is not None)
    names = k.topic_names(B)
    tk.check('C31 x*249 and a.b exist', 'x' * 249 in names and 'a.b' in names)
    bad = [n for n, code in cases if code and n in names]
    tk.eq('C31 no refused name was created (a_b collides with a.b)', [], bad)
    rc, out, err, dt = kcat(['-P', '-t', 'a/b'], b'hi\n', timeout=20)
    tk.check('C31 kcat -P -t a/b reports an invalid-topic error instead of hanging',
             rc not in (0, 'timeout') and 'Invalid topic' in err and dt < 15, f'rc {rc} in {dt:.1f}s: {err.strip()[:120]}')


# ---------------------------------------------------------------------------------------------------
# C32 LZ4 frames

def lz4_header_ok(body):
    if body[:4] != b'\x04\x22\x4d\x18':
        return False, 'magic'
    flg = body[4]
    n = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    desc = body[4:4 + n]
    return body[4 + n] == (k.xxh32(desc) >> 8) & 0xff, f'FLG {flg:#x} HC {body[4 + n]:#x}'


def c32():
    tid = create('c32', 1)
    rc, out, err, _ = kcat(['-P', '-t', 'c32', '-z', 'lz4', '-H', PAD, '-X', 'linger.ms=100'], b'a\nb\nc\n')
    tk.eq('C32 kcat -z lz4 produce exits 0', 0, rc)
    p = fetch(12, 'c32', tid, [(0, 0, 1 << 20)])['responses'][0]['partitions'][0]
    batches = k.parse_batches(p['records'], decode_records=False)
    tk.eq('C32 librdkafka lz4 batches stored with codec 3', {3}, {b['codec'] for b in batches})
    checks = [lz4_header_ok(p['records'][b['pos'] + 61:b['pos'] + b['size']]) for b in batches]
    tk.check('C32 stored LZ4 frames passed through with a spec header checksum (over the descriptor)',
             checks and all(good for good, _ in checks), str(checks))
    rc, out, err, _ = kcat(['-C', '-t', 'c32', '-o', 'beginning', '-e', '-f', '%s\n'])
    tk.eq('C32 kcat consumes a,b,c', b'a\nb\nc\n', out)
    recs = [(None, b'a'), (None, b'b'), (None, b'c')]
    for cc, bc in ((True, True), (True, False), (False, True)):
        label = f'content checksum {"on" if cc else "off"}, block checksum {"on" if bc else "off"}'
        sent = batch_with_payload(recs, k.CODEC_LZ4, lambda raw: k._lz4_frame(raw, cc, bc))
        before = hwm('c32')
        pr = produce('c32', 0, sent)
        tk.eq(f'C32 LZ4 frame with {label}: accepted', 0, pr['error_code'])
        p = fetch(12, 'c32', tid, [(0, before, 1 << 20)])['responses'][0]['partitions'][0]
        tk.check(f'C32 LZ4 frame with {label}: fetched back unchanged', same_batch(sent, p['records'][:len(sent)]))
    rc, out, err, _ = kcat(['-C', '-t', 'c32', '-o', 'beginning', '-e', '-f', '%s'])
    tk.eq('C32 kcat decodes every LZ4 frame variant', b'abc' * 4, out)
    topic_recompression_case('C32', 'c32-topic', 'lz4', k.CODEC_LZ4,
                             lambda b: lz4_header_ok(b[61:])[0])


# ---------------------------------------------------------------------------------------------------
# C12 aborted data: read_uncommitted returns it with a null aborted list, read_committed lists it

def txn_retry(c, api, version, values, timeout=30.0):
    """A transaction API request, retried while its answer is retriable (COORDINATOR_NOT_AVAILABLE,
    COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS); bounded."""
    deadline = time.monotonic() + timeout
    while True:
        r = c.request(api, version, values)
        if r['error_code'] not in (14, 15, 16, 51) or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def c12():
    """A raw transaction: an aborted one of two records at offsets 0-1 (ABORT marker at 2), then a committed
    one of one record at 3 (COMMIT marker at 4). Every Fetch version, both isolation levels, from offset 0:
    the same five offsets come back (Kafka filters nothing on the broker); read_uncommitted has a null
    aborted list, read_committed lists exactly the aborted transaction (its producer id, first offset 0).
    From offset 3 read_committed lists nothing (the aborted range ends before it). kcat (librdkafka)
    hides the aborted records only under read_committed."""
    tid = create('c12', 1)
    tx = 'c12-tx'
    with k.Conn(B) as c:
        r = txn_retry(c, 'FindCoordinator', 3, {'key': tx, 'key_type': 1})
        tk.eq('C12 FindCoordinator key type 1 names a coordinator', 0, r['error_code'])
        r = txn_retry(c, 'InitProducerId', 4, {'transactional_id': tx, 'transaction_timeout_ms': 60000})
        tk.eq('C12 InitProducerId with a transactional id', 0, r['error_code'])
        pid, ep = r['producer_id'], r['producer_epoch']
        seq = 0
        for values, commit in (([b'a1', b'a2'], False), ([b'c1'], True)):
            deadline = time.monotonic() + 10
            while True:  # CONCURRENT_TRANSACTIONS (51) while the previous transaction completes: retried
                r = c.request('AddPartitionsToTxn', 3, {
                    'v3_and_below_transactional_id': tx, 'v3_and_below_producer_id': pid,
                    'v3_and_below_producer_epoch': ep, 'v3_and_below_topics': [{'name': 'c12', 'partitions': [0]}]})
                err = r['results_by_topic_v3_and_below'][0]['results_by_partition'][0]['partition_error_code']
                if err != 51 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            tk.eq(f'C12 AddPartitionsToTxn ({"commit" if commit else "abort"} round)', 0, err)
            b = k.build_batch([(None, v) for v in values], attributes_extra=0x10, producer_id=pid,
                              producer_epoch=ep, base_sequence=seq)
            seq += len(values)
            pr = k.produce(c, 'c12', 0, b, transactional_id=tx)
            tk.eq(f'C12 transactional Produce ({"commit" if commit else "abort"} round)', 0, pr['error_code'])
            r = txn_retry(c, 'EndTxn', 3, {'transactional_id': tx, 'producer_id': pid, 'producer_epoch': ep,
                                           'committed': commit})
            tk.eq(f'C12 EndTxn {"commit" if commit else "abort"}', 0, r['error_code'])
        deadline = time.monotonic() + 10
        while True:  # the markers are written after EndTxn's answer: the LSO reaches the HW then
            p = fetch(12, 'c12', tid, [(0, 0, 1 << 20)], isolation=1)['responses'][0]['partitions'][0]
            if p['last_stable_offset'] == 5 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    for v in FETCH_VERSIONS:
        for iso in (0, 1):
            p = fetch(v, 'c12', tid, [(0, 0, 1 << 20)], isolation=iso)['responses'][0]['partitions'][0]
            parsed = k.parse_batches(p['records'] or b'')
            batches = [(b['base_offset'], b['attributes'] & 0x30) for b in parsed]
            data = [r['value'] for b in parsed if not b['attributes'] & 0x20 for r in b.get('records', [])]
            got = [p['error_code'], p['high_watermark'], p['last_stable_offset'], p['aborted_transactions'], data,
                   batches]
            aborted = None if iso == 0 else [{'producer_id': pid, 'first_offset': 0}]
            exp = [0, 5, 5, aborted, [b'a1', b'a2', b'c1'], [(0, 0x10), (2, 0x30), (3, 0x10), (4, 0x30)]]
            tk.eq(f'C12 Fetch v{v} isolation {iso} from 0: error, HW, LSO, aborted list, data records, '
                  f'batches (offset, transactional/control bits)', exp, got)
            p = fetch(v, 'c12', tid, [(0, 3, 1 << 20)], isolation=iso)['responses'][0]['partitions'][0]
            tk.eq(f'C12 Fetch v{v} isolation {iso} from 3: aborted list {"null" if iso == 0 else "empty"}',
                  None if iso == 0 else [], p['aborted_transactions'])
    for iso, want in (('read_uncommitted', [b'a1', b'a2', b'c1']), ('read_committed', [b'c1'])):
        rc, out, err, _ = kcat(['-C', '-t', 'c12', '-o', 'beginning', '-e', '-X', f'isolation.level={iso}',
                                '-f', '%s\n'])
        tk.eq(f'C12 kcat {iso} reads {b" ".join(want).decode()}', want, out.split())


# ---------------------------------------------------------------------------------------------------
# Cases waiting for features

def waiting():
    # C03, C04 and C29 need a SASL_PLAINTEXT listener: they run in compat-tests/sasl (sasl_checks.py); this
    # PLAINTEXT broker advertises both APIs, as Kafka's does on every listener
    tk.eq('C03/C04/C29 SaslHandshake v0-1 and SaslAuthenticate v0-2 advertised (the cases: compat-tests/sasl)',
          [(0, 1), (0, 2)], [RANGES.get(17), RANGES.get(36)])


def c08():
    if group_apis('C08 KIP-394 MEMBER_ID_REQUIRED on JoinGroup v4+'):
        groups.c08(B, RANGES)


def c10():
    if group_apis('C10 JoinGroup v0 rebalance timeout = session timeout'):
        groups.c10(B, RANGES)


def c28():
    if group_apis('C28 OffsetCommit fencing around rebalances'):
        groups.c28(B, RANGES, create)


CASES = [('C01', c01), ('C05', c05), ('C06', c06), ('C07', c07), ('C15', c15), ('C16', c16), ('C17', c17),
         ('C19', c19), ('C20', c20), ('C23', c23), ('C25', c25), ('C26', c26), ('C27', c27), ('C30', c30),
         ('C31', c31), ('C32', c32), ('C33', c33), ('C34', c34), ('C12', c12), ('C08', c08), ('C10', c10), ('C28', c28), ('waiting', waiting)]

only = os.environ.get('PITFALLS_ONLY')
for cid, fn in CASES:
    if only and cid not in only.split(','):
        continue
    tk.run(cid, fn)
tk.finish()
