"""io/run.py: the network thread and the disk (see io/run.sh). Argument: `cold` or `parked`.

cold: topic `cold` gets 4 MiB in 64 batches (acks=-1, so the pages are clean), its segment is evicted from
  the page cache (posix_fadvise DONTNEED) and fetched whole. The broker runs with io/slowread.c, which makes
  each >= 64 KiB pread of a .log file sleep 1.5 s: the I/O pool's read-in takes >= 1.5 s while the network
  thread goes on answering. Asserts: the range really was evicted (cachestat, when the kernel has it); the
  cold fetch is answered after >= 1.4 s with exactly the produced bytes; ApiVersions, Metadata and a
  produce on other connections are answered in < 0.5 s each while it waits; the range is resident
  afterwards and a second fetch of it is answered in < 0.5 s.
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


if __name__ == '__main__':
    mode = sys.argv[1] if len(sys.argv) > 1 else ''
    tk.run(f'io {mode}', {'cold': cold, 'parked': parked}[mode])
    tk.finish()
