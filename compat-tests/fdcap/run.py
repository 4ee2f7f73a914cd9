"""fdcap/run.py: requests naming more partitions than gregor.open.files.max (see fdcap/run.sh).

  run.py wide N CAP      topic `wide` with N partitions on a broker whose cap is CAP (< N):
    - before each request the once-a-second cap pass has closed the idle files (checked in /proc/PID/fd);
    - Produce (acks=1, one one-record batch per partition): every partition answered, error 0, base offset 0,
      while ApiVersions, Metadata and a Produce to another topic on a second connection are answered
      within a second each;
    - Produce (acks=-1) over all partitions with a Produce naming three of them pipelined behind it on the
      same connection: answered in order, every partition at offset 1, the later ones at offset 2;
    - Fetch naming every partition from offset 0: each returns exactly its records, values and offsets;
    - ListOffsets naming every partition: latest (-1), earliest (-2), max timestamp (-3) and by timestamp;
    - OffsetForLeaderEpoch naming every partition: the log end offset of the current epoch.
  run.py inflight N      sends one Produce (acks=-1) over all N partitions of `wide` whose files the pool
                         reopens slowly, touches $FLAG_FILE (the shell then sends SIGTERM): the broker closes
                         the connection without an answer.
  run.py ends N          after the restart: every log end offset as `wide` acknowledged (2, or 3 for the
                         three partitions of the pipelined produce): nothing of the produce cut by SIGTERM.
  run.py kp N            (Debian's kafka-python 2.0.2, after `wide`) a stock KafkaProducer sends 5 records
                         to each of the N idle partitions of `wide` (files closed by the cap first): every
                         record acknowledged at the next offsets of its partition.
"""
import os
import sys
import time

import kafka_raw as k
import testkit as tk

F = k.field
B = tk.broker()
PID = int(os.environ.get('BROKER_PID', '0'))


def open_log_files():
    """Segment .log files the broker has open now (/proc/PID/fd; its own broker.log is not one)."""
    n = 0
    for fd in os.listdir(f'/proc/{PID}/fd'):
        try:
            path = os.readlink(f'/proc/{PID}/fd/{fd}')
            n += path.endswith('.log') and '/data/' in path
        except OSError:
            pass
    return n


def settle(cap, what):
    """Waits for the cap pass (every second) to close idle files; checks it did."""
    deadline = time.monotonic() + 5
    time.sleep(0.3)
    n = open_log_files()
    while n > cap and time.monotonic() < deadline:
        time.sleep(0.1)
        n = open_log_files()
    tk.check(f'{what}: the cap pass closed files down to the cap first ({n} .log files open <= {cap})', n <= cap,
             f'{n} open')


def create(c, name, n):
    r = c.request('CreateTopics', 5, {
        'topics': [{'name': name, 'num_partitions': n, 'replication_factor': -1, 'configs': []}],
        'timeout_ms': 60000, 'validate_only': False}, timeout=90.0)
    return r['topics'][0]['error_code']


def produce_values(topic, parts, acks, make):
    return {'transactional_id': None, 'acks': acks, 'timeout_ms': 30000,
            'topic_data': [{'name': topic, 'partition_data': [{'index': p, 'records': make(p)} for p in parts]}]}


def by_partition(resp):
    return {p['index']: p for t in resp['responses'] for p in t['partition_responses']}


def value(p, i):
    return b'p%d-r%d' % (p, i)


def check_offsets(name, parts, got, offset):
    bad = [(p, got[p]['error_code'], got[p]['base_offset']) for p in parts
           if p not in got or got[p]['error_code'] != 0 or got[p]['base_offset'] != offset]
    tk.check(f'{name}: all {len(parts)} partitions answered, error 0, base offset {offset}',
             len(got) == len(parts) and not bad, f'{len(got)} answered; wrong: {bad[:5]}')


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def wide(n, cap):
    n, cap = int(n), int(cap)
    parts = list(range(n))
    with k.Conn(B, timeout=90.0) as c:
        tk.eq(f'create topic wide ({n} partitions)', 0, create(c, 'wide', n))
        tk.eq('create topic side (1 partition)', 0, create(c, 'side', 1))
    settle(cap, 'produce 1')
    ts1 = int(time.time() * 1000) - 60_000
    big = k.Conn(B, timeout=60.0)
    t0 = time.monotonic()
    corr = big.send('Produce', 9, produce_values('wide', parts, 1, lambda p: k.build_batch(
        [(b'k', value(p, 0))], base_timestamp=ts1)))
    with k.Conn(B, timeout=10.0) as o:
        for name, fn in (('ApiVersions', lambda: k.api_versions(o)),
                         ('Metadata', lambda: k.metadata(o, ['side'])),
                         ('Produce to another topic', lambda: k.produce(o, 'side', 0, k.build_batch([(b'a', b'b')]),
                                                                        acks=1))):
            resp, dt = timed(fn)
            tk.check(f'{name} on another connection answered within 1 s while the wide produce runs ({dt * 1000:.0f} ms)',
                     dt < 1.0, f'took {dt:.2f}s')
    try:
        _, resp = big.recv('Produce', 9, corr, 60.0)
    except Exception as e:  # noqa: BLE001 - never answered: that is the defect
        tk.fail(f'produce 1 (acks=1, {n} partitions, cap {cap}) answered', f'{type(e).__name__}: {e}')
        big.close()
        return
    dt = time.monotonic() - t0
    tk.ok(f'produce 1 (acks=1, {n} partitions, cap {cap}) answered in {dt:.2f}s')
    check_offsets('produce 1', parts, by_partition(resp), 0)

    settle(cap, 'produce 2')
    ts2 = ts1 + 30_000
    few = [0, n // 2, n - 1]
    corr2 = big.send('Produce', 9, produce_values('wide', parts, -1, lambda p: k.build_batch(
        [(b'k', value(p, 1))], base_timestamp=ts2)))
    corr3 = big.send('Produce', 9, produce_values('wide', few, 1, lambda p: k.build_batch(
        [(b'k', value(p, 2))], base_timestamp=ts2 + 1000)))
    got2 = by_partition(big.recv('Produce', 9, corr2, 60.0)[1])
    got3 = by_partition(big.recv('Produce', 9, corr3, 60.0)[1])
    big.close()
    check_offsets('produce 2 (acks=-1, all partitions)', parts, got2, 1)
    check_offsets('produce 3 (pipelined behind produce 2, 3 of its partitions)', few, got3, 2)
    ends = {p: 3 if p in few else 2 for p in parts}

    settle(cap, 'fetch')
    with k.Conn(B, timeout=60.0) as c:
        values = {'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 64 << 20, 'isolation_level': 0,
                  'session_id': 0, 'session_epoch': -1,
                  'topics': [{'topic': 'wide', 'topic_id': k.ZERO_UUID,
                              'partitions': [{'partition': p, 'fetch_offset': 0, 'partition_max_bytes': 1 << 20}
                                             for p in parts]}]}
        resp, dt = timed(lambda: c.request('Fetch', 12, values, timeout=60.0))
        got = {p['partition_index']: p for t in resp['responses'] for p in t['partitions']}
        bad = []
        for p in parts:
            gp = got.get(p)
            recs = k.records_of(gp) if gp else []
            want = [(i, value(p, i)) for i in range(ends[p])]
            if not gp or gp['error_code'] or gp['high_watermark'] != ends[p] or \
                    [(r['offset'], r['value']) for r in recs] != want:
                bad.append(p)
        tk.check(f'fetch naming all {n} partitions from 0: every partition its records, offsets, high watermark '
                 f'({dt:.2f}s)', len(got) == n and not bad, f'{len(got)} answered, wrong partitions {bad[:5]}')

    for what, ts, want in (('latest (-1)', -1, lambda p: ends[p]), ('earliest (-2)', -2, lambda p: 0),
                           ('max timestamp (-3)', -3, lambda p: 2 if p in few else 1),
                           ('by timestamp', ts2, lambda p: 1)):
        settle(cap, f'ListOffsets {what}')
        with k.Conn(B, timeout=60.0) as c:
            resp, dt = timed(lambda: c.request('ListOffsets', 7, {
                'replica_id': -1, 'isolation_level': 0,
                'topics': [{'name': 'wide', 'partitions': [{'partition_index': p, 'timestamp': ts} for p in parts]}]},
                timeout=60.0))
        got = {p['partition_index']: p for t in resp['topics'] for p in t['partitions']}
        bad = [p for p in parts if p not in got or got[p]['error_code'] or got[p]['offset'] != want(p)]
        tk.check(f'ListOffsets {what} naming all {n} partitions: every offset right ({dt:.2f}s)',
                 len(got) == n and not bad, f'{len(got)} answered, wrong: {[(p, got.get(p)) for p in bad[:3]]}')

    settle(cap, 'OffsetForLeaderEpoch')
    with k.Conn(B, timeout=60.0) as c:
        resp = c.request('OffsetForLeaderEpoch', 4, {'replica_id': -2, 'topics': [
            {'topic': 'wide', 'partitions': [{'partition': p, 'current_leader_epoch': -1, 'leader_epoch': 0}
                                             for p in parts]}]}, timeout=60.0)
    got = {p['partition']: p for t in resp['topics'] for p in t['partitions']}
    bad = [p for p in parts if p not in got or got[p]['error_code'] or got[p]['end_offset'] != ends[p]]
    tk.check(f'OffsetForLeaderEpoch naming all {n} partitions: end offset of epoch 0 each',
             len(got) == n and not bad, f'{len(got)} answered, wrong: {[(p, got.get(p)) for p in bad[:3]]}')


def inflight(n):
    parts = list(range(int(n)))
    with k.Conn(B, timeout=30.0) as c:
        c.send('Produce', 9, produce_values('wide', parts, -1, lambda p: k.build_batch([(b'k', b'term')])))
        open(os.environ['FLAG_FILE'], 'w').close()
        try:
            c.recv('Produce', 9, None, 20.0)
            tk.fail('the produce waiting for its files at SIGTERM: connection closed, no answer', 'answered')
        except k.ConnectionClosed:
            tk.ok('the produce waiting for its files at SIGTERM: connection closed, no answer')


def ends(n):
    """After the restart: the produce cut by SIGTERM appended nothing; every acknowledged record is there."""
    n = int(n)
    few = {0, n // 2, n - 1}
    with k.Conn(B, timeout=60.0) as c:
        resp = c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': 0, 'topics': [
            {'name': 'wide', 'partitions': [{'partition_index': p, 'timestamp': -1} for p in range(n)]}]},
            timeout=60.0)
    got = {p['partition_index']: p['offset'] for t in resp['topics'] for p in t['partitions']}
    bad = [(p, got.get(p)) for p in range(n) if got.get(p) != (3 if p in few else 2)]
    tk.check(f'after SIGTERM and a restart: all {n} log end offsets as acknowledged (nothing of the cut produce)',
             len(got) == n and not bad, f'wrong: {bad[:5]}')


def kp(n):
    from kafka import KafkaProducer
    import kafka
    n = int(n)
    few = {0, n // 2, n - 1}
    settle(1024, 'kafka-python')
    prod = KafkaProducer(bootstrap_servers=B, acks=1, linger_ms=200, request_timeout_ms=30000,
                         max_block_ms=30000, retries=0)
    futs = []
    for p in range(n):
        for i in range(5):
            futs.append((p, i, prod.send('wide', key=b'k', value=value(p, 10 + i), partition=p)))
    prod.flush(timeout=60)
    acked, wrong = 0, []
    for p, i, f in futs:
        try:
            md = f.get(timeout=1)
        except Exception:  # noqa: BLE001 - not acknowledged
            continue
        acked += 1
        want = (3 if p in few else 2) + i
        if md.partition != p or md.offset != want:
            wrong.append((p, i, md.partition, md.offset))
    prod.close(timeout=10)
    tk.eq(f'kafka-python {kafka.__version__}: records acknowledged of {5 * n} ({n} idle partitions, default cap)',
          5 * n, acked)
    tk.check('kafka-python: each record at the next offsets of its partition, in send order', not wrong,
             f'{wrong[:5]}')


tk.run(sys.argv[1], {'wide': wide, 'inflight': inflight, 'ends': ends, 'kp': kp}[sys.argv[1]], *sys.argv[2:])
tk.finish()
