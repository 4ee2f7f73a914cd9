"""metrics/reqtime.py: request timing on /metrics and the slow-request log line (issue #22, request timing).

Starts its own two brokers (GREGOR_BIN, Kafka and admin listeners on port 0, fresh data directories):
A with the default gregor.log.slow.request.ms (1000): creates topics rt and rt_empty, sends N ApiVersions
v3 and M Produce v9, then one Fetch v12 with max_wait_ms 500 on the empty partition (a client's long poll),
and another with an ApiVersions pipelined right behind it (its times start once the Fetch is sent),
and checks on its scrape: each family's _count for ApiVersions, Produce, CreateTopics, Fetch and
FetchConsumer equals the requests sent (no FetchFollower series); the Fetch's remotetimems is about 500 ms
(and its totaltimems too) while gregor_request_latency_seconds{request="Fetch"} holds it in a bucket at or
below 0.262144 s (the wait is excluded); the latency _count values equal the requests sent; both idle
gauges are fractions in 0..1; every family has one # TYPE line; and A's log has no slow-request line.
B with gregor.log.slow.request.ms=0: an ApiVersions with a known client id and correlation id logs the
slow-request line naming api, version, client_id, correlation_id and peer; a Fetch v12 with replica id 2 and a
Fetch v15 with ReplicaState.replica_id 2 are counted under Fetch and FetchFollower, not FetchConsumer. Prints "RESULT p f x".
"""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402
from promkit import http_req, parse  # noqa: E402

REPO = os.environ.get('REPO') or os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
GREGOR_BIN = os.environ.get('GREGOR_BIN') or os.path.join(REPO, 'build', 'bin', 'gregor')
RQ = 'kafka_network_requestmetrics_'
FAMILIES = ['requestqueuetimems', 'localtimems', 'remotetimems', 'responsequeuetimems', 'responsesendtimems',
            'totaltimems']


class Broker:
    def __init__(self, tmp, name, *overrides):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.log = os.path.join(self.dir, 'broker.log')
        args = [GREGOR_BIN, '--override', 'listeners=PLAINTEXT://127.0.0.1:0',
                '--override', f'gregor.listener.file={self.dir}/listener',
                '--override', 'gregor.admin.listeners=http://127.0.0.1:0',
                '--override', f'gregor.admin.listener.file={self.dir}/admin',
                '--override', f'log.dirs={self.dir}/data']
        for o in overrides:
            args += ['--override', o]
        with open(self.log, 'wb') as f:
            self.proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT)
        listener = os.path.join(self.dir, 'listener')
        deadline = time.monotonic() + 60  # a loaded machine: start-up takes seconds at worst
        while time.monotonic() < deadline and self.proc.poll() is None:
            if os.path.exists(listener) and os.path.getsize(listener):
                break
            time.sleep(0.05)
        self.addr = open(os.path.join(self.dir, 'listener')).readline().strip()
        self.admin = open(os.path.join(self.dir, 'admin')).readline().strip()

    def log_text(self):
        with open(self.log, errors='replace') as f:
            return f.read()

    def stop(self):
        """SIGTERM; returns the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


def scrape(b):
    st, _, body = http_req(b.admin, 'GET', '/metrics')
    tk.eq('/metrics: 200', 200, st)
    return body.decode(), parse(body.decode())


def count(m, fam, req):
    return m.get((f'{RQ}{fam}_count', frozenset({('request', req)})))


def quantile(m, fam, req, q):
    return m.get((f'{RQ}{fam}', frozenset({('request', req), ('quantile', q)})))


def check_a(a):
    n_av, n_prod = 5, 3
    with kr.Conn(a.addr) as c:
        tk.eq('topic rt created', 0, kr.create_topic(c, 'rt', partitions=1)['error_code'])
        tk.eq('topic rt_empty created', 0, kr.create_topic(c, 'rt_empty', partitions=1)['error_code'])
        for _ in range(n_av):
            tk.eq('ApiVersions v3 answered', 0, kr.api_versions(c, 3)['error_code'])
        for i in range(n_prod):
            batch = kr.build_batch([(None, b'v%d' % i)])
            tk.eq('Produce v9 acknowledged', 0, kr.produce(c, 'rt', 0, batch, version=9, acks=1)['error_code'])
        t0 = time.monotonic()
        f = kr.fetch(c, 'rt_empty', 0, 0, version=12, max_wait_ms=500, min_bytes=1)
        waited = time.monotonic() - t0
        tk.eq('the long-poll Fetch answers empty', b'', f['responses'][0]['partitions'][0]['records'] or b'')
        tk.check('and waited its 500 ms', waited >= 0.45, f'{waited:.3f} s')
        # pipelined: an ApiVersions sent right behind a long-poll Fetch waits for it on the connection, yet its
        # times start when the Fetch is sent, as Kafka reads the next request only then
        fcorr = c.send('Fetch', 12, {'max_wait_ms': 500, 'min_bytes': 1, 'max_bytes': 1000000, 'isolation_level': 0,
                                     'session_id': 0, 'session_epoch': -1,
                                     'topics': [{'topic': 'rt_empty', 'topic_id': kr.ZERO_UUID, 'partitions': [
                                         {'partition': 0, 'fetch_offset': 0, 'current_leader_epoch': -1,
                                          'last_fetched_epoch': -1, 'partition_max_bytes': 1000}]}]})
        acorr = c.send('ApiVersions', 3)
        tk.eq('the pipelined Fetch answered first', 0, c.recv('Fetch', 12, fcorr)[1]['error_code'])
        tk.eq('then the ApiVersions behind it', 0, c.recv('ApiVersions', 3, acorr)[1]['error_code'])
    # the last request's metrics are recorded once its last byte is written: the client has it by then, and
    # the scrape runs on the same loop after it
    text, m = scrape(a)
    sent = {'ApiVersions': n_av + 1, 'Produce': n_prod, 'CreateTopics': 2, 'Fetch': 2, 'FetchConsumer': 2}
    for fam in FAMILIES:
        tk.eq(f'# TYPE {RQ}{fam} summary, once', 1, text.count(f'# TYPE {RQ}{fam} summary\n'))
        for req, n in sent.items():
            tk.eq(f'{fam}_count{{request={req}}} = requests sent', n, count(m, fam, req))
            qs = [quantile(m, fam, req, q) for q in ('0.50', '0.75', '0.95', '0.98', '0.99', '0.999')]
            tk.check(f'{fam}{{request={req}}}: six quantiles, finite, non-negative, non-decreasing',
                     all(v is not None and math.isfinite(v) and v >= 0 for v in qs) and qs == sorted(qs), str(qs))
    tk.check('no FetchFollower series (a client fetched)', 'request="FetchFollower"' not in text)
    for req in ('Fetch', 'FetchConsumer'):
        remote = quantile(m, 'remotetimems', req, '0.50')
        total = quantile(m, 'totaltimems', req, '0.999')
        # 500 ms wait, reported as its bucket's midpoint (within 1/16): 470..; a loaded machine adds delay
        tk.check(f'remotetimems{{request={req}}} counts the ~500 ms wait', remote is not None and
                 470 <= remote <= 3000, str(remote))
        tk.check(f'totaltimems{{request={req}}} too', total is not None and 470 <= total <= 3000, str(total))
    tk.check('ApiVersions remotetimems is 0 (never waited)',
             quantile(m, 'remotetimems', 'ApiVersions', '0.999') == 0, str(quantile(m, 'remotetimems', 'ApiVersions', '0.999')))
    lat = 'gregor_request_latency_seconds'
    aq = quantile(m, 'requestqueuetimems', 'ApiVersions', '0.999')
    tk.check('ApiVersions requestqueuetimems: not the 500 ms it waited behind the pipelined Fetch', aq is not None and
             aq < 250, str(aq))
    tk.eq('and all its latencies in le=0.262144', sent['ApiVersions'],
          m.get((f'{lat}_bucket', frozenset({('request', 'ApiVersions'), ('le', '0.262144')}))))
    tk.eq(f'# TYPE {lat} histogram, once', 1, text.count(f'# TYPE {lat} histogram\n'))
    le_low = m.get((f'{lat}_bucket', frozenset({('request', 'Fetch'), ('le', '0.262144')})))
    le_inf = m.get((f'{lat}_bucket', frozenset({('request', 'Fetch'), ('le', '+Inf')})))
    tk.eq('latency{request=Fetch}: the long polls in a low bucket (le=0.262144), their wait excluded', (2, 2),
          (le_low, le_inf))
    fsum = m.get((f'{lat}_sum', frozenset({('request', 'Fetch')})))
    tk.check('latency_sum{request=Fetch} well below the 0.5 s wait', fsum is not None and fsum < 0.262144, str(fsum))
    for req in ('ApiVersions', 'Produce', 'CreateTopics', 'Fetch'):
        tk.eq(f'latency_count{{request={req}}} = requests sent', sent[req],
              m.get((f'{lat}_count', frozenset({('request', req)}))))
        buckets = [m.get((f'{lat}_bucket', frozenset({('request', req), ('le', '%.6f' % (0.000256 * 2 ** i))})))
                   for i in range(18)]
        tk.check(f'latency{{request={req}}}: 18 cumulative buckets', None not in buckets and
                 buckets == sorted(buckets) and buckets[-1] <= sent[req], str(buckets))
    tk.check('no latency series for FetchConsumer (API names only)', f'{lat}_bucket{{request="FetchConsumer"' not in text)
    for g in ('kafka_network_socketserver_networkprocessoravgidlepercent',
              'kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent'):
        v = m.get((g, frozenset()))
        tk.check(f'{g}: a fraction in 0..1', v is not None and 0 <= v <= 1, str(v))
        tk.eq(f'# TYPE {g} gauge, once', 1, text.count(f'# TYPE {g} gauge\n'))
    # a JoinGroup that waits out the initial rebalance delay (1.2 s here) is a long-poll wait: no slow line
    with kr.Conn(a.addr) as c:
        join = {'group_id': 'rt-g', 'session_timeout_ms': 10000, 'rebalance_timeout_ms': 10000, 'member_id': '',
                'protocol_type': 'consumer', 'protocols': [{'name': 'range', 'metadata': b''}]}
        r = c.request('JoinGroup', 5, join, timeout=20)
        join['member_id'] = r['member_id']
        t0 = time.monotonic()
        r = c.request('JoinGroup', 5, join, timeout=20)
        tk.check('JoinGroup waited out the 1.2 s initial rebalance delay', r['error_code'] == 0 and
                 time.monotonic() - t0 >= 1.1, (r['error_code'], time.monotonic() - t0))
    tk.check('broker A (default gregor.log.slow.request.ms=1000) logs no slow-request line for fast requests '
             'nor for a JoinGroup waiting for its rebalance',
             'slow request' not in a.log_text(), a.log_text()[-2000:])


def check_b(b):
    with kr.Conn(b.addr) as c:
        corr = c.send('ApiVersions', 3, client_id='reqtime-slow', correlation_id=4242)
        tk.eq('ApiVersions answered', 0, c.recv('ApiVersions', 3, corr)[1]['error_code'])
        port = c.sock.getsockname()[1]
    want = re.compile(r'msg="slow request" api=ApiVersions version=3 client_id=reqtime-slow correlation_id=4242 '
                      r'peer=127\.0\.0\.1:(\d+) duration_ms=(\d+\.\d{3})')
    found = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not found:
        found = want.search(b.log_text())
        time.sleep(0.05)
    tk.check('gregor.log.slow.request.ms=0: the slow-request line names api, version, client_id, correlation_id',
             found is not None, b.log_text()[-2000:])
    if found:
        tk.eq('its peer is the client\'s port', port, int(found.group(1)))
        tk.check('its duration_ms is positive', float(found.group(2)) > 0, found.group(2))
    # a follower's Fetch (replica id 2 >= 0; this single node answers NOT_LEADER_OR_FOLLOWER) counts under
    # FetchFollower and Fetch, not FetchConsumer
    with kr.Conn(b.addr) as c:
        tk.eq('topic rtf created', 0, kr.create_topic(c, 'rtf', partitions=1)['error_code'])
        part = {'partition': 0, 'fetch_offset': 0, 'current_leader_epoch': -1, 'last_fetched_epoch': -1,
                'partition_max_bytes': 1000}
        r = c.request('Fetch', 12, {'replica_id': 2, 'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 1000000,
                                    'isolation_level': 0, 'session_id': 0, 'session_epoch': -1,
                                    'topics': [{'topic': 'rtf', 'topic_id': kr.ZERO_UUID, 'partitions': [part]}]})
        tk.eq('the follower Fetch is answered', 0, r['error_code'])
        # from v15 the replica id is in ReplicaState
        tid = kr.topic_id(b.addr, 'rtf')
        r = c.request('Fetch', 15, {'replica_state': {'replica_id': 2, 'replica_epoch': -1}, 'max_wait_ms': 0,
                                    'min_bytes': 1, 'max_bytes': 1000000, 'isolation_level': 0, 'session_id': 0,
                                    'session_epoch': -1,
                                    'topics': [{'topic_id': tid, 'partitions': [part]}]})
        tk.eq('the follower Fetch v15 is answered', 0, r['error_code'])
    _, m = scrape(b)
    tk.eq('two follower Fetches (v12, v15): totaltimems_count for Fetch, FetchFollower, FetchConsumer', (2, 2, None),
          (count(m, 'totaltimems', 'Fetch'), count(m, 'totaltimems', 'FetchFollower'),
           count(m, 'totaltimems', 'FetchConsumer')))


def main():
    tmp = tempfile.mkdtemp(prefix='gregor-reqtime.')
    brokers = []
    try:
        brokers.append(Broker(tmp, 'a', 'group.initial.rebalance.delay.ms=1200'))
        check_a(brokers[-1])
        brokers.append(Broker(tmp, 'b', 'gregor.log.slow.request.ms=0'))
        check_b(brokers[-1])
        for br in brokers:  # the sanitizer build exits 1 on a leak: its timing state freed at shutdown too
            tk.eq(f'broker {os.path.basename(br.dir)} stops cleanly on SIGTERM', (0, True),
                  (br.stop(), 'stopped cleanly' in br.log_text()))
    finally:
        for br in brokers:
            br.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    tk.finish()


main()
