#!/usr/bin/env python3
"""follower_sessions.py: what KIP-227 fetch sessions save a follower (issue #24's "measure first": bytes and
leader CPU per fetch for a follower of 1,000 partitions, full fetches against sessions).

Starts etcd and two Gregor brokers on the host (compat-tests/cluster/harness.py: everything it starts is
stopped at the end), creates one topic of PARTITIONS partitions (1,000 by default) with RF 2 and every
partition assigned [1, 2], so broker 1 leads them all and broker 2 follows them all on one replica fetcher
connection, produces one record to each, waits until every ISR is full and settles SETTLE seconds; then,
the cluster idle, measures over SECONDS seconds:
  - follower fetches: the leader's kafka_network_requestmetrics_requests_total{request="FetchFollower"} (every
    version) grew by;
  - bytes per fetch: what broker 2's TCP connections to broker 1's listeners sent and received (tcp_info
    bytes_acked / bytes_received from `ss -tin`, read before and after; every connection from broker 2 to
    broker 1, the replica fetcher's carrying nearly all of it when idle), divided by the fetches;
  - leader CPU per fetch: broker 1's CPU (the sum of its threads' /proc/<pid>/task/*/schedstat run time) over
    the window divided by the fetches (everything broker 1 did: idle, that is its follower fetches, its etcd
    lease and the admin scrapes); and the follower's the same way.
Idle long polls: each follower fetch waits replica.fetch.wait.max.ms (500 by default) at the leader, so a
window of S seconds holds about 2 S fetches and the leader's idle work weighs on its CPU per fetch; with
--wait-ms 0 the follower fetches back to back and the fetches are nearly all the CPU of both brokers.
Each --bin is one row (e.g. main's build before sessions, this build); --no-sessions adds a row with this
build's leader making no session (max.incremental.fetch.session.cache.slots=0: full fetches every time).
Prints a markdown table. The machine is shared: figures are for comparing the rows within one run.
Usage: follower_sessions.py [--partitions N] [--seconds S] [--wait-ms MS] [--bin PATH[:LABEL]]... [--no-sessions]
Read next: cluster/fetch_session_client.h, bench/fetch_sessions.py (the same for a consumer).
"""
import argparse
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'cluster'))
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import metrics as mx  # noqa: E402  (scrape, g)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fetch_sessions import cpu_ns  # noqa: E402  (a process's CPU from its threads' schedstat)

TOPIC = 'fsf'


def tcp_bytes(pid, ports):
    """(bytes acked, bytes received) summed over `pid`'s TCP connections to 127.0.0.1 at any of `ports`."""
    out = subprocess.run(['ss', '-tinpH', 'state', 'established'], capture_output=True, text=True,
                         timeout=10).stdout.splitlines()
    sent = recv = 0
    i = 0
    while i < len(out):
        line = out[i]
        info = out[i + 1] if i + 1 < len(out) and not re.match(r'^\S', out[i + 1]) else ''
        i += 2 if info else 1
        f = line.split()
        if len(f) < 4 or f'pid={pid},' not in line:
            continue
        peer = f[3] if f[0].isdigit() else f[4]
        if peer.rsplit(':', 1)[-1] not in ports:
            continue
        m1 = re.search(r'bytes_acked:(\d+)', info)
        m2 = re.search(r'bytes_received:(\d+)', info)
        sent += int(m1.group(1)) if m1 else 0
        recv += int(m2.group(1)) if m2 else 0
    return sent, recv


def follower_fetches(b):
    m = mx.scrape(b)
    return sum(v for (name, labels), v in m.items()
               if name == 'kafka_network_requestmetrics_requests_total' and ('request', 'FetchFollower') in labels)


def isr_full(b, n):
    try:
        with k.Conn(b.bootstrap, timeout=5) as c:
            md = k.metadata(c, [TOPIC], version=12, allow_auto=False)
    except Exception:  # noqa: BLE001 - not yet
        return False
    t = md['topics'][0]
    return t['error_code'] == 0 and len(t['partitions']) == n and all(
        p['leader_id'] == 1 and len(p['isr_nodes']) == 2 for p in t['partitions'])


def one_row(binary, label, a, extra):
    with h.Run(deadline_s=a.seconds + a.settle + 240, label='follower-sessions') as run:
        etcd = run.etcd(1)
        ov = [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', 'gregor.metadata.etcd.prefix=/gregor',
              'broker.session.timeout.ms=6000', 'broker.heartbeat.interval.ms=500',
              'auto.create.topics.enable=false', 'auto.leader.rebalance.enable=false',
              f'replica.fetch.wait.max.ms={a.wait_ms}'] + extra
        bs = [run.broker(i, overrides=ov, bin=binary) for i in (1, 2)]
        topic = {'name': TOPIC, 'num_partitions': -1, 'replication_factor': -1, 'configs': [],
                 'assignments': [{'partition_index': p, 'broker_ids': [1, 2]} for p in range(a.partitions)]}
        with k.Conn(bs[0].bootstrap, timeout=60) as c:
            r = c.request('CreateTopics', 7, {'topics': [topic], 'timeout_ms': 60000, 'validate_only': False})
        if r['topics'][0]['error_code']:
            raise RuntimeError(f"CreateTopics: {r['topics'][0]}")
        h.wait_until(lambda: isr_full(bs[0], a.partitions), 120, 'every partition led by 1, ISR [1, 2]')
        with k.Conn(bs[0].bootstrap, timeout=30) as c:
            for p in range(a.partitions):
                k.produce(c, TOPIC, p, k.build_batch([(None, b'x' * 100)]), acks=-1)
        time.sleep(a.settle)
        leader, follower = bs[0], bs[1]
        ports = {addr.rsplit(':', 1)[1] for addr in leader.addrs.values()}
        f0, b0 = follower_fetches(leader), tcp_bytes(follower.proc.pid, ports)
        c0, cf0 = cpu_ns(leader.proc.pid), cpu_ns(follower.proc.pid)
        time.sleep(a.seconds)
        c1, cf1 = cpu_ns(leader.proc.pid), cpu_ns(follower.proc.pid)
        f1, b1 = follower_fetches(leader), tcp_bytes(follower.proc.pid, ports)
        n = f1 - f0
        if n <= 0:
            raise RuntimeError(f'{label}: no follower fetch counted')
        return (label, n, (b1[0] - b0[0]) / n, (b1[1] - b0[1]) / n, (c1 - c0) / n / 1000.0,
                (cf1 - cf0) / n / 1000.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--partitions', type=int, default=1000)
    ap.add_argument('--seconds', type=float, default=20.0)
    ap.add_argument('--settle', type=float, default=5.0)
    ap.add_argument('--wait-ms', type=int, default=500,
                    help='replica.fetch.wait.max.ms (0: the follower fetches back to back, so the fetches '
                         'dominate both brokers\' CPU)')
    ap.add_argument('--bin', action='append', default=[],
                    help='PATH[:LABEL], one row each (default: build/bin/gregor or GREGOR_BIN)')
    ap.add_argument('--no-sessions', action='store_true',
                    help='also the last --bin with max.incremental.fetch.session.cache.slots=0 on the leader')
    a = ap.parse_args()
    bins = a.bin or [os.environ.get('GREGOR_BIN', os.path.join(REPO, 'build', 'bin', 'gregor')) + ':this build']
    rows = []
    for spec in bins:
        path, _, label = spec.partition(':')
        rows.append(one_row(path, label or path, a, []))
    if a.no_sessions:
        path, _, label = bins[-1].partition(':')
        rows.append(one_row(path, (label or path) + ', leader without session slots', a,
                            ['max.incremental.fetch.session.cache.slots=0']))
    print(f'{a.partitions} partitions led by broker 1, followed by broker 2 (RF 2), idle, '
          f'replica.fetch.wait.max.ms {a.wait_ms}, {a.seconds:.0f} s window, load {os.getloadavg()[0]:.1f}')
    print('| build | follower fetches | bytes sent per fetch (follower -> leader) | bytes received per fetch | '
          'leader CPU per fetch (us) | follower CPU per fetch (us) |')
    print('| --- | ---: | ---: | ---: | ---: | ---: |')
    for label, n, sent, recv, cpu, fcpu in rows:
        print(f'| {label} | {n:.0f} | {sent:,.0f} | {recv:,.0f} | {cpu:.0f} | {fcpu:.0f} |')


if __name__ == '__main__':
    main()
