"""oauth_checks.py: the Python part of compat-tests/oauth/run.sh (UN: a SASL_PLAINTEXT listener validating
unsecured JWS as Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler; SG: one validating signed JWTs
as Kafka's OAuthBearerValidatorCallbackHandler against DIR/jwks.json, audience "kafka", issuer ISS; DIR holds
the RSA and EC private keys made by run.sh; REAUTH_MS is the broker's connections.max.reauth.ms).
Raw-protocol checks of OAuthBearerSaslServer's answers (the JSON challenge, the \\x01 answer and
SASL_AUTHENTICATION_FAILED with the JSON, the generic message for a malformed response, the session lifetime
bounded by exp and the connection closed after it); confluent-kafka with its built-in unsecured token
(sasl.oauthbearer.config=principal=alice) and with RS256/ES256 tokens signed here through
oauthbearer_token_refresh_cb, producing across several token lifetimes (KIP-368 re-authentication)."""
import base64
import json
import os
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

import kafka_raw as k
import testkit as t

UN = os.environ['UN']
SG = os.environ['SG']
DIR = os.environ['DIR']
ISS = os.environ['ISS']
REAUTH_MS = int(os.environ['REAUTH_MS'])
GENERIC = 'Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER'
INVALID = '{"status":"invalid_token"}'

with open(os.path.join(DIR, 'rsa.pem'), 'rb') as f:
    RSA = serialization.load_pem_private_key(f.read(), None)
with open(os.path.join(DIR, 'ec.pem'), 'rb') as f:
    EC = serialization.load_pem_private_key(f.read(), None)
with open(os.path.join(DIR, 'other.pem'), 'rb') as f:
    OTHER = serialization.load_pem_private_key(f.read(), None)


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b'=').decode()


def js(o):
    return b64(json.dumps(o).encode())


def unsecured(claims):
    return js({'alg': 'none'}) + '.' + js(claims) + '.'


def signed(claims, alg='RS256', kid='rsa1', key=None):
    head = js({'alg': alg, 'kid': kid, 'typ': 'JWT'}) + '.' + js(claims)
    if alg == 'ES256':
        r, s = decode_dss_signature((key or EC).sign(head.encode(), ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, 'big') + s.to_bytes(32, 'big')
    else:
        sig = (key or RSA).sign(head.encode(), padding.PKCS1v15(), hashes.SHA256())
    return head + '.' + b64(sig)


def claims(sub='alice', life=3600, **kw):
    now = int(time.time())
    c = {'sub': sub, 'iat': now, 'exp': now + life, 'aud': 'kafka', 'iss': ISS}
    c.update(kw)
    return c


def initial(token, authzid=''):
    return b'n,' + (b'a=' + authzid.encode() if authzid else b'') + b',\x01auth=Bearer ' + token.encode() + b'\x01\x01'


def start(c):
    r = c.request('SaslHandshake', 1, {'mechanism': 'OAUTHBEARER'})
    assert r['error_code'] == 0, r
    return r


def auth(c, token_bytes, version=2):
    return c.request('SaslAuthenticate', version, {'auth_bytes': token_bytes})


def refused(name, addr, token):
    """Kafka's OAuthBearerSaslServer: the JSON error as a challenge (no error), then the client's \\x01 gets
    SASL_AUTHENTICATION_FAILED with the JSON as the message, and the connection is closed."""
    with k.Conn(addr) as c:
        start(c)
        r = auth(c, initial(token))
        t.eq(f'{name}: the challenge {INVALID}, no error yet', (0, INVALID.encode()),
             (r['error_code'], r['auth_bytes']))
        r = auth(c, b'\x01')
        t.eq(f'{name}: after \\x01, SASL_AUTHENTICATION_FAILED with {INVALID}', (58, INVALID),
             (r['error_code'], r['error_message']))
        t.check(f'{name}: connection closed', c.closed_by_peer(5))


def raw():
    with k.Conn(UN) as c:
        r = start(c)
        t.eq('SaslHandshake OAUTHBEARER on UN: the enabled list', ['OAUTHBEARER'], r['mechanisms'])
        r = auth(c, initial(unsecured({'sub': 'alice', 'exp': int(time.time()) + 3600})))
        t.eq('unsecured JWS for alice: no error, empty token, session lifetime = connections.max.reauth.ms',
             (0, b'', REAUTH_MS), (r['error_code'], r['auth_bytes'], r['session_lifetime_ms']))
        t.eq('then Metadata is served', 1, len(c.request('Metadata', 12, {'topics': None})['brokers']))
    with k.Conn(UN) as c:
        start(c)
        r = auth(c, initial(unsecured({'sub': 'alice', 'exp': time.time() + 3})))
        life = r['session_lifetime_ms']
        # 2 ms for the broker's rounding of exp to ms and its millisecond clock against Python's float one
        t.check(f'a token expiring in 3 s: session lifetime bounded by exp (0 < {life} <= 3000 + 2)',
                r['error_code'] == 0 and 0 < life <= 3002)
        time.sleep(life / 1000.0 + 0.3)
        c.send('Metadata', 12, {'topics': None})
        t.check('a request after the token expired without re-authentication: closed', c.closed_by_peer(5))
    with k.Conn(UN) as c:
        start(c)
        r = auth(c, initial(unsecured({'sub': 'alice', 'exp': time.time() + 2})))
        t.eq('KIP-368 with OAUTHBEARER: first token (2 s) taken', 0, r['error_code'])
        start(c)
        r = auth(c, initial(unsecured({'sub': 'alice', 'exp': int(time.time()) + 3600})))
        t.check('in-band re-authentication with a new token (1 h): taken, session = connections.max.reauth.ms',
                r['error_code'] == 0 and r['session_lifetime_ms'] == REAUTH_MS)
        time.sleep(2.3)
        t.eq('past the first token\'s exp the connection still serves (the new token bounds it)', 1,
             len(c.request('Metadata', 12, {'topics': None})['brokers']))
        start(c)
        r = auth(c, initial(unsecured({'sub': 'bob', 'exp': int(time.time()) + 3600})))
        t.eq('re-authentication with a token for another principal: Kafka\'s message',
             (58, 'Cannot change principals during re-authentication from User.alice: User.bob'),
             (r['error_code'], r['error_message']))
    refused('unsecured: expired token', UN, unsecured({'sub': 'alice', 'exp': int(time.time()) - 10}))
    refused('unsecured: no exp', UN, unsecured({'sub': 'alice'}))
    refused('unsecured: a signed token on the unsecured listener', UN, signed(claims()))
    with k.Conn(UN) as c:
        start(c)
        r = auth(c, b'n,,\x01auth=Basic abc\x01\x01')
        t.eq('a scheme other than Bearer: the generic message', (58, GENERIC), (r['error_code'], r['error_message']))
        t.check('  closed', c.closed_by_peer(5))
    with k.Conn(UN) as c:
        start(c)
        r = auth(c, b'\x00\xff garbage')
        t.eq('garbage: the generic message', (58, GENERIC), (r['error_code'], r['error_message']))
    with k.Conn(UN) as c:
        start(c)
        r = auth(c, initial(unsecured({'sub': 'alice', 'exp': int(time.time()) + 60}), authzid='bob'))
        t.eq("an authzid other than the token's principal: Kafka's message",
             (58, "Authentication failed: Client requested an authorization id (bob) that is different from the "
                  "token's principal name (alice)"), (r['error_code'], r['error_message']))
    # signed
    with k.Conn(SG) as c:
        start(c)
        r = auth(c, initial(signed(claims(life=20))))
        life = r['session_lifetime_ms']
        t.check(f'RS256 token on SG: authenticated, session bounded by exp (0 < {life} <= 20000)',
                r['error_code'] == 0 and 0 < life <= 20000)
    with k.Conn(SG) as c:
        start(c)
        r = auth(c, initial(signed(claims(), alg='ES256', kid='ec1')))
        t.eq('ES256 token on SG: authenticated', 0, r['error_code'])
    refused('signed: expired (beyond 30 s of skew)', SG, signed(claims(life=-40)))
    refused('signed: wrong audience', SG, signed(claims(aud='other')))
    refused('signed: wrong issuer', SG, signed(claims(iss='https://evil.example')))
    refused('signed: unknown kid', SG, signed(claims(), kid='nope'))
    refused('signed: signed by a key not in the JWKS', SG, signed(claims(), key=OTHER))
    refused('signed: an unsecured token', SG, unsecured(claims()))
    tok = signed(claims())
    refused('signed: a flipped signature byte', SG, tok[:-3] + ('A' if tok[-3] != 'A' else 'B') + tok[-2:])


def confluent_unsecured():
    from confluent_kafka import Consumer, Producer
    conf = {'bootstrap.servers': UN, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanisms': 'OAUTHBEARER',
            'sasl.oauthbearer.config': 'principal=alice', 'enable.sasl.oauthbearer.unsecure.jwt': True,
            'log_level': 0}
    p = Producer(conf)
    for i in range(100):
        p.produce('oauth-un', value=b'un-%03d' % i)
    t.eq('confluent-kafka, unsecured token (principal=alice): 100 records acknowledged', 0, p.flush(30))
    c = Consumer(dict(conf, **{'group.id': 'oauth-un', 'auto.offset.reset': 'earliest'}))
    c.subscribe(['oauth-un'])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    t.eq('confluent-kafka consumes them (a consumer group too)', [b'un-%03d' % i for i in range(100)], got)


def confluent_signed(alg, kid, life):
    """A token the test signs, handed over by oauthbearer_token_refresh_cb; each lives `life` s, so producing
    for 2.5 lifetimes needs librdkafka's refresh and re-authentication (KIP-368, session bounded by exp)."""
    from confluent_kafka import Producer
    calls = []

    def refresh(_cfg):
        c = claims(sub='svc-' + alg.lower(), life=life)
        calls.append(c['exp'])
        return signed(c, alg=alg, kid=kid), float(c['exp']), 'svc-' + alg.lower(), {}

    errs = []
    p = Producer({'bootstrap.servers': SG, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanisms': 'OAUTHBEARER',
                  'oauth_cb': refresh, 'log_level': 0})
    n = 0
    end = time.monotonic() + 2.5 * life
    while time.monotonic() < end:
        p.produce('oauth-' + alg, value=b'%d' % n, on_delivery=lambda e, m: e and errs.append(str(e)))
        n += 1
        p.poll(0.1)
    t.eq(f'confluent-kafka, {alg} tokens signed by the test ({life} s each), producing for {2.5 * life} s: all {n} '
         'acknowledged', (0, []), (p.flush(30), errs))
    t.check(f'  and librdkafka fetched a new token as each one neared exp ({len(calls)} tokens)', len(calls) >= 3)
    bad = Producer({'bootstrap.servers': SG, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanisms': 'OAUTHBEARER',
                    'oauth_cb': lambda _c: (signed(claims(aud='nope'), alg=alg, kid=kid), time.time() + 60, 'x', {}),
                    'log_level': 0})
    bad.produce('oauth-' + alg, value=b'x')
    t.check(f'confluent-kafka with a {alg} token for another audience: nothing acknowledged', bad.flush(3) == 1)


t.section('raw protocol', raw)
t.section('confluent-kafka unsecured', confluent_unsecured)
t.section('confluent-kafka RS256', confluent_signed, 'RS256', 'rsa1', 4)
t.section('confluent-kafka ES256', confluent_signed, 'ES256', 'ec1', 4)
t.finish()
