"""jwks_checks.py: sasl.oauthbearer.jwks.endpoint.url over HTTPS (issue #23, Kafka's RefreshingHttpsJwks).
A Python HTTPS server on a free loopback port, with a certificate from a private CA made here, serves a JWKS
the test rewrites; a broker started here (GREGOR_BIN, one SASL_PLAINTEXT listener validating signed JWTs as
Kafka's OAuthBearerValidatorCallbackHandler) trusts that CA through the JAAS options ssl.truststore.type=PEM
and ssl.truststore.location. Checks: a token with kid A logs in; the JWKS rotated to kid B: a kid-B token is
refused at first and asks for a refresh, then logs in; kid A is refused after it; a malformed body, an
oversized body (over 1 MiB) and the endpoint down each leave kid B working and are logged as a failed refresh;
a kid asks at most once per 60 s; at start, an endpoint that is down, or whose CA is not trusted, or a JKS
truststore stops the broker with exit 2; a plain http:// endpoint (Kafka allows it) serves keys, and with
refresh.ms=400 is fetched on schedule with no token asking. Prints RESULT lines for compat-tests/lib/broker.sh's run_py."""
import base64
import datetime
import http.server
import ipaddress
import json
import os
import re
import ssl
import subprocess
import tempfile
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

import kafka_raw as k
import testkit as t

GREGOR = os.environ['GREGOR_BIN']
MOD = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule'
HANDLER = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler'
DIR = tempfile.mkdtemp(prefix='gregor-jwks.')


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b'=').decode()


def uint(i):
    return b64(i.to_bytes((i.bit_length() + 7) // 8, 'big'))


KEYS = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048) for kid in ('A', 'B')}


def jwks(*kids):
    out = []
    for kid in kids:
        n = KEYS[kid].public_key().public_numbers()
        out.append({'kty': 'RSA', 'kid': kid, 'use': 'sig', 'alg': 'RS256', 'n': uint(n.n), 'e': uint(n.e)})
    return json.dumps({'keys': out}).encode()


def token(kid, sub='svc'):
    now = int(time.time())
    head = b64(json.dumps({'alg': 'RS256', 'kid': kid, 'typ': 'JWT'}).encode()) + '.' + \
        b64(json.dumps({'sub': sub, 'iat': now, 'exp': now + 600}).encode())
    key = KEYS.get(kid, KEYS['A'])
    return head + '.' + b64(key.sign(head.encode(), padding.PKCS1v15(), hashes.SHA256()))


def make_ca():
    """A private CA and a server certificate for 127.0.0.1 signed by it (EC P-256, valid one day)."""
    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, issuer, pub, signer, ca, san=None):
        b = x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(pub) \
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5)) \
            .not_valid_after(now + datetime.timedelta(days=1)) \
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return b.sign(signer, hashes.SHA256())

    cak = ec.generate_private_key(ec.SECP256R1())
    caname = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'gregor-test-ca')])
    cac = cert(caname, caname, cak.public_key(), cak, True)
    sk = ec.generate_private_key(ec.SECP256R1())
    sc = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, '127.0.0.1')]), caname, sk.public_key(), cak,
              False, [x509.IPAddress(ipaddress.ip_address('127.0.0.1')), x509.DNSName('localhost')])
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)
    with open(f'{DIR}/ca.pem', 'wb') as f:
        f.write(pem(cac))
    with open(f'{DIR}/server.pem', 'wb') as f:
        f.write(pem(sc) + sk.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))


class State:
    body = jwks('A')
    hits = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = State.body  # read before counting: once hits has moved, this request's body is fixed
        State.hits += 1
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the broker hung up on an oversized body, as it should
            pass

    def log_message(self, *a):
        pass


def serve(tls=True):
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(f'{DIR}/server.pem')
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f'{"https" if tls else "http"}://127.0.0.1:{srv.server_address[1]}/jwks.json'


def broker_args(url, d, jaas_extra):
    return [GREGOR, '--override', 'listeners=SG://127.0.0.1:0',
            '--override', 'listener.security.protocol.map=SG:SASL_PLAINTEXT',
            '--override', f'gregor.listener.file={d}/listener',
            '--override', 'gregor.admin.listeners=http://127.0.0.1:0', '--override', f'log.dirs={d}/data',
            '--override', 'sasl.enabled.mechanisms=OAUTHBEARER',
            '--override', f'listener.name.sg.oauthbearer.sasl.jaas.config={MOD} required{jaas_extra};',
            '--override', f'listener.name.sg.oauthbearer.sasl.server.callback.handler.class={HANDLER}',
            '--override', f'sasl.oauthbearer.jwks.endpoint.url={url}',
            '--override', f'org.apache.kafka.sasl.oauthbearer.allowed.urls={url}',
            '--override', 'sasl.oauthbearer.jwks.endpoint.retry.backoff.ms=50',
            '--override', 'sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms=300']


TRUST = f' ssl.truststore.type="PEM" ssl.truststore.location="{DIR}/ca.pem"'


def login(addr, tok):
    """True when SaslAuthenticate accepts the token (no error, empty final token); False on the JSON challenge."""
    with k.Conn(addr) as c:
        r = c.request('SaslHandshake', 1, {'mechanism': 'OAUTHBEARER'})
        assert r['error_code'] == 0, r
        r = c.request('SaslAuthenticate', 2, {'auth_bytes': b'n,,\x01auth=Bearer ' + tok.encode() + b'\x01\x01'})
        return r['error_code'] == 0 and r['auth_bytes'] in (b'', None)


def until(fn, secs=8.0):
    end = time.time() + secs
    while time.time() < end:
        if fn():
            return True
        time.sleep(0.1)
    return False


def log_has(path, pattern, secs=8.0):
    return until(lambda: re.search(pattern, open(path, errors='replace').read()) is not None, secs)


def main():
    make_ca()
    srv, url = serve()
    d = tempfile.mkdtemp(prefix='gregor-jwks-broker.', dir=DIR)
    logp = f'{d}/broker.log'
    p = subprocess.Popen(broker_args(url, d, TRUST), stdout=open(logp, 'wb'), stderr=subprocess.STDOUT)
    try:
        if not until(lambda: os.path.exists(f'{d}/listener') and os.path.getsize(f'{d}/listener') > 0, 30):
            t.fail('broker with an https JWKS endpoint started', open(logp, errors='replace').read()[-600:])
            return
        addr = open(f'{d}/listener').readline().strip().split()[-1]
        t.check('the JWKS was fetched at start over HTTPS with the private CA (1 request)', State.hits == 1,
                f'{State.hits} requests')
        t.check('a token with kid A logs in', login(addr, token('A')))
        hits = State.hits
        t.check('a token with an unknown kid signed by A is refused', not login(addr, token('Z')))
        # Z's miss asks for a refresh, served in the background: let it take A before the set changes to B
        t.check("kid Z's miss asked for a refresh (served the set with A)", until(lambda: State.hits > hits))
        State.body = jwks('B')
        hits = State.hits
        t.check('kid B before any refresh: refused (the set still holds A only)', not login(addr, token('B')))
        t.check('kid B logs in once the on-demand refresh it asked for has run', until(lambda: login(addr, token('B'))))
        t.check('the on-demand refresh fetched the JWKS again', State.hits > hits, f'{State.hits} vs {hits}')
        hits = State.hits
        t.check('kid A refused after the refresh removed it', not login(addr, token('A')))
        t.check("kid A's first miss asked for a refresh", until(lambda: State.hits > hits))
        time.sleep(0.3)
        hits = State.hits
        t.check('kid A refused again', not login(addr, token('A')))
        time.sleep(0.5)
        t.eq('kid A again within 60 s: no second refresh (RefreshingHttpsJwks: once per kid per 60 s)', hits,
             State.hits)
        # a malformed body, then an oversized one: each refresh fails (retried, then given up), B keeps working
        for name, body, kid, pat in (
                ('a malformed JWKS', b'{"keys": [ this is not json', 'C', r'encountered an error \(the response is not a JWKS'),
                ('a JWKS over 1 MiB', b'{"keys": [], "pad": "' + b'x' * (1024 * 1024 + 100) + b'"}', 'D',
                 r'encountered an error \(the response is larger than 1048576 bytes')):
            State.body = body
            hits = State.hits
            t.check(f'{name}: kid {kid} refused', not login(addr, token(kid)))
            t.check(f'{name}: the failed refresh is logged', log_has(logp, pat), pat)
            t.check(f'{name}: the refresh was retried (Retry with 50 ms doubling within 300 ms)',
                    State.hits - hits >= 2, f'{State.hits - hits} requests')
            t.check(f'{name}: kid B still logs in (the previous keys kept)', login(addr, token('B')))
        srv.shutdown()
        srv.server_close()
        t.check('endpoint down: kid E refused', not login(addr, token('E')))
        t.check('endpoint down: the failed refresh is logged',
                log_has(logp, r'refresh of https://127.0.0.1:\d+/jwks.json encountered an error \((Failed to connect|Couldn)'))
        t.check('endpoint down: kid B still logs in', login(addr, token('B')))
        t.check('the broker is still running', p.poll() is None)
        t.eq('no token in the broker log', 0, open(logp, errors='replace').read().count('eyJ'))
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    # start-up: Kafka's configure() fetches once and a failure throws ("Could not refresh JWKS")
    srv2, url2 = serve()
    for name, jaas, want in (('an untrusted CA (no truststore: the system store)', '', 'could not fetch the JWKS'),
                             ('ssl.truststore.type JKS', f' ssl.truststore.location="{DIR}/ca.pem"',
                              'as PEM only')):
        d = tempfile.mkdtemp(prefix='gregor-jwks-refused.', dir=DIR)
        r = subprocess.run(broker_args(url2, d, jaas), capture_output=True, timeout=60)
        out = (r.stdout + r.stderr).decode(errors='replace')
        t.check(f'at start, {name}: exit 2 naming it', r.returncode == 2 and want in out,
                f'exit {r.returncode}: {out[-300:]}')
    srv2.shutdown()
    srv2.server_close()
    d = tempfile.mkdtemp(prefix='gregor-jwks-refused.', dir=DIR)
    r = subprocess.run(broker_args(url2, d, TRUST), capture_output=True, timeout=60)
    out = (r.stdout + r.stderr).decode(errors='replace')
    t.check('at start, the endpoint down: exit 2 (Kafka: "Could not refresh JWKS")',
            r.returncode == 2 and 'could not fetch the JWKS' in out, f'exit {r.returncode}: {out[-300:]}')
    # plain http: Kafka's ConfigurationUtils.validateUrl allows http, https and file
    State.body = jwks('B')
    srv3, url3 = serve(tls=False)
    d = tempfile.mkdtemp(prefix='gregor-jwks-http.', dir=DIR)
    args = broker_args(url3, d, '') + ['--override', 'sasl.oauthbearer.jwks.endpoint.refresh.ms=400']
    p = subprocess.Popen(args, stdout=open(f'{d}/broker.log', 'wb'), stderr=subprocess.STDOUT)
    try:
        up = until(lambda: os.path.exists(f'{d}/listener') and os.path.getsize(f'{d}/listener') > 0, 30)
        t.check('an http:// JWKS endpoint (allowed by Kafka): the broker starts', up)
        if up:
            addr = open(f'{d}/listener').readline().strip().split()[-1]
            t.check('an http:// JWKS endpoint: a token with kid B logs in', login(addr, token('B')))
            # the scheduled refresh: no token asks, the set still follows the endpoint
            hits = State.hits
            State.body = jwks('A')
            t.check('refresh.ms=400: scheduled refreshes fetch with no token asking (3 within 8 s)',
                    until(lambda: State.hits >= hits + 3), f'{State.hits - hits} requests')
            t.check('refresh.ms=400: kid A, new at the endpoint, logs in at the first try after them',
                    login(addr, token('A')))
    finally:
        p.terminate()
        p.wait(10)
        srv3.shutdown()
        srv3.server_close()


t.run('jwks over https', main)
subprocess.run(['rm', '-rf', DIR])
t.finish()
