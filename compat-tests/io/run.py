"""io/run.py: the network thread and the disk (see io/run.sh). Argument: `cold` or `parked`.

cold: topic `cold` gets 4 MiB in 64 batches (acks=-1, so the pages are clean), its segment is evicted from
  the page cache (posix_fadvise DONTNEED) and fetched whole. The broker runs with io/slowread.c, which makes
  each >= 64 KiB pread of a .log file sleep 1.5 s: the I/O pool's read-in takes >= 1.5 s while the network
  thread goes on answering. Asserts: the range really was evicted (cachestat, when the kernel has it); the
  cold fetch is answered after >= 1.4 s with exactly the produced bytes; ApiVersions, Metadata and a
  produce on other connections are answered in < 0.5 s each while it waits; the range is resident
  afterwards and a second fetch of it is answered in < 0.5 s.
capped_setup / capped_check: the fd cap and the network thread (io/run.sh stage 3). Setup writes topic
  `many` (24 partitions, 16 KiB segments, 10 batches of 4 x 1 KiB records each, known timestamps) and topic
  `ret` (old-timestamped sealed segments, retention.ms 10 min, one recent batch). The broker is restarted
  clean with gregor.open.files.max=8, the .index of many-0's first segment deleted, the network-thread
  audit writing to a file, and segment opens slowed (io/slowread.c) once a flag file exists. Check: every
  segment file is evicted from the page cache; a Fetch and a ListOffsets that need a closed file reopened
  (slow) do not hold up ApiVersions/Metadata on another connection; then every partition reads back whole
  (Fetch from 0), ListOffsets by timestamp / -3 / -2 / -1 and OffsetForLeaderEpoch answer the expected
  offsets, a Produce to every (idle, closed) partition lands at the log end and reads back, retention
  deletes `ret`'s old segments (log start offset moves) -- and the audit file stays empty.
parked: 1,000 connections park a long-poll Fetch (max_wait 30 s) on 10 partitions of topic `idle`; 300
  acks=-1 produces to topic `busy` are answered promptly; one record appended to idle partition 3 answers
  the 100 fetches parked there (with that record) and none of the others.
"""
import ctypes
import os
import select
import sys
import time

import kafka_raw as k
import testkit as tk

B = tk.broker()
DATA = os.path.join(os.environ['BROKER_DIR'], 'data')


def cached_pages(path):
    """Pages of `path` in the page cache (cachestat, Linux 6.5+), or None when unavailable."""
    class Range(ctypes.Structure):
        _fields_ = [('off', ctypes.c_uint64), ('len', ctypes.c_uint64)]

    class Stat(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in ('cache', 'dirty', 'wb', 'evicted', 'recent')]
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        r, st = Range(0, os.fstat(fd).st_size), Stat()
        if libc.syscall(451, fd, ctypes.byref(r), ctypes.byref(st), 0) != 0:
            return None
        return st.cache
    finally:
        os.close(fd)


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def cold():
    with k.Conn(B) as c:
        tk.eq('create topic cold', 0, k.create_topic(c, 'cold', 1)['error_code'])
        tk.eq('create topic other', 0, k.create_topic(c, 'other', 1)['error_code'])
        values = []
        for i in range(64):
            v = (b'%06d' % i) * (65000 // 6)
            values.append(v)
            p = k.produce(c, 'cold', 0, k.build_batch([(b'k%d' % i, v)]), acks=-1)
            if p['error_code']:
                tk.fail('produce 64 batches of 64 KiB', f'error {p["error_code"]} at batch {i}')
                return
        tk.ok('produce 64 batches of 64 KiB (acks=-1: durable, clean pages)')
    seg = os.path.join(DATA, 'cold-0', '00000000000000000000.log')
    evict(seg)
    left = cached_pages(seg)
    if left is None:
        tk.ok('eviction not measurable here (no cachestat); the test goes on')
    else:
        tk.check(f'segment evicted from the page cache ({left} pages left)', left <= 2, f'{left} pages cached')

    fetcher = k.Conn(B, timeout=30.0)
    values_fetch = {'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 64 << 20, 'isolation_level': 0,
                    'session_id': 0, 'session_epoch': -1,
                    'topics': [{'topic': 'cold', 'topic_id': k.ZERO_UUID,
                                'partitions': [{'partition': 0, 'fetch_offset': 0,
                                                'partition_max_bytes': 64 << 20}]}]}
    t0 = time.monotonic()
    corr = fetcher.send('Fetch', 12, values_fetch)
    # Other connections while the fetch waits for the (slow) read-in.
    time.sleep(0.1)
    with k.Conn(B) as o:
        for name, fn in (('ApiVersions', lambda: k.api_versions(o)),
                         ('Metadata', lambda: k.metadata(o, ['cold'])),
                         ('Produce acks=1', lambda: k.produce(o, 'other', 0, k.build_batch([(b'x', b'y')]), acks=1))):
            resp, dt = timed(fn)
            tk.check(f'{name} on another connection answered while the cold fetch waits ({dt * 1000:.0f} ms)',
                     dt < 0.5, f'took {dt:.2f}s')
    waited_other = time.monotonic() - t0
    _, resp = fetcher.recv('Fetch', 12, corr, 30.0)
    dt = time.monotonic() - t0
    fetcher.close()
    tk.check(f'the cold fetch was answered after the pool read the range in ({dt:.2f}s >= 1.4s)', dt >= 1.4,
             f'answered after {dt:.2f}s: the slow read-in did not happen before the send')
    tk.check('the other connections were served before the cold fetch was answered', waited_other < dt,
             f'{waited_other:.2f}s vs {dt:.2f}s')
    part = resp['responses'][0]['partitions'][0]
    tk.eq('cold fetch: error code', 0, part['error_code'])
    batches = k.parse_batches(part['records'] or b'', decode_records=True, check_crc=False)
    got = [r['value'] for b in batches for r in b.get('records', [])]
    tk.check('cold fetch: the 64 values, in order, byte for byte', got == values,
             f'{len(got)} values, first difference at {next((i for i, (a, b) in enumerate(zip(got, values)) if a != b), None)}')
    now = cached_pages(seg)
    if now is not None:
        tk.check(f'segment resident after the fetch ({now} pages)', now >= 64 * 65000 // 4096, f'{now} pages')
    with k.Conn(B) as c2:
        resp2, dt2 = timed(lambda: c2.request('Fetch', 12, values_fetch, timeout=30.0))
    tk.check(f'a second fetch of the same range is answered from the page cache ({dt2 * 1000:.0f} ms)', dt2 < 0.5,
             f'took {dt2:.2f}s')
    tk.eq('second fetch: same bytes', part['records'], resp2['responses'][0]['partitions'][0]['records'])


def parked():
    with k.Conn(B) as c:
        tk.eq('create topic idle (10 partitions)', 0, k.create_topic(c, 'idle', 10)['error_code'])
        tk.eq('create topic busy', 0, k.create_topic(c, 'busy', 1)['error_code'])
    conns = []
    for i in range(1000):
        conn = k.Conn(B, timeout=30.0)
        values = {'max_wait_ms': 30000, 'min_bytes': 1, 'max_bytes': 1 << 20, 'isolation_level': 0,
                  'session_id': 0, 'session_epoch': -1,
                  'topics': [{'topic': 'idle', 'topic_id': k.ZERO_UUID,
                              'partitions': [{'partition': i % 10, 'fetch_offset': 0,
                                              'partition_max_bytes': 1 << 20}]}]}
        conns.append((conn, conn.send('Fetch', 12, values), i % 10))
    time.sleep(0.5)
    ready = select.select([c.sock for c, _, _ in conns], [], [], 0)[0]
    tk.eq('1,000 long-poll fetches parked (none answered early)', 0, len(ready))
    with k.Conn(B) as c:
        t0 = time.monotonic()
        errors = 0
        for i in range(300):
            p = k.produce(c, 'busy', 0, k.build_batch([(b'k', b'v%d' % i)]), acks=-1)
            errors += p['error_code'] != 0
        dt = time.monotonic() - t0
        tk.eq('300 acks=-1 produces to busy: errors', 0, errors)
        tk.check(f'300 acks=-1 produces with 1,000 fetches parked elsewhere: {dt:.2f}s', dt < 30, f'{dt:.2f}s')
        ready = select.select([c.sock for c, _, _ in conns], [], [], 0)[0]
        tk.eq('appends to busy answered none of the fetches parked on idle', 0, len(ready))
        p = k.produce(c, 'idle', 3, k.build_batch([(b'wake', b'three')]), acks=-1)
        tk.eq('append to idle-3', 0, p['error_code'])
    on3 = [(c, corr) for c, corr, part in conns if part == 3]
    others = [c for c, _, part in conns if part != 3]
    good = 0
    for c, corr in on3:
        _, resp = c.recv('Fetch', 12, corr, 10.0)
        recs = k.records_of(resp['responses'][0]['partitions'][0])
        good += len(recs) == 1 and recs[0]['value'] == b'three'
    tk.eq('the 100 fetches parked on idle-3 answered with the new record', 100, good)
    time.sleep(0.3)
    ready = select.select([c.sock for c in others], [], [], 0)[0]
    tk.eq('the 900 fetches parked on other idle partitions still parked', 0, len(ready))
    for c, _, _ in conns:
        c.close()


PARTS = 24
BATCHES = 10
PER = 4
T0_FILE = os.path.join(os.environ['BROKER_DIR'], 'capped-t0')


def t0():
    """The base timestamp of capped_setup (two hours before it ran), kept for capped_check."""
    if not os.path.exists(T0_FILE):
        with open(T0_FILE, 'w') as f:
            f.write(str(int(time.time() * 1000) - 7200_000))
    with open(T0_FILE) as f:
        return int(f.read())


def ts_of(p, i, j):
    """Timestamp of record j of batch i of partition p (strictly increasing per partition)."""
    return t0() + p * 100_000 + i * 1000 + j * 10


def value_of(p, i, j):
    return (b'%02d-%03d-%d:' % (p, i, j)) * 100


def capped_setup():
    with k.Conn(B) as c:
        tk.eq('create topic many (24 partitions, 16 KiB segments)', 0,
              k.create_topic(c, 'many', PARTS, {'segment.bytes': '16384', 'retention.ms': '-1'})['error_code'])
        tk.eq('create topic gone', 0,
              k.create_topic(c, 'gone', 1, {'segment.bytes': '16384', 'retention.ms': '600000'})['error_code'])
        tk.eq('create topic ret', 0,
              k.create_topic(c, 'ret', 1, {'segment.bytes': '16384', 'retention.ms': '600000'})['error_code'])
        errors = 0
        for p in range(PARTS):
            for i in range(BATCHES):
                recs = [(b'k%d' % j, value_of(p, i, j)) for j in range(PER)]
                r = k.produce(c, 'many', p, k.build_batch(recs, base_timestamp=ts_of(p, i, 0),
                                                         timestamp_deltas=[j * 10 for j in range(PER)]))
                errors += r['error_code'] != 0
        tk.eq('240 batches to many: errors', 0, errors)
        old = int(time.time() * 1000) - 3600_000
        for i in range(40):
            r = k.produce(c, 'ret', 0, k.build_batch([(b'r', b'x' * 1500)], base_timestamp=old + i))
            errors += r['error_code'] != 0
        r = k.produce(c, 'ret', 0, k.build_batch([(b'r', b'new')]))
        tk.eq('41 batches to ret: errors', 0, errors + r['error_code'])
        for i in range(30):  # all old: retention rolls the active segment too
            errors += k.produce(c, 'gone', 0, k.build_batch([(b'g', b'x' * 1500)], base_timestamp=old + i))['error_code']
        tk.eq('30 old batches to gone: errors', 0, errors)
        for p in range(PARTS):
            tk.eq(f'many-{p} log end offset', BATCHES * PER, k.list_offsets(c, 'many', p, -1)['offset']) if p < 2 else None
    segs = [f for f in os.listdir(os.path.join(DATA, 'many-0')) if f.endswith('.log')]
    tk.check(f'many-0 has sealed segments ({len(segs)} .log files)', len(segs) >= 3, f'{len(segs)}')


def olfe(c, p, epoch):
    resp = c.request('OffsetForLeaderEpoch', 4, {
        'replica_id': -1, 'topics': [{'topic': 'many', 'partitions': [
            {'partition': p, 'current_leader_epoch': -1, 'leader_epoch': epoch}]}]})
    return resp['topics'][0]['partitions'][0]


def fetch_all(c, p, start=0):
    """Values of partition p from `start` to its end, and the leader epochs of the batches."""
    got, epochs, off = [], [], start
    for _ in range(200):
        resp = k.fetch(c, 'many', p, off, max_bytes=1 << 20, partition_max_bytes=1 << 20)
        part = resp['responses'][0]['partitions'][0]
        if part['error_code']:
            raise RuntimeError(f'fetch many-{p} at {off}: error {part["error_code"]}')
        batches = k.parse_batches(part['records'] or b'', decode_records=True)
        if not batches:
            break
        for b in batches:
            epochs.append(b['leader_epoch'])
            for r in b['records']:
                if r['offset'] >= off:
                    got.append(r['value'])
            off = b['base_offset'] + b['last_offset_delta'] + 1
        if off >= part['high_watermark']:
            break
    return got, epochs


def pipelined_produce_to_closed_partition():
    """Three Produce requests pipelined on one connection to many-1, whose active file the cap closed, with
    segment opens slowed: they wait for the pool's reopen and land in order; a Produce to an open partition
    on another connection is answered meanwhile."""
    flag = os.environ['SLOW_OPEN_FLAG']
    open(flag, 'w').close()
    try:
        a = k.Conn(B, timeout=30.0)
        t0 = time.monotonic()
        corrs = [a.send('Produce', 9, {'transactional_id': None, 'acks': 1, 'timeout_ms': 10000, 'topic_data': [
            {'name': 'many', 'topic_id': k.ZERO_UUID, 'partition_data': [
                {'index': 1, 'records': k.build_batch([(b'p', b'pipelined-%d' % i)])}]}]}) for i in range(3)]
        time.sleep(0.05)
        with k.Conn(B) as o:
            r, dt = timed(lambda: k.produce(o, 'many', 23, k.build_batch([(b'o', b'other')]), acks=1))
        tk.check(f'a Produce to an open partition is answered while Produces wait for a slow reopen ({dt * 1000:.0f} ms)',
                 r['error_code'] == 0 and dt < 0.3, f'{r["error_code"]}, {dt:.2f}s')
        offs = []
        for corr in corrs:
            resp = a.recv('Produce', 9, corr, 30.0)[1]
            pr = resp['responses'][0]['partition_responses'][0]
            offs.append((pr['error_code'], pr['base_offset']))
        dt = time.monotonic() - t0
        a.close()
        base = BATCHES * PER
        tk.eq('3 pipelined Produces to a closed partition land in order', [(0, base), (0, base + 1), (0, base + 2)], offs)
        tk.check(f'they were answered after the slow reopen ({dt:.2f}s >= 0.35s)', dt >= 0.35, f'{dt:.2f}s')
    finally:
        os.unlink(flag)


def capped_check():
    for d in os.listdir(DATA):
        full = os.path.join(DATA, d)
        if os.path.isdir(full):
            for f in os.listdir(full):
                if f.endswith(('.log', '.index', '.timeindex')):
                    evict(os.path.join(full, f))
    tk.ok('every segment and index file evicted from the page cache')
    flag = os.environ['SLOW_OPEN_FLAG']
    open(flag, 'w').close()  # from now on each segment-file open takes 400 ms (io/slowread.c)
    try:
        for what, api, version, values in (
                ('Fetch of a closed segment', 'Fetch', 12,
                 {'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 1 << 20, 'isolation_level': 0, 'session_id': 0,
                  'session_epoch': -1, 'topics': [{'topic': 'many', 'topic_id': k.ZERO_UUID, 'partitions': [
                      {'partition': 5, 'fetch_offset': 0, 'partition_max_bytes': 1 << 20}]}]}),
                ('ListOffsets by timestamp in a closed segment', 'ListOffsets', 7,
                 {'replica_id': -1, 'isolation_level': 0, 'topics': [{'name': 'many', 'partitions': [
                     {'partition_index': 6, 'timestamp': ts_of(6, 1, 0)}]}]})):
            slow = k.Conn(B, timeout=30.0)
            t0 = time.monotonic()
            corr = slow.send(api, version, values)
            time.sleep(0.05)
            with k.Conn(B) as o:
                for name, fn in (('ApiVersions', lambda: k.api_versions(o)),
                                 ('Metadata', lambda: k.metadata(o, ['many']))):
                    _, dt = timed(fn)
                    tk.check(f'{name} answered while a {what} waits for a slow open ({dt * 1000:.0f} ms)',
                             dt < 0.3, f'took {dt:.2f}s')
            other_done = time.monotonic() - t0
            slow.recv(api, version, corr, 30.0)
            dt = time.monotonic() - t0
            slow.close()
            tk.check(f'the {what} was answered after the slow open ({dt:.2f}s >= 0.35s), after the other '
                     f'connection ({other_done:.2f}s)', dt >= 0.35 and other_done < dt, f'{dt:.2f}s / {other_done:.2f}s')
    finally:
        os.unlink(flag)
    with k.Conn(B, timeout=30.0) as c:
        bad = []
        first_epoch = None
        for p in range(PARTS):
            got, epochs = fetch_all(c, p)
            want = [value_of(p, i, j) for i in range(BATCHES) for j in range(PER)]
            if got != want:
                bad.append(p)
            if epochs and first_epoch is None:
                first_epoch = epochs[0]
        tk.check('every partition of many reads back whole after the restart (Fetch from 0)', not bad, f'bad: {bad}')
        bad = []
        for p in range(PARTS):
            i, j = (p * 3) % BATCHES, p % PER
            r = k.list_offsets(c, 'many', p, ts_of(p, i, j))
            if (r['error_code'], r['offset'], r['timestamp']) != (0, i * PER + j, ts_of(p, i, j)):
                bad.append((p, r))
            r = k.list_offsets(c, 'many', p, -3)
            if (r['error_code'], r['offset'], r['timestamp']) != (0, BATCHES * PER - 1, ts_of(p, BATCHES - 1, PER - 1)):
                bad.append((p, '-3', r))
            if k.list_offsets(c, 'many', p, -2)['offset'] != 0 or k.list_offsets(c, 'many', p, -1)['offset'] != BATCHES * PER:
                bad.append((p, '-2/-1'))
        tk.check('ListOffsets by timestamp, -3, -2, -1 on every partition', not bad, str(bad[:3]))
        bad = []
        for p in range(PARTS):
            r = olfe(c, p, first_epoch)
            if (r['error_code'], r['end_offset']) != (0, BATCHES * PER):
                bad.append((p, r))
        tk.check(f'OffsetForLeaderEpoch(epoch {first_epoch}) = the log end before the restart, every partition',
                 not bad, str(bad[:3]))
        pipelined_produce_to_closed_partition()
        errors = []
        for p in range(PARTS):
            r = k.produce(c, 'many', p, k.build_batch([(b'after', b'restart-%d' % p)]), acks=-1)
            if r['error_code'] or r['base_offset'] != BATCHES * PER + {1: 3, 23: 1}.get(p, 0):
                errors.append((p, r['error_code'], r['base_offset']))
        tk.check('a Produce to each of the 24 idle partitions (active files closed by the cap) lands at the log end',
                 not errors, str(errors[:3]))
        bad = [p for p in range(PARTS) if fetch_all(c, p, BATCHES * PER)[0] !=
               {1: [b'pipelined-%d' % i for i in range(3)], 23: [b'other']}.get(p, []) + [b'restart-%d' % p]]
        tk.check('the produced records read back', not bad, f'bad: {bad}')
        start = 0
        for _ in range(100):
            start = k.list_offsets(c, 'ret', 0, -2)['offset']
            if start > 0:
                break
            time.sleep(0.1)
        tk.check(f'retention deleted the expired segments of ret (log start offset {start})', start > 0, 'still 0')
        for _ in range(100):
            start = k.list_offsets(c, 'gone', 0, -2)['offset']
            if start == 30:
                break
            time.sleep(0.1)
        tk.eq('retention rolled and deleted every segment of gone (log start offset = log end)', 30, start)
    time.sleep(0.2)
    audit = open(os.environ['AUDIT_FILE']).read().splitlines() if os.path.exists(os.environ['AUDIT_FILE']) else []
    tk.check(f'the network thread made no call that may wait for the disk ({len(audit)} audit lines)', not audit,
             '; '.join(audit[:5]))


if __name__ == '__main__':
    mode = sys.argv[1] if len(sys.argv) > 1 else ''
    tk.run(f'io {mode}', {'cold': cold, 'parked': parked, 'capped_setup': capped_setup,
                               'capped_check': capped_check}[mode])
    tk.finish()
