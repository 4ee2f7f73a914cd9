"""sasl_checks.py: the Python part of compat-tests/sasl/run.sh (SASL_PLAINTEXT address SP, SASL_SSL address SS,
PLAINTEXT address PT, the CERTS directory and REAUTH_MS, the broker's connections.max.reauth.ms, in the environment).
Raw-protocol checks of the SASL layer (server/sasl.c) against Kafka's SaslServerAuthenticator: SaslHandshake
v0 with raw tokens (pre-KIP-152 framing), v1 + SaslAuthenticate v0-v2, the failures (wrong password, unknown
user, unknown mechanism, requests before authentication, an oversized frame), the delay of a failure's
answer, KIP-368 session lifetime, expiry and in-band re-authentication; then confluent-kafka and kafka-python
round trips over SASL_PLAINTEXT and SASL_SSL."""
import os
import socket
import ssl
import struct
import time

import kafka_raw as k
import testkit as t

SP = os.environ['SP']
SS = os.environ['SS']
PT = os.environ['PT']
CERTS = os.environ['CERTS']
REAUTH_MS = int(os.environ['REAUTH_MS'])
CA = os.path.join(CERTS, 'ca.pem')
GENERIC = 'Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN'
BAD = 'Authentication failed: Invalid username or password'


def plain(user, pw, authzid=''):
    return authzid.encode() + b'\0' + user.encode() + b'\0' + pw.encode()


def handshake(c, mech='PLAIN', version=1):
    return c.request('SaslHandshake', version, {'mechanism': mech})


def authenticate(c, token, version=2):
    return c.request('SaslAuthenticate', version, {'auth_bytes': token})


def login(c, user='alice', pw='alice-secret', version=2):
    r = handshake(c)
    assert r['error_code'] == 0, r
    return authenticate(c, plain(user, pw), version)


def v1_success():
    with k.Conn(SP) as c:
        av = c.request('ApiVersions', 3, {'client_software_name': 'gregor-test', 'client_software_version': '1'})
        keys = {a['api_key']: (a['min_version'], a['max_version']) for a in av['api_keys']}
        t.eq('ApiVersions before authentication lists SaslHandshake v0-1 and SaslAuthenticate v0-2',
             ((0, 1), (0, 2)), (keys.get(17), keys.get(36)))
        r = handshake(c)
        t.eq('SaslHandshake v1 PLAIN: no error, the enabled list', (0, ['PLAIN']), (r['error_code'], r['mechanisms']))
        r = authenticate(c, plain('alice', 'alice-secret'))
        # error_message: Kafka's generated default for a string without one is "" (not null), and success sets none
        t.eq('SaslAuthenticate v2 right password: no error, empty token, session lifetime = connections.max.reauth.ms',
             (0, '', b'', REAUTH_MS), (r['error_code'], r['error_message'], r['auth_bytes'], r['session_lifetime_ms']))
        md = c.request('Metadata', 12, {'topics': None, 'allow_auto_topic_creation': False})
        t.eq('then Metadata is served', 1, len(md['brokers']))
        r = authenticate(c, plain('alice', 'alice-secret'))
        t.eq('SaslAuthenticate after authentication: ILLEGAL_SASL_STATE, connection kept', 34, r['error_code'])
        t.eq('and the connection still serves', 1, len(c.request('Metadata', 12, {'topics': None})['brokers']))


def api_versions_fallback():
    """pitfalls C03: ApiVersions at a version the broker does not know, before authentication: a v0 answer
    with UNSUPPORTED_VERSION (35) and the ApiVersions entry, the connection kept, then the usual sequence."""
    with k.Conn(SP) as c:
        c.send_raw(k.frame(k.request_header(18, 99, 7) + b'\0' * 4))
        data = c.recv_frame()
        corr, err = struct.unpack('>ih', data[:6])
        t.eq('ApiVersions v99 before authentication: v0 answer with UNSUPPORTED_VERSION', (7, 35), (corr, err))
        av = c.request('ApiVersions', 3, {'client_software_name': 'gregor-test', 'client_software_version': '1'})
        t.eq('  the connection stays open: ApiVersions v3 answered', 0, av['error_code'])
        t.eq('  then PLAIN authenticates', 0, login(c)['error_code'])


def v0_raw_framing():
    with k.Conn(SP) as c:
        r = handshake(c, version=0)
        t.eq('SaslHandshake v0: no error', 0, r['error_code'])
        c.send_raw(k.frame(plain('alice', 'alice-secret')))
        t.eq('raw PLAIN token after v0: an empty raw token back (size 0)', b'', c.recv_frame_raw())
        t.eq('then Metadata is served (v0 framing)', 1, len(c.request('Metadata', 12, {'topics': None})['brokers']))
    with k.Conn(SP) as c:
        handshake(c, version=0)
        t0 = time.monotonic()
        c.send_raw(k.frame(plain('alice', 'wrong')))
        t.check('raw token with a wrong password: closed, nothing sent', c.closed_by_peer(5))
        t.check('  after connection.failed.authentication.delay.ms (>= 0.09 s)', time.monotonic() - t0 >= 0.09)


def failures():
    for name, tok, msg in [('wrong password', plain('alice', 'nope'), BAD),
                           ('unknown user', plain('mallory', 'alice-secret'), BAD),
                           ('empty password', plain('alice', ''), GENERIC),
                           ('authzid of another user', plain('alice', 'alice-secret', 'admin'),
                            'Authentication failed: Client requested an authorization id that is different from username')]:
        with k.Conn(SP) as c:
            handshake(c)
            t0 = time.monotonic()
            r = authenticate(c, tok)
            took = time.monotonic() - t0
            t.eq(f'{name}: SASL_AUTHENTICATION_FAILED with Kafka\'s message', (58, msg),
                 (r['error_code'], r['error_message']))
            t.check(f'{name}: answered after the 100 ms delay (took {took:.3f} s)', took >= 0.09)
            t.check(f'{name}: then the connection is closed', c.closed_by_peer(5))
    with k.Conn(SP) as c:
        handshake(c)
        r = authenticate(c, plain('alice', 'alice-secret', 'alice'))
        t.eq('authzid equal to the user name: accepted', 0, r['error_code'])
    with k.Conn(SP) as c:
        r = handshake(c, 'SCRAM-SHA-256')
        t.eq('unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list', (33, ['PLAIN']),
             (r['error_code'], r['mechanisms']))
        t.check('unknown mechanism: then the connection is closed', c.closed_by_peer(5))
    with k.Conn(SP) as c:
        c.send('Metadata', 12, {'topics': None})
        t.check('Metadata before authenticating: closed without an answer', c.closed_by_peer(5))
    with k.Conn(SP) as c:
        handshake(c)
        c.send('Metadata', 12, {'topics': None})
        t.check('Metadata between SaslHandshake and SaslAuthenticate: closed', c.closed_by_peer(5))
    with k.Conn(SP) as c:
        c.send_raw(struct.pack('>i', 524289))
        t.check('a frame announcing 524289 bytes (sasl.server.max.receive.size + 1) before authentication: closed '
                'before its bytes are sent', c.closed_by_peer(5))
    with k.Conn(SP) as c:
        handshake(c, version=0)
        c.send_raw(struct.pack('>i', 600000))
        t.check('an oversized raw token after SaslHandshake v0: closed', c.closed_by_peer(5))
    with k.Conn(PT) as c:
        r = handshake(c)
        t.eq('SaslHandshake on the PLAINTEXT listener: ILLEGAL_SASL_STATE (KafkaApis)', 34, r['error_code'])
    with k.Conn(SP) as c:
        t.eq('after all that the SASL listener still authenticates', 0, login(c)['error_code'])


def reauth():
    with k.Conn(SP) as c:
        r = login(c, version=1)
        t.eq('SaslAuthenticate v1: session_lifetime_ms', REAUTH_MS, r['session_lifetime_ms'])
        r = login(c, version=1)
        t.eq('in-band re-authentication (SaslHandshake + SaslAuthenticate again) succeeds', 0, r['error_code'])
        t.eq('and the connection keeps serving', 1, len(c.request('Metadata', 12, {'topics': None})['brokers']))
        time.sleep(REAUTH_MS / 1000.0 + 0.3)
        r = login(c, version=1)
        t.eq('re-authentication after the session expired is still taken (SaslHandshake is let through)', 0,
             r['error_code'])
        t.eq('and the renewed session serves', 1, len(c.request('Metadata', 12, {'topics': None})['brokers']))
    with k.Conn(SP) as c:
        login(c, version=1)
        r = login(c, 'admin', 'admin-secret', version=1)
        t.eq('re-authentication as another user: SASL_AUTHENTICATION_FAILED, Kafka\'s message',
             (58, 'Cannot change principals during re-authentication from User.alice: User.admin'),
             (r['error_code'], r['error_message']))
        t.check('  and the connection is closed', c.closed_by_peer(5))
    with k.Conn(SP) as c:
        login(c, version=1)
        time.sleep(REAUTH_MS / 1000.0 + 0.3)
        c.send('Metadata', 12, {'topics': None})
        t.check('a request after the session expired without re-authentication: closed', c.closed_by_peer(5))


def confluent_reauth():
    """librdkafka (confluent-kafka's, KIP-368 since librdkafka 2.2) re-authenticates in band: a producer
    sending for three session lifetimes loses nothing and the broker closes no expired session."""
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': SP, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': 'PLAIN',
                  'sasl.username': 'alice', 'sasl.password': 'alice-secret'})
    errs = []
    n = 0
    end = time.monotonic() + 3 * REAUTH_MS / 1000.0
    while time.monotonic() < end:
        p.produce('sasl-reauth', value=b'r-%d' % n, on_delivery=lambda e, m: e and errs.append(str(e)))
        n += 1
        p.poll(0.1)
    t.eq(f'confluent-kafka producing for {3 * REAUTH_MS} ms (3 sessions): all {n} acknowledged', (0, []),
         (p.flush(30), errs))


class TlsConn(k.Conn):
    def __init__(self, broker, timeout=10.0):
        host, port = broker.rsplit(':', 1)
        ctx = ssl.create_default_context(cafile=CA)
        raw = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        self.corr = 0
        self.buf = b''


def sasl_ssl_raw():
    with TlsConn(SS) as c:
        t.eq('SASL_SSL: PLAIN over TLS authenticates', 0, login(c)['error_code'])
        t.eq('SASL_SSL: then Metadata is served', 1, len(c.request('Metadata', 12, {'topics': None})['brokers']))
    with TlsConn(SS) as c:
        handshake(c)
        r = authenticate(c, plain('alice', 'bad'))
        t.eq('SASL_SSL: a wrong password is refused', 58, r['error_code'])


def confluent(addr, proto, extra, topic):
    from confluent_kafka import Consumer, Producer
    conf = {'bootstrap.servers': addr, 'security.protocol': proto, 'sasl.mechanism': 'PLAIN',
            'sasl.username': 'alice', 'sasl.password': 'alice-secret', 'log_level': 0}
    conf.update(extra)
    p = Producer(conf)
    for i in range(100):
        p.produce(topic, value=b'ck-%03d' % i)
    t.eq(f'confluent-kafka: 100 records acknowledged over {proto}', 0, p.flush(30))
    c = Consumer(dict(conf, **{'group.id': 'sasl-' + topic, 'auto.offset.reset': 'earliest'}))
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    t.eq(f'confluent-kafka: consumes them over {proto} (a consumer group too)', [b'ck-%03d' % i for i in range(100)], got)
    bad = Producer(dict(conf, **{'sasl.password': 'wrong'}))
    bad.produce(topic, value=b'x')
    t.check(f'confluent-kafka with a wrong password over {proto}: nothing acknowledged', bad.flush(3) == 1)


def kafka_python(addr, proto, topic):
    from kafka import KafkaConsumer, KafkaProducer
    kw = {'bootstrap_servers': addr, 'security_protocol': proto, 'sasl_mechanism': 'PLAIN',
          'sasl_plain_username': 'alice', 'sasl_plain_password': 'alice-secret'}
    if proto == 'SASL_SSL':
        kw['ssl_cafile'] = CA
    p = KafkaProducer(**kw)
    for i in range(20):
        p.send(topic, b'kp-%02d' % i)
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset='earliest', consumer_timeout_ms=8000, **kw)
    got = [m.value for m in c]
    c.close()
    t.eq(f'kafka-python: produce + consume round trip over {proto}', [b'kp-%02d' % i for i in range(20)], got)


def recv_frame_raw(self, timeout=10.0):
    self._fill(4, timeout)
    size = struct.unpack('>i', self.buf[:4])[0]
    self._fill(4 + size, timeout)
    data, self.buf = self.buf[4:4 + size], self.buf[4 + size:]
    return data


k.Conn.recv_frame_raw = recv_frame_raw
t.section('SaslHandshake v1 + SaslAuthenticate', v1_success)
t.section('ApiVersions fallback before SASL (pitfalls C03)', api_versions_fallback)
t.section('SaslHandshake v0 raw tokens', v0_raw_framing)
t.section('failures', failures)
t.section('KIP-368 re-authentication', reauth)
t.section('SASL_SSL raw', sasl_ssl_raw)
t.section('confluent-kafka re-authentication', confluent_reauth)
t.section('confluent-kafka SASL_PLAINTEXT', confluent, SP, 'SASL_PLAINTEXT', {}, 'sasl-ck1')
t.section('confluent-kafka SASL_SSL', confluent, SS, 'SASL_SSL', {'ssl.ca.location': CA}, 'sasl-ck2')
t.section('kafka-python SASL_PLAINTEXT', kafka_python, SP, 'SASL_PLAINTEXT', 'sasl-kp1')
t.section('kafka-python SASL_SSL', kafka_python, SS, 'SASL_SSL', 'sasl-kp2')
t.finish()
