"""tls_checks.py: the Python part of compat-tests/tls/run.sh (SSL, MTLS, PLAIN listener addresses and the
CERTS directory in the environment): confluent-kafka (librdkafka) and kafka-python over SSL, a plaintext
Kafka request sent to the SSL port, a half-open TLS connection and a handshake trickled one byte at a time
(closed by connections.max.idle.ms from the accept, 4000 ms in run.sh) while other clients are served.
Then 8 MiB over many 1 MiB segments fetched over TLS byte-exact, and the send path of every TLS connection
(gregor_tls_connections_total on the admin listener, ADMIN): userspace where the kernel has no tls ULP, ktls
where it has one (that check runs only there, else it prints a SKIP line, counted as nothing)."""
import glob
import hashlib
import os
import random
import re
import socket
import struct
import sys
import time
import urllib.request

import kafka_raw as k
import testkit as t

SSL = os.environ['SSL']
MTLS = os.environ['MTLS']
CERTS = os.environ['CERTS']
CA = os.path.join(CERTS, 'ca.pem')
ADMIN = os.environ['ADMIN']
DATA = os.path.join(os.environ['BROKER_DIR'], 'data')


def ulp_tls():
    """Whether this kernel offers kTLS (the tls ULP listed in tcp_available_ulp)."""
    try:
        with open('/proc/sys/net/ipv4/tcp_available_ulp') as f:
            return 'tls' in f.read().split()
    except OSError:
        return False


def skip(name, why):
    """A check that cannot run here: one line, counted neither as passed nor failed."""
    sys.stdout.write(f'  SKIP {name}: {why}\n')
    sys.stdout.flush()


def tls_counts():
    """gregor_tls_connections_total from /metrics: {(listener, send): count}."""
    text = urllib.request.urlopen(f'http://{ADMIN}/metrics', timeout=10).read().decode()
    return {(m[1], m[2]): int(m[3]) for m in re.finditer(
        r'^gregor_tls_connections_total\{listener="([^"]*)",send="([^"]*)"\} (\d+)$', text, re.M)}


def addr(hp):
    h, p = hp.rsplit(':', 1)
    return h, int(p)


def ck_conf(extra=None):
    c = {'bootstrap.servers': SSL, 'security.protocol': 'ssl', 'ssl.ca.location': CA}
    c.update(extra or {})
    return c


def confluent_round_trip():
    from confluent_kafka import Consumer, Producer
    p = Producer(ck_conf())
    for i in range(200):
        p.produce('tls-ck', value=b'ck-%03d' % i)
    t.eq('confluent-kafka: 200 records acknowledged over SSL', 0, p.flush(30))
    c = Consumer(ck_conf({'group.id': 'tls-g', 'auto.offset.reset': 'earliest'}))
    c.subscribe(['tls-ck'])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    t.eq('confluent-kafka: a group consumer reads them back in order', [b'ck-%03d' % i for i in range(200)], got)


def kafka_python_round_trip():
    from kafka import KafkaConsumer, KafkaProducer
    p = KafkaProducer(bootstrap_servers=SSL, security_protocol='SSL', ssl_cafile=CA)
    for i in range(50):
        p.send('tls-kp', b'kp-%02d' % i)
    p.flush(30)
    p.close()
    c = KafkaConsumer('tls-kp', bootstrap_servers=SSL, security_protocol='SSL', ssl_cafile=CA,
                      auto_offset_reset='earliest', consumer_timeout_ms=10000)
    got = []
    for m in c:  # stops at 50 records, or after 10 s without one
        got.append(m.value)
        if len(got) == 50:
            break
    c.close()
    t.eq('kafka-python: 50 records produced and consumed over SSL', [b'kp-%02d' % i for i in range(50)], got)
    c = KafkaConsumer(bootstrap_servers=MTLS, security_protocol='SSL', ssl_cafile=CA,
                      ssl_certfile=os.path.join(CERTS, 'client.pem'), ssl_keyfile=os.path.join(CERTS, 'client.key'))
    t.check('kafka-python with a client certificate sees the topics on MTLS', 'tls-kp' in c.topics())
    c.close()


def metadata_ok():
    from confluent_kafka.admin import AdminClient
    md = AdminClient(ck_conf()).list_topics(timeout=10)
    return 1 in md.brokers


def closed_within(sock, seconds):
    """Whether the peer closes `sock` within `seconds` (recv returns b'' or the connection is reset)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b'':
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def plaintext_on_ssl_port():
    s = socket.create_connection(addr(SSL), timeout=5)
    body = struct.pack('>hhih', 18, 0, 7, 4) + b'test'  # ApiVersions v0, correlation 7, client id "test"
    s.sendall(struct.pack('>i', len(body)) + body)
    closed = closed_within(s, 10)
    s.close()
    t.check('a plaintext ApiVersions on the SSL port: the connection is closed, nothing answered', closed)
    t.check('and the broker serves SSL clients after it', metadata_ok())


def half_open_and_trickle():
    idle = socket.create_connection(addr(SSL), timeout=5)  # connected, never a ClientHello
    t0 = time.monotonic()
    t.check('a half-open TLS connection does not stop another client (Metadata over SSL)', metadata_ok())
    t.check('that client was answered while the half-open one waits (under 8 s)', time.monotonic() - t0 < 8)
    trickle = socket.create_connection(addr(SSL), timeout=5)
    started = time.monotonic()
    # a TLS 1.2 record header announcing 512 bytes of handshake, then one byte every 0.4 s: always active,
    # never a whole record
    hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]) + bytes(range(64))
    closed_at = None
    for b in hello:
        try:
            trickle.sendall(bytes([b]))
        except OSError:
            closed_at = time.monotonic()
            break
        if closed_within(trickle, 0.4):
            closed_at = time.monotonic()
            break
    t.check('a handshake trickled a byte at a time is closed (connections.max.idle.ms from the accept)',
            closed_at is not None, 'still open after %.1f s' % (time.monotonic() - started))
    if closed_at is not None:
        t.check('not before connections.max.idle.ms (4 s) has passed', closed_at - started >= 3.5,
                'closed after %.1f s' % (closed_at - started))
    t.check('the half-open connection is closed too', closed_within(idle, 10))
    trickle.close()
    idle.close()


def slow_reader_pipelined_fetches(topic='tls1', records=2000):
    """40 Fetches (answers of about 1 MB) sent at once over TLS, then read slowly, 8 KiB at a time: the broker's TLS
    writes stop at a full socket (kernel buffers hold a few MB) in every part of a response, the first, a
    middle and the last 16 KiB buffer, and go on; every answer must decode whole, in order (a lost or doubled byte shifts every later frame)."""
    import ssl
    ctx = ssl.create_default_context(cafile=CA)
    c = k.Conn(SSL)
    c.sock = ctx.wrap_socket(c.sock, server_hostname='127.0.0.1')
    n = 40
    sent = [c.send('Fetch', 12, {'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 0x7fffffff, 'isolation_level': 0,
                                  'session_id': 0, 'session_epoch': -1,
                                  'topics': [{'topic': topic, 'topic_id': k.ZERO_UUID,
                                              'partitions': [{'partition': 0, 'fetch_offset': 57 * i % records,
                                                              'current_leader_epoch': -1, 'last_fetched_epoch': -1,
                                                              'partition_max_bytes': 1000000}]}]})
            for i in range(n)]
    time.sleep(1.0)
    ok = 0
    total = 0
    real_recv = c.sock.recv

    def slow_recv(size):
        return real_recv(min(size, 8192))
    c.sock.recv = slow_recv
    for corr in sent:
        _, body = c.recv('Fetch', 12, corr, timeout=30)
        p = body['responses'][0]['partitions'][0]
        recs = p.get('records') or b''
        if p['error_code'] == 0 and len(recs) > 0:
            ok += 1
            total += len(recs)
    c.close()
    t.eq('40 pipelined Fetches (about 1 MB each) read slowly over TLS: every answer whole, in order',
         n, ok)


def big_fetch_over_tls():
    """8 MiB of incompressible 64 KiB records (seeded) in a topic of 1 MiB segments, consumed over SSL: every Fetch
    answer is several 16 KiB TLS buffers (or SSL_sendfile calls) long and crosses segments; the bytes must come
    back exact. The producer's and consumer's connections count under the send path the kernel allows."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(ck_conf())  # held until the future resolves (a dropped client cancels it)
    admin.create_topics([NewTopic('tls-big', 1, 1, config={'segment.bytes': '1048576'})])['tls-big'].result(20)
    before = tls_counts()
    rnd = random.Random(23)
    vals = [rnd.randbytes(64 * 1024) for _ in range(128)]
    p = Producer(ck_conf({'compression.type': 'none', 'linger.ms': 5, 'batch.size': 200000}))
    for v in vals:
        p.produce('tls-big', v)
    t.eq('8 MiB in 128 records acknowledged over SSL', 0, p.flush(60))
    c = Consumer(ck_conf({'group.id': 'tls-big-g', 'enable.auto.commit': False}))
    c.assign([TopicPartition('tls-big', 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(vals) and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    segs = len(glob.glob(os.path.join(DATA, 'tls-big-0', '*.log')))
    t.check('the topic spans many segments (segment.bytes=1 MiB)', segs >= 6, f'{segs} segments')
    t.eq('8 MiB fetched over SSL across the segments: byte-exact (sha256 of the 128 values)',
         (len(vals), hashlib.sha256(b''.join(vals)).hexdigest()), (len(got), hashlib.sha256(b''.join(got)).hexdigest()))
    after = tls_counts()
    rose = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    if ulp_tls():
        t.check('kTLS: the producer and consumer connections send with SSL_sendfile (send="ktls" rose)',
                rose.get(('SSL', 'ktls'), 0) >= 2, repr(rose))
        t.eq('kTLS: none of them fell back to pread + SSL_write', 0, rose.get(('SSL', 'userspace'), 0))
    else:
        skip('kTLS send path (byte-exact Fetch with SSL_sendfile, send="ktls")',
             'this kernel has no tls ULP (/proc/sys/net/ipv4/tcp_available_ulp has no "tls")')
        t.check('no tls ULP: the producer and consumer connections count as send="userspace"',
                rose.get(('SSL', 'userspace'), 0) >= 2, repr(rose))
        t.eq('no tls ULP: no connection counts as send="ktls"', 0, rose.get(('SSL', 'ktls'), 0))


def send_paths_at_the_end():
    """Every TLS connection of the run, on each SSL listener, counted under the path it used."""
    counts = tls_counts()
    t.eq('gregor_tls_connections_total has both send paths for the three SSL listeners',
         sorted((li, sp) for li in ('MTLS', 'REQ', 'SSL') for sp in ('ktls', 'userspace')), sorted(counts))
    total = sum(counts.values())
    t.check('TLS connections were counted', total >= 10, repr(counts))
    if not ulp_tls():
        t.eq('no tls ULP here: every TLS connection counts as userspace, none as ktls', 0,
             sum(v for (_, sp), v in counts.items() if sp == 'ktls'))


def many_small_records():
    """2,000 ApiVersions requests, each its own TLS record, written back to back before reading: the broker's
    read-ahead takes many records from the socket in one read, so records wait inside the TLS session with the
    socket drained; the broker must come back to them itself (no socket event will). Every answer, in order."""
    import ssl
    ctx = ssl.create_default_context(cafile=CA)
    c = k.Conn(SSL)
    c.sock = ctx.wrap_socket(c.sock, server_hostname='127.0.0.1')
    n = 2000
    sent = [c.send('ApiVersions', 0, {}) for _ in range(n)]
    ok = 0
    for corr in sent:
        _, body = c.recv('ApiVersions', 0, corr, timeout=10)
        ok += body['error_code'] == 0
    c.close()
    t.eq('2,000 pipelined requests in 2,000 TLS records: every answer, in order', n, ok)


if os.environ.get('MODE') == 'emulate':
    # run.sh's broker with GREGOR_TEST_KTLS_EMULATE=1: the same Fetch checks through the kTLS path's calls
    t.run('big fetch over TLS (kTLS path emulated)', big_fetch_over_tls)
    t.run('slow reader, pipelined fetches (kTLS path emulated)', slow_reader_pipelined_fetches, 'tls-big', 120)
    t.finish()
t.run('big fetch over TLS', big_fetch_over_tls)
t.run('slow reader, pipelined fetches', slow_reader_pipelined_fetches)
t.run('many small TLS records pipelined', many_small_records)
t.run('confluent-kafka over SSL', confluent_round_trip)
t.run('kafka-python over SSL', kafka_python_round_trip)
t.run('plaintext request on the SSL port', plaintext_on_ssl_port)
t.run('half-open and trickled handshakes', half_open_and_trickle)
t.run('send paths at the end', send_paths_at_the_end)
t.finish()
