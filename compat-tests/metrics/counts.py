"""metrics/counts.py: request and byte counts of issue #22 (server/metrics_counts.h) on one broker.

Against the broker of compat-tests/metrics/run.sh (BROKER, ADMIN), after metrics/run.py (so every value is
checked as the difference between a scrape before and one after): creates topic c1 (max.message.bytes 1000,
message.timestamp.before.max.ms 60000), sends Produce v9 twice with a good batch, once to an unknown topic,
once to c1-7 (no such partition), once with a batch over max.message.bytes and once with a batch timestamped in 1970, then Fetch v12 of c1-0
and of c1-7 (no such partition), then acks=0 produces: a good one (answered with nothing, no error counted,
as Kafka's sendNoOpResponse) and one to an unknown topic (the connection closed, its error counted, as
Kafka's closeConnection). Expected values come from what the test sent and the errors it was answered:
errors_total per (request, error) as Kafka's errorCounts() counts them (Fetch's top-level error counts as
NONE), failedproducerequests 1 (INVALID_TIMESTAMP; Kafka leaves out MESSAGE_TOO_LARGE and unknown topics),
bytesrejected = the oversized batch's bytes, failedfetchrequests 0 (Kafka leaves out unknown partitions),
totalproducerequests 5 and totalfetchrequests 2 (every partition ReplicaManager appended to or read, refused
ones too, not the unknown topic or partitions KafkaApis answers first),
requests_total{request="FetchConsumer"} = the fetches sent, no FetchFollower, replication bytes 0.
Prints "RESULT p f x".
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402
from promkit import http_req, parse  # noqa: E402


def scrape(admin):
    st, _, body = http_req(admin, 'GET', '/metrics')
    if st != 200:
        raise RuntimeError(f'/metrics answered {st}')
    return parse(body.decode())


def main():
    broker = tk.broker()
    admin = os.environ['ADMIN']
    before = scrape(admin)
    sent = {}  # (request, error name) -> count, from the answers received

    def answered(request, code):
        name = {0: 'NONE', 3: 'UNKNOWN_TOPIC_OR_PARTITION', 10: 'MESSAGE_TOO_LARGE', 32: 'INVALID_TIMESTAMP'}[code]
        sent[(request, name)] = sent.get((request, name), 0) + 1

    with kr.Conn(broker) as c:
        r = kr.create_topic(c, 'c1', partitions=1, configs={'max.message.bytes': '1000',
                                                            'message.timestamp.before.max.ms': '60000'})
        tk.eq('topic c1 created', 0, r['error_code'])
        answered('CreateTopics', r['error_code'])
        good = kr.build_batch([(b'k', b'v' * 20) for _ in range(4)])
        for _ in range(2):
            r = kr.produce(c, 'c1', 0, good, version=9)
            tk.eq('good produce: NONE', 0, r['error_code'])
            answered('Produce', r['error_code'])
        r = kr.produce(c, 'no-such-topic-c1', 0, good, version=9)
        tk.eq('produce to an unknown topic: UNKNOWN_TOPIC_OR_PARTITION', 3, r['error_code'])
        answered('Produce', r['error_code'])
        r = kr.produce(c, 'c1', 7, good, version=9)
        tk.eq('produce to c1-7 (no such partition): UNKNOWN_TOPIC_OR_PARTITION', 3, r['error_code'])
        answered('Produce', r['error_code'])
        big = kr.build_batch([(None, b'x' * 1500)])
        r = kr.produce(c, 'c1', 0, big, version=9)
        tk.eq('a batch over max.message.bytes: MESSAGE_TOO_LARGE', 10, r['error_code'])
        answered('Produce', r['error_code'])
        old = kr.build_batch([(None, b'old')], base_timestamp=1000)
        r = kr.produce(c, 'c1', 0, old, version=9)
        tk.eq('a batch from 1970 with message.timestamp.before.max.ms 60000: INVALID_TIMESTAMP', 32, r['error_code'])
        answered('Produce', r['error_code'])
        fetches = 0
        for p, want in ((0, 0), (7, 3)):
            f = kr.fetch(c, 'c1', p, 0, version=12)
            fetches += 1
            answered('Fetch', f['error_code'])
            part = f['responses'][0]['partitions'][0]
            tk.eq(f'fetch c1-{p}: error {want}', want, part['error_code'])
            answered('Fetch', part['error_code'])
    with kr.Conn(broker) as c:  # acks=0: a good one is answered with nothing and counts no error (Kafka's
        kr.produce(c, 'c1', 0, good, version=9, acks=0)  # sendNoOpResponse); then a request behind it
        tk.eq('after an acks=0 produce the connection still answers', 0,  # on the same connection
              kr.fetch(c, 'c1', 0, 0, version=12)['error_code'])
        fetches += 1
        answered('Fetch', 0)
        answered('Fetch', 0)  # its partition's NONE
    with kr.Conn(broker) as c:  # one to an unknown topic closes the connection and counts its error
        kr.produce(c, 'no-such-topic-c1', 0, good, version=9, acks=0)
        c.sock.settimeout(10)
        try:
            closed = c.sock.recv(1) == b''
        except OSError:
            closed = True
        tk.check('an acks=0 produce to an unknown topic closes the connection', closed)
        answered('Produce', 3)
    after = scrape(admin)

    def delta(name, labels):
        k = (name, frozenset(labels.items()))
        return after.get(k, 0) - before.get(k, 0)

    E = 'kafka_network_requestmetrics_errors_total'
    for (request, error), n in sorted(sent.items()):
        tk.eq(f'errors_total{{request="{request}",error="{error}"}} grew by {n}', n,
              delta(E, {'request': request, 'error': error}))
    grown = sorted((dict(k[1])['request'], dict(k[1])['error']) for k in after
                   if k[0] == E and dict(k[1])['request'] in ('Produce', 'Fetch')
                   and after[k] != before.get(k, 0))
    tk.eq('no other Produce/Fetch errors_total series grew', sorted(k for k in sent if k[0] != 'CreateTopics'),
          grown)
    B = 'kafka_server_brokertopicmetrics_'
    for labels in ({}, {'topic': 'c1'}):
        tk.eq(f'failedproducerequests{labels}: 1 (INVALID_TIMESTAMP only)', 1,
              delta(B + 'failedproducerequests_total', labels))
        tk.eq(f'bytesrejected{labels}: the oversized batch\'s {len(big)} bytes', len(big),
              delta(B + 'bytesrejected_total', labels))
        tk.eq(f'failedfetchrequests{labels}: 0 (an unknown partition is not a failure)', 0,
              delta(B + 'failedfetchrequests_total', labels))
    for labels in ({}, {'topic': 'c1'}):  # ReplicaManager marks every partition it appends to or reads,
        # refused or not; KafkaApis answers unknown topics and partitions before (not marked)
        tk.eq(f'totalproducerequests{labels}: 5 (2 good, too large, 1970, acks=0 good; not the unknown ones)', 5,
              delta(B + 'totalproducerequests_total', labels))
        tk.eq(f'totalfetchrequests{labels}: 2 (c1-0 twice; not c1-7)', 2,
              delta(B + 'totalfetchrequests_total', labels))
    R = 'kafka_network_requestmetrics_requests_total'
    tk.eq('requests_total{request="FetchConsumer",version="12"} grew by the fetches sent', fetches,
          delta(R, {'request': 'FetchConsumer', 'version': '12'}))
    tk.eq('requests_total{request="Fetch",version="12"} grew by the same', fetches,
          delta(R, {'request': 'Fetch', 'version': '12'}))
    tk.eq('no FetchFollower series on a single broker', [], [k for k in after if k[0] == R and
                                                            ('request', 'FetchFollower') in k[1]])
    tk.eq('replicationbytesin_total 0 on a single broker', 0, after.get((B + 'replicationbytesin_total', frozenset())))
    tk.eq('replicationbytesout_total 0 on a single broker', 0,
          after.get((B + 'replicationbytesout_total', frozenset())))
    tk.finish()


main()
