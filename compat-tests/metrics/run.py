"""metrics/run.py: exact /metrics values after a known produce and fetch (issue #22, first slice).

Against the broker of compat-tests/metrics/run.sh (BROKER; ADMIN = its admin listener's host:port, port 0):
creates topic m1, produces two batches (3 and 7 records) with Produce v9, fetches them with one Fetch v12,
then scrapes /metrics and checks the exact values: messagesin 10, bytesin = the two batches' bytes, bytesout
= the fetched bytes, 2 produce and 1 fetch partition-requests, requests_total for CreateTopics v7, Produce v9
(2) and Fetch v12 (1), the log's end offset 10, start offset 0, 1 segment and size = bytesin; the HTTP rules
(405 with Allow for POST, 404, HEAD, ready/live, the content type). Prints "RESULT p f x".
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402
from promkit import http_req, parse  # noqa: E402


def main():
    broker = tk.broker()
    admin = os.environ['ADMIN']
    st, _, body = http_req(admin, 'GET', '/v1/status/ready')
    tk.eq('ready: 200 once started', 200, st)
    st, _, body = http_req(admin, 'GET', '/v1/status/live')
    tk.eq('live: 200 ok', (200, b'ok\n'), (st, body))
    with kr.Conn(broker) as c:
        tk.eq('topic m1 created', 0, kr.create_topic(c, 'm1', partitions=1)['error_code'])
        b1 = kr.build_batch([(b'k%d' % i, b'v' * (10 + i)) for i in range(3)])
        b2 = kr.build_batch([(None, b'x' * 100) for _ in range(7)])
        for b in (b1, b2):
            tk.eq('produce v9 acknowledged', 0, kr.produce(c, 'm1', 0, b, version=9)['error_code'])
        f = kr.fetch(c, 'm1', 0, 0, version=12)
        part = f['responses'][0]['partitions'][0]
        fetched = len(part['records'] or b'')
        tk.eq('fetch v12 returns both batches', len(b1) + len(b2), fetched)
    st, hdr, body = http_req(admin, 'GET', '/metrics')
    tk.eq('/metrics: 200', 200, st)
    tk.eq('content type: text format 0.0.4', 'text/plain; version=0.0.4; charset=utf-8', hdr.get('content-type'))
    m = parse(body.decode())
    T = frozenset({('topic', 'm1')})
    P = frozenset({('topic', 'm1'), ('partition', '0')})
    bytes_in = len(b1) + len(b2)
    want = [
        ('kafka_server_brokertopicmetrics_messagesin_total', frozenset(), 10),
        ('kafka_server_brokertopicmetrics_messagesin_total', T, 10),
        ('kafka_server_brokertopicmetrics_bytesin_total', frozenset(), bytes_in),
        ('kafka_server_brokertopicmetrics_bytesin_total', T, bytes_in),
        ('kafka_server_brokertopicmetrics_bytesout_total', T, fetched),
        ('kafka_server_brokertopicmetrics_totalproducerequests_total', T, 2),
        ('kafka_server_brokertopicmetrics_totalfetchrequests_total', T, 1),
        ('kafka_network_requestmetrics_requests_total', frozenset({('request', 'CreateTopics'), ('version', '7')}), 1),
        ('kafka_network_requestmetrics_requests_total', frozenset({('request', 'Produce'), ('version', '9')}), 2),
        ('kafka_network_requestmetrics_requests_total', frozenset({('request', 'Fetch'), ('version', '12')}), 1),
        ('kafka_log_log_logendoffset', P, 10),
        ('kafka_log_log_logstartoffset', P, 0),
        ('kafka_log_log_numlogsegments', P, 1),
        ('kafka_log_log_size', P, bytes_in),
        ('kafka_controller_kafkacontroller_activecontrollercount', frozenset(), 1),
    ]
    for name, labels, v in want:
        tk.eq(f'{name}{dict(labels)}', v, m.get((name, labels)))
    ver = [k for k in m if k[0] == 'gregor_build_info']
    tk.check('gregor_build_info{version,revision} 1', len(ver) == 1 and m[ver[0]] == 1 and
             {n for n, _ in ver[0][1]} == {'version', 'revision'}, str(ver))
    cpu = m.get(('process_cpu_seconds_total', frozenset()))
    tk.check('process_cpu_seconds_total present (an idle broker may show 0)', cpu is not None and cpu >= 0, str(cpu))
    for name in ('process_resident_memory_bytes', 'process_open_fds',
                 'process_max_fds', 'process_start_time_seconds'):
        tk.check(f'{name} present and positive', m.get((name, frozenset()), 0) > 0, str(m.get((name, frozenset()))))
    st, hdr, body = http_req(admin, 'POST', '/metrics')
    tk.eq('POST /metrics: 405 with Allow: GET, HEAD', (405, 'GET, HEAD'), (st, hdr.get('allow')))
    st, _, _ = http_req(admin, 'GET', '/nope')
    tk.eq('GET /nope: 404', 404, st)
    st, hdr, body = http_req(admin, 'HEAD', '/metrics')
    tk.eq('HEAD /metrics: 200, no body', (200, b''), (st, body))
    tk.finish()


main()
