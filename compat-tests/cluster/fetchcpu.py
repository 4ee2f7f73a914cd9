"""fetchcpu.py: what the replica fetcher costs (issue #20), measured on an RF 3 cluster of three brokers on the
host (etcd and brokers from harness.py; everything started is stopped at the end).

A topic of --partitions partitions (default 12), replication factor 3, min.insync.replicas=2: each broker
leads a third and follows the rest. Two windows of --seconds each (default 30):
  - idle: no client traffic; the CPU time (utime + stime from /proc/<pid>/stat) each broker used, and its
    network thread's wakeups per second (voluntary context switches of the main thread);
  - steady produce: confluent-kafka produces --rate records/s (100-byte values, acks=all, linger.ms=0) spread
    over the partitions; the CPU time and wakeups of each broker in the same window, the records acknowledged and the
    acknowledgement latency (produce call to delivery callback: p50 / p99, ms);
  - then --serial records (default 300) produced one at a time: the acknowledgement latency (p50 / p90).
A measurement, not a test: it prints the figures and `fetchcpu: N passed, N failed` for its few sanity checks
(the topic made, every record acknowledged). Compare two builds by pointing GREGOR_BIN at each.
Usage: fetchcpu.py [--seconds S] [--rate N] [--partitions N] [--serial N]
Read next: cluster/fetcher.c, replication.py.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq  # noqa: E402

PREFIX = '/gregor'
TOPIC = 'cpu'
TICK = os.sysconf('SC_CLK_TCK')


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            'broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false',
            'offsets.topic.replication.factor=1']


def cpu_s(pid):
    """utime + stime of `pid` in seconds."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def isr_full(b, parts):
    try:
        with k.Conn(b.bootstrap, timeout=5) as c:
            m = k.metadata(c, [TOPIC], version=12, allow_auto=False)
    except Exception:  # noqa: BLE001 - not up yet
        return False
    for t in m['topics']:
        if t['name'] == TOPIC and t['error_code'] == 0:
            return len(t['partitions']) == parts and all(
                p['leader_id'] >= 0 and len(p['isr_nodes']) == 3 for p in t['partitions'])
    return False


def wakeups(pid):
    """Voluntary context switches of `pid`'s main thread (the network thread's loop: each is a sleep in
    epoll_wait or on a lock, so a timer firing every ms shows here)."""
    with open(f'/proc/{pid}/task/{pid}/status') as f:
        for line in f:
            if line.startswith('voluntary_ctxt_switches:'):
                return int(line.split()[1])
    return 0


def window(bs, seconds, work=None):
    """CPU seconds of each broker, and its network thread's wakeups per second, over `seconds` of wall time
    while `work(end)` runs (None: sleep)."""
    before = [(cpu_s(b.proc.pid), wakeups(b.proc.pid)) for b in bs]
    t0 = time.monotonic()
    out = work(t0 + seconds) if work else time.sleep(seconds)
    dt = time.monotonic() - t0
    cpu = [round(cpu_s(b.proc.pid) - x[0], 2) for b, x in zip(bs, before)]
    wk = [round((wakeups(b.proc.pid) - x[1]) / dt) for b, x in zip(bs, before)]
    return cpu, wk, out


def producer_work(bs, rate, parts):
    from confluent_kafka import Producer

    def run(end):
        p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all', 'linger.ms': 0,
                      'enable.idempotence': True, 'message.timeout.ms': 30000, 'log_level': 2})
        lat, errors, sent = [], [], 0
        value = b'x' * 100
        t0 = time.monotonic()
        while time.monotonic() < end:
            due = int((time.monotonic() - t0) * rate)
            while sent < due:
                t = time.monotonic()
                p.produce(TOPIC, value=value, partition=sent % parts,
                          on_delivery=lambda err, msg, t=t: (errors if err else lat).append(
                              str(err) if err else time.monotonic() - t))
                sent += 1
            p.poll(0.002)
        p.flush(30)
        return sent, lat, errors
    return run


def serial_latency(bs, n, parts):
    """Produces `n` records one at a time (each acknowledged before the next is sent: acks=all waits for a
    follower's next Fetch, so the fetcher's wait for fsync is on the path); returns the sorted latencies (s)."""
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all', 'linger.ms': 0,
                  'enable.idempotence': True, 'message.timeout.ms': 30000, 'log_level': 2})
    out = []
    for i in range(n):
        t = time.monotonic()
        p.produce(TOPIC, value=b'y' * 100, partition=i % parts)
        p.flush(30)
        out.append(time.monotonic() - t)
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=float, default=30.0)
    ap.add_argument('--rate', type=int, default=1000)
    ap.add_argument('--partitions', type=int, default=12)
    ap.add_argument('--serial', type=int, default=300)
    a = ap.parse_args()
    with h.Run(deadline_s=3 * a.seconds + 240, label='fetchcpu') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        topic = {'name': TOPIC, 'num_partitions': a.partitions, 'replication_factor': 3, 'assignments': [],
                 'configs': [{'name': 'min.insync.replicas', 'value': '2'}]}
        with k.Conn(bs[0].bootstrap, timeout=30) as c:
            r = c.request('CreateTopics', 7, {'topics': [topic], 'timeout_ms': 15000, 'validate_only': False})
        eq('CreateTopics: NONE', 0, r['topics'][0]['error_code'])
        h.wait_until(lambda: all(isr_full(b, a.partitions) for b in bs), 60, 'every ISR full')
        time.sleep(5)  # settle: registrations, first fetches
        idle, wk, _ = window(bs, a.seconds)
        print(f'   figure: idle {a.seconds:.0f} s, {a.partitions} partitions RF 3: CPU s per broker {idle}, '
              f'total {sum(idle):.2f}; network-thread wakeups/s {wk}', flush=True)
        busy, wk, (sent, lat, errors) = window(bs, a.seconds, producer_work(bs, a.rate, a.partitions))
        lat.sort()
        pct = (lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2)) if lat else (lambda q: None)
        print(f'   figure: produce {a.rate}/s acks=all for {a.seconds:.0f} s: CPU s per broker {busy}, total '
              f'{sum(busy):.2f}; network-thread wakeups/s {wk}; acknowledged {len(lat)}/{sent}, latency p50 '
              f'{pct(0.5)} ms p99 {pct(0.99)} ms', flush=True)
        eq('every record acknowledged', (sent, []), (len(lat), errors[:3]))
        if a.serial:
            sl = serial_latency(bs, a.serial, a.partitions)
            print(f'   figure: {a.serial} records one at a time, acks=all: latency p50 '
                  f'{sl[len(sl) // 2] * 1000:.2f} ms p90 {sl[int(len(sl) * 0.9)] * 1000:.2f} ms', flush=True)
        check('the brokers are alive', all(b.alive() for b in bs))
    print(f'fetchcpu: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
