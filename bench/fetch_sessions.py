#!/usr/bin/env python3
"""fetch_sessions.py: what KIP-227 fetch sessions save (issue #24's "measure first"), raw Fetch v12 requests.

Starts one Gregor (GREGOR_BIN, default build/bin/gregor; listener and admin on free loopback ports, its own
temporary log directory), creates one topic of PARTITIONS partitions (1,000 by default) with one record in
each, then, for each mode, one consumer connection sends FETCHES Fetch v12 requests (max_wait_ms 0) over all
the partitions, in two scenarios:
  - idle: nothing new between fetches;
  - traffic: before each fetch, one record is produced to each of HOT partitions (10 by default, chosen with
    a seeded RNG) and the consumer moves its offsets past what it read.
Modes: full (session_id 0, epoch -1 every time: what every Fetch was before sessions, and what librdkafka
2.0.2 sends) and incremental (one epoch-0 fetch making the session, then incremental fetches naming only the
partitions whose offset moved, as Java's FetchSessionHandler). Per fetch it reports the request and response
frame sizes (bytes on the wire, size prefix included) and the broker's CPU (the sum of its threads'
/proc/<pid>/task/*/schedstat run time, read just before and after each fetch, so produce CPU is not counted).
Prints a markdown table. The machine is shared: figures are for comparing the modes within one run.
Invariants: only the broker this script started is signalled; free loopback ports only.
Read next: server/fetch_session.h, compat-tests/lib/kafka_raw.py.
"""
import argparse
import glob
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'lib'))
import kafka_raw as k  # noqa: E402


def cpu_ns(pid):
    t = 0
    for f in glob.glob(f'/proc/{pid}/task/*/schedstat'):
        try:
            with open(f) as fh:
                t += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return t


def start_broker(binary, d):
    lf = os.path.join(d, 'listener')
    log = open(os.path.join(d, 'broker.log'), 'ab')
    p = subprocess.Popen([binary, '--override', 'listeners=PLAINTEXT://127.0.0.1:0', '--override',
                          f'gregor.listener.file={lf}', '--override', 'gregor.admin.listeners=http://127.0.0.1:0',
                          '--override', f'gregor.admin.listener.file={d}/admin', '--override',
                          f'log.dirs={d}/data'], stdout=log, stderr=log)
    for _ in range(1200):
        if os.path.exists(lf) and os.path.getsize(lf) > 0:
            return p, open(lf).read().split()[0]
        if p.poll() is not None:
            raise RuntimeError('broker exited at start')
        time.sleep(0.05)
    p.kill()
    raise RuntimeError('broker did not start')


def fetch_values(topic, parts, sid, epoch):
    return {'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 0x7fffffff, 'isolation_level': 0,
            'session_id': sid, 'session_epoch': epoch,
            'topics': [{'topic': topic, 'topic_id': k.ZERO_UUID, 'partitions': [
                {'partition': p, 'fetch_offset': o, 'current_leader_epoch': -1, 'last_fetched_epoch': -1,
                 'log_start_offset': -1, 'partition_max_bytes': 1 << 20} for p, o in parts]}] if parts else [],
            'forgotten_topics_data': []}


def one_fetch(c, pid, values):
    payload = k.request_header(1, 12, 7) + k.encode_body('Fetch', 12, values)
    c0 = cpu_ns(pid)
    c.send_raw(k.frame(payload))
    frame = c.recv_frame(15.0)
    c1 = cpu_ns(pid)
    r = k.Reader(frame)
    r.int32()
    for _ in range(r.uvarint()):  # header v1 tagged fields
        r.uvarint()
        r.take(r.uvarint())
    body = k.decode_response_body('Fetch', 12, frame, r.p)
    return len(payload) + 4, len(frame) + 4, c1 - c0, body


def run_mode(broker, pid, topic, n, fetches, hot, mode, traffic, rng):
    offs = {p: 0 for p in range(n)}
    sid, epoch = 0, (0 if mode == 'incremental' else -1)
    req_b, resp_b, cpu = [], [], []
    with k.Conn(broker) as c, k.Conn(broker) as pc:
        # position every partition at its end first (a consumer caught up)
        _, _, _, body = one_fetch(c, pid, fetch_values(topic, sorted(offs.items()), sid, epoch))
        for t in body['responses']:
            for p in t['partitions']:
                offs[p['partition_index']] = p['high_watermark']
        if mode == 'incremental':
            sid, epoch = body['session_id'], 1
            if sid <= 0:
                raise RuntimeError('no session made')
        moved = set()
        for _ in range(fetches):
            if traffic:
                for p in rng.sample(range(n), hot):
                    k.produce(pc, topic, p, k.build_batch([(None, b'x' * 100)]))
            if mode == 'full':
                parts = sorted(offs.items())
            else:
                parts = sorted((p, offs[p]) for p in moved)
            rq, rs, dc, body = one_fetch(c, pid, fetch_values(topic, parts, sid, epoch))
            if body['error_code']:
                raise RuntimeError(f'fetch error {body["error_code"]}')
            if mode == 'incremental':
                epoch += 1
            moved = set()
            for t in body['responses']:
                for p in t['partitions']:
                    if p['records']:
                        offs[p['partition_index']] = p['high_watermark']
                        moved.add(p['partition_index'])
            req_b.append(rq)
            resp_b.append(rs)
            cpu.append(dc)
    return statistics.median(req_b), statistics.median(resp_b), sum(cpu) / len(cpu) / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--partitions', type=int, default=1000)
    ap.add_argument('--fetches', type=int, default=300)
    ap.add_argument('--hot', type=int, default=10)
    ap.add_argument('--seed', type=int, default=24)
    ap.add_argument('--modes', default='full,incremental', help='full: also a broker without sessions')
    ap.add_argument('--bin', default=os.environ.get('GREGOR_BIN', os.path.join(REPO, 'build', 'bin', 'gregor')))
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix='gregor-fsess-bench.')
    p, broker = start_broker(a.bin, d)
    try:
        with k.Conn(broker) as c:
            r = k.create_topic(c, 'fsb', a.partitions)
            if r['error_code']:
                raise RuntimeError(f'CreateTopics: {r["error_code"]}')
            time.sleep(0.5)
            for q in range(a.partitions):
                k.produce(c, 'fsb', q, k.build_batch([(None, b'x' * 100)]))
        rows = []
        for traffic in (False, True):
            for mode in a.modes.split(','):
                rng = random.Random(a.seed)
                rows.append((('traffic' if traffic else 'idle'), mode) +
                            run_mode(broker, p.pid, 'fsb', a.partitions, a.fetches, a.hot, mode, traffic, rng))
        print(f'{a.partitions} partitions, {a.fetches} fetches per row, hot={a.hot}, seed={a.seed}, '
              f'load {os.getloadavg()[0]:.1f}')
        print('| scenario | mode | request bytes (median) | response bytes (median) | broker CPU per fetch (us) |')
        print('| --- | --- | ---: | ---: | ---: |')
        for s, m, rq, rs, cu in rows:
            print(f'| {s} | {m} | {rq:.0f} | {rs:.0f} | {cu:.0f} |')
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    main()
