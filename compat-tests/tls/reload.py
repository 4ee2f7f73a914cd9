"""reload.py: certificate reload without restart (issue #23), the Python part of compat-tests/tls/run.sh.
Environment: SSL (a listener serving certificate A, server-keystore.pem), MTLS (ssl.client.auth=required,
truststore ca.pem), PLAIN (the admin requests go there), CERTS (run.sh's mkcerts). With no argument: A is
served; IncrementalAlterConfigs on BROKER 1 (confluent-kafka) with validate_only changes nothing; to B (new
key, A's DN and SAN, encrypted with a new listener.name.ssl.ssl.key.password) new connections see B and a
connection opened before keeps working; a broken file, another DN, fewer SubjectAltNames and the
cluster-default level are refused with Kafka's INVALID_REQUEST and B keeps serving; the same location named
again after the file changed serves the new file (B2); DescribeConfigs shows the location and hides the
password; a truststore reload on MTLS lets a client of another CA in. `serves`: the SSL listener serves the
certificate in reload.pem. `restart`: after a restart, reload.pem's certificate and the reloaded truststore."""
import hashlib
import os
import shutil
import socket
import ssl
import struct
import sys

import kafka_raw as kr
import testkit as t
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

SSL = os.environ['SSL']
CERTS = os.environ['CERTS']
CA = os.path.join(CERTS, 'ca.pem')


def addr(hp):
    h, p = hp.rsplit(':', 1)
    return h, int(p)


def pem_fp(name):
    """sha256 of the first certificate in CERTS/name."""
    text = open(os.path.join(CERTS, name)).read()
    begin = text.index('-----BEGIN CERTIFICATE-----')
    end = text.index('-----END CERTIFICATE-----', begin) + len('-----END CERTIFICATE-----')
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(text[begin:end])).hexdigest()


def connect(hp, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=CA)
    ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(os.path.join(CERTS, cert), os.path.join(CERTS, key))
    s = socket.create_connection(addr(hp), timeout=10)
    return ctx.wrap_socket(s)


def served(hp):
    with connect(hp) as s:
        return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def api_versions(s, corr):
    """An ApiVersions v0 request on TLS socket s: True when its answer (correlation id, error 0) comes."""
    cid = b'reload'
    body = struct.pack('>hhih', 18, 0, corr, len(cid)) + cid
    try:
        s.sendall(struct.pack('>i', len(body)) + body)
        size = struct.unpack('>i', recv_all(s, 4))[0]
        got_corr, err = struct.unpack('>ih', recv_all(s, size)[:6])
        return got_corr == corr and err == 0
    except (OSError, ssl.SSLError, struct.error):
        return False


def recv_all(s, n):
    out = b''
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def client_in(hp, cert, key):
    try:
        with connect(hp, cert, key) as s:
            return api_versions(s, 7)
    except (OSError, ssl.SSLError):
        return False


def alter(adm, pairs, name='1', validate_only=False):
    """IncrementalAlterConfigs SET of pairs on BROKER name: None, or (error code, message)."""
    res = ConfigResource('broker', name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in pairs])
    try:
        for f in adm.incremental_alter_configs([res], validate_only=validate_only).values():
            f.result(timeout=30)
        return None
    except KafkaException as e:
        return (e.args[0].code(), e.args[0].str())


def alter_default(key, value):
    """A raw IncrementalAlterConfigs SET on the cluster-default BROKER resource (""): (error code, message)."""
    with kr.Conn(os.environ['PLAIN']) as c:
        r = c.request('IncrementalAlterConfigs', 1, {'resources': [{'resource_type': 4, 'resource_name': '',
                      'configs': [{'name': key, 'config_operation': 0, 'value': value}]}], 'validate_only': False})
    return r['responses'][0]['error_code'], r['responses'][0]['error_message'] or ''


def refused(name, got, text):
    t.check(name, got is not None and got[0] == 42 and text in got[1], got)


def main():
    A, B, B2 = pem_fp('server.pem'), pem_fp('serverB.pem'), pem_fp('serverB2.pem')
    loc = 'listener.name.ssl.ssl.keystore.location'
    t.eq('the SSL listener serves certificate A', A, served(SSL))
    old = connect(SSL)
    adm = AdminClient({'bootstrap.servers': os.environ['PLAIN']})
    reload_pem = os.path.join(CERTS, 'reload.pem')
    shutil.copy(os.path.join(CERTS, 'serverB-keystore.pem'), reload_pem)
    to_b = [(loc, reload_pem), ('listener.name.ssl.ssl.key.password', 'n3w')]
    t.eq('validate_only: B is accepted', None, alter(adm, to_b, validate_only=True))
    t.eq('validate_only changes nothing: A still served', A, served(SSL))
    refused('B without its key password: refused', alter(adm, [(loc, reload_pem)]),
            'Validation of dynamic config update of SSLFactory failed')
    t.check('a connection opened on A answers ApiVersions', api_versions(old, 1))
    t.eq('IncrementalAlterConfigs to B (key password n3w) succeeds', None, alter(adm, to_b))
    t.eq('new connections see B', B, served(SSL))
    t.check('the connection opened before keeps working', api_versions(old, 2))
    t.eq('... and keeps certificate A', A, hashlib.sha256(old.getpeercert(binary_form=True)).hexdigest())
    old.close()
    broken = os.path.join(CERTS, 'broken.pem')
    open(broken, 'w').write('-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n')
    refused('a broken keystore file is refused (INVALID_REQUEST)', alter(adm, [(loc, broken)]),
            'Validation of dynamic config update of SSLFactory failed')
    refused('a missing keystore file is refused', alter(adm, [(loc, broken + '.none')]), 'cannot read')
    refused('another DN is refused (ssl.allow.dn.changes false)',
            alter(adm, [(loc, os.path.join(CERTS, 'serverC-keystore.pem'))]),
            'Keystore DistinguishedName does not match')
    refused('fewer SubjectAltNames are refused (ssl.allow.san.changes false)',
            alter(adm, [(loc, os.path.join(CERTS, 'serverD-keystore.pem'))]), 'Keystore SubjectAltNames do not match')
    res = ConfigResource('broker', '1', set_config={loc: os.path.join(CERTS, 'serverC-keystore.pem')})
    try:
        list(adm.alter_configs([res], validate_only=True).values())[0].result(timeout=30)
        got = None
    except KafkaException as e:
        got = (e.args[0].code(), e.args[0].str())
    refused('AlterConfigs (validate_only) with another DN is refused too', got,
            'Keystore DistinguishedName does not match')
    refused('the cluster-default level is refused', alter_default(loc, reload_pem),
            'Cannot update these configs at default cluster level, broker id must be specified')
    t.eq('after the refusals B is still served', B, served(SSL))
    shutil.copy(os.path.join(CERTS, 'serverB2-keystore.pem'), reload_pem)
    t.eq('the same location again, the file changed: accepted', None, alter(adm, [(loc, reload_pem)]))
    t.eq('new connections see B2', B2, served(SSL))
    d = adm.describe_configs([ConfigResource('broker', '1')])
    cfg = list(d.values())[0].result(timeout=30)
    e = cfg.get(loc)
    t.eq('DescribeConfigs shows the location, source DYNAMIC_BROKER_CONFIG',
         (reload_pem, 'DYNAMIC_BROKER_CONFIG'), (e.value, ConfigSource(e.source).name) if e else None)
    e = cfg.get('listener.name.ssl.ssl.key.password')
    t.eq('DescribeConfigs hides the key password (null, sensitive)', (None, True),
         (e.value, e.is_sensitive) if e else None)
    mtls = os.environ['MTLS']
    t.check('MTLS: a client of our CA is in', client_in(mtls, 'client.pem', 'client.key'))
    t.check('MTLS: a client of the other CA is refused', not client_in(mtls, 'rogue.pem', 'rogue.key'))
    t.eq('truststore reload on MTLS (both CAs) succeeds', None,
         alter(adm, [('listener.name.mtls.ssl.truststore.location', os.path.join(CERTS, 'trust-both.pem'))]))
    t.check('MTLS: the other CA\'s client is now in', client_in(mtls, 'rogue.pem', 'rogue.key'))
    t.check('MTLS: our CA\'s client still in', client_in(mtls, 'client.pem', 'client.key'))


def serves():
    t.eq('the SSL listener serves reload.pem\'s certificate', pem_fp('reload.pem'), served(SSL))


def restart():
    t.eq('after a restart the SSL listener serves reload.pem\'s certificate', pem_fp('reload.pem'), served(SSL))
    t.check('after a restart MTLS takes the other CA\'s client (reloaded truststore)',
            client_in(os.environ['MTLS'], 'rogue.pem', 'rogue.key'))


if __name__ == '__main__':
    mode = sys.argv[1] if len(sys.argv) > 1 else 'main'
    t.run('reload ' + mode, {'main': main, 'serves': serves, 'restart': restart}[mode])
    t.finish()
