"""interbroker_sasl.py: clusters whose inter-broker listener is SASL (issue #23): etcd and gregor brokers on the
host (harness.py: everything started is stopped at the end), seeded and bounded in time. Certificates are made
here with openssl (interbroker_tls.py's mkcerts); no key is checked in.

Brokers 1-3 have INTERNAL (SASL_SSL, PLAIN, the inter-broker listener, sasl.mechanism.inter.broker.protocol=PLAIN,
the broker's own username/password in listener.name.internal.plain.sasl.jaas.config beside user_broker) and
EXTERNAL (PLAINTEXT, the clients'), with StandardAuthorizer and super.users=User:broker;User:ANONYMOUS. Checks:
  - a plaintext ApiVersions on INTERNAL is not answered (TLS first);
  - replication.py's RF 3 run over it: acks=all produce, every record read back, the replicas of every partition
    byte for byte equal; kill -9 the leader of partition 0, produce on, the restarted broker rejoins every ISR;
  - every broker's log shows its fetcher connections to both others made over TLS with SASL PLAIN as
    User:broker, and no inter-broker connection without SASL;
  - txn.py's transaction across three partitions led by the three brokers reads back exactly with
    read_committed, its markers and remote verification over SASL connections;
  - broker 4 leads a partition with super.users=User:ANONYMOUS only (User:broker neither super nor granted
    CLUSTER_ACTION): broker 1 authenticates to it but its fetches are refused, so it never joins that ISR, as in
    Kafka;
  - broker 5 with a wrong inter-broker password never joins the ISR of a partition it follows, logs the
    failed authentication with the mechanism and the back-off, and does not spin (CPU under 2 s over 5 s);
  - brokers 6 and 7 (if time allows): SASL_PLAINTEXT with SCRAM-SHA-512 on INTERNAL, the broker's SCRAM
    credential added with AlterUserScramCredentials to each of them after start: replication begins, an RF 2
    acks=all produce is acknowledged and read back, and the fetchers log SCRAM-SHA-512; with
    connections.max.reauth.ms=3000 there, each re-authenticates in band (KIP-368) and no session expires;
  - start-up refusals: a SASL inter-broker listener without sasl.mechanism.inter.broker.protocol (Kafka's
    default GSSAPI), a mechanism the listener does not enable, a JAAS entry without username or password: each
    stops the broker with exit status 2 and the key named.
Ends with `cluster-interbroker-sasl: N passed, N failed`; exit status 1 on any failure.
Usage: interbroker_sasl.py [--seed N] [--deadline SECONDS]
Read next: cluster/broker_client.h, common/scram_client.h, server/sasl.h, interbroker_tls.py.
"""
import hashlib
import os
import random
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import interbroker_tls as it  # noqa: E402  (certificates, log parsing, helpers)
import kafka_raw as k  # noqa: E402
from kafka_raw import field as F  # noqa: E402
import replication as rp  # noqa: E402  (its RF 3 sections, reused over SASL)
import testkit  # noqa: E402
import txn  # noqa: E402
from testkit import check, eq, section  # noqa: E402

figures = []
PW = 'broker-pw'
AUTHZ = ['authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer']
PLAIN_MODULE = 'org.apache.kafka.common.security.plain.PlainLoginModule'
SCRAM_MODULE = 'org.apache.kafka.common.security.scram.ScramLoginModule'



def sasl_ssl_overrides(d, password=PW, supers='User:broker;User:ANONYMOUS', mech='PLAIN', jaas=None):
    """INTERNAL: SASL_SSL with PLAIN, the inter-broker listener; EXTERNAL: PLAINTEXT; the authorizer on."""
    if jaas is None:
        jaas = f'{PLAIN_MODULE} required username="broker" password="{password}" user_broker="{PW}";'
    o = ['listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:PLAINTEXT', 'inter.broker.listener.name=INTERNAL',
         'listener.name.internal.sasl.enabled.mechanisms=PLAIN',
         f'listener.name.internal.plain.sasl.jaas.config={jaas}',
         'listener.name.internal.ssl.keystore.type=PEM',
         f'listener.name.internal.ssl.keystore.location={os.path.join(d, "broker-ks.pem")}',
         'listener.name.internal.ssl.truststore.type=PEM',
         f'listener.name.internal.ssl.truststore.location={os.path.join(d, "ca.pem")}'] + AUTHZ + [
         f'super.users={supers}']
    if mech:
        o.append(f'sasl.mechanism.inter.broker.protocol={mech}')
    return o


def scram_overrides():
    """INTERNAL: SASL_PLAINTEXT with SCRAM-SHA-512 (credentials from AlterUserScramCredentials)."""
    return ['listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT',
            'inter.broker.listener.name=INTERNAL', 'listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512',
            'sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512',
            f'listener.name.internal.scram-sha-512.sasl.jaas.config={SCRAM_MODULE} required username="broker" '
            f'password="{PW}";', 'listener.name.internal.connections.max.reauth.ms=3000'] + AUTHZ + [
            'super.users=User:broker;User:ANONYMOUS']


def sasl_conns(b, mech):
    return [c for c in it.connections(b) if f'with SASL {mech} as User:broker' in c[3]]


def t_plain_refused(run, etcd, bs, st):
    try:
        bs[0].api_versions('INTERNAL', timeout=3)
        answered = True
    except Exception:  # noqa: BLE001 - the TLS listener closes or never answers a plaintext request
        answered = False
    check('a plaintext ApiVersions on the SASL_SSL INTERNAL listener is not answered', not answered)


def t_logs_sasl(run, etcd, bs, st):
    """Each broker's fetcher reached both others over TLS with SASL PLAIN as User:broker at their INTERNAL
    address; no inter-broker connection without SASL."""
    internal = it.internal_addrs(bs, st)
    for b in bs:
        conns = it.connections(b)
        peers = sorted({p for pu, p, addr, rest in conns if pu == 'fetcher' and addr in internal.get(p, ())
                        and re.match(r'over TLSv1\.\d with SASL PLAIN as User:broker"?$', rest)})
        eq(f'broker {b.node_id}: fetcher connected to both others over TLS with SASL PLAIN as User:broker',
           sorted(x for x in internal if x != b.node_id), peers)
        bare = [c for c in conns if 'with SASL PLAIN' not in c[3]]
        eq(f'broker {b.node_id}: no inter-broker connection without SASL', [], bare[:3])
    line = next((m.group(0) for m in it.CONNECTED.finditer(it.log_of(bs[0]))), '')
    figures.append(f'broker 1: {line[:200]}')


def t_logs_txn_sasl(run, etcd, bs, st):
    """The transaction's markers and remote verification went over SASL connections (over the cluster)."""
    internal = it.internal_addrs(bs, st)
    seen = {}
    for b in bs:
        for pu, p, addr, rest in it.connections(b):
            if addr in internal.get(p, ()) and 'with SASL PLAIN as User:broker' in rest:
                seen.setdefault(pu, set()).add((b.node_id, p))
    for pu in ('txn-markers', 'verify'):
        check(f'{pu} connections with SASL PLAIN between brokers: {sorted(seen.get(pu, ()))}', bool(seen.get(pu)),
              str(seen))


def t_not_super(run, etcd, bs, st):
    """A leader whose super.users lacks User:broker (and no ACL grants it CLUSTER_ACTION) refuses the follower's
    fetches: authentication succeeds, replication does not (Kafka's KafkaApis: a follower's Fetch needs
    CLUSTER_ACTION on the cluster)."""
    b4 = run.broker(4, overrides=it.overrides(etcd) + sasl_ssl_overrides(st['certs'], supers='User:ANONYMOUS'))
    st['extra'].append(b4)
    eq('CreateTopics notsuper-t [4, 1] (broker 4 leads, 1 follows): NONE', 0,
       it.create_assigned(bs[0], 'notsuper-t', [[4, 1]]))
    h.wait_until(lambda: (txn.parts_of(bs[0], 'notsuper-t') or {}).get(0, (-1,))[0] == 4, 20, 'notsuper-t led by 4')
    eq('10 records acknowledged on notsuper-t (acks=1, leader 4)', [],
       it.produce_some(bs + [b4], 'notsuper-t', 10)[:3])
    eq('notsuper-t ISR within 20 s: broker 4 only (broker 1 is not a super user there)', (4,),
       it.isr_within(bs[0], 'notsuper-t', (4,)))
    ok = [c for c in sasl_conns(bs[0], 'PLAIN') if c[0] == 'fetcher' and c[1] == 4]
    check('broker 1 authenticated to broker 4 all the same (it is authorization that fails)', bool(ok))


def t_wrong_password(run, etcd, bs, st):
    b5 = run.broker(5, overrides=it.overrides(etcd) + sasl_ssl_overrides(st['certs'], password='not-the-password'))
    st['extra'].append(b5)
    eq('CreateTopics wrongpw-t [1, 5] (broker 5 a follower): NONE', 0, it.create_assigned(bs[0], 'wrongpw-t', [[1, 5]]))
    h.wait_until(lambda: (txn.parts_of(bs[0], 'wrongpw-t') or {}).get(0, (-1,))[0] == 1, 20, 'wrongpw-t led by 1')
    eq('10 records acknowledged on wrongpw-t (acks=1, leader 1)', [], it.produce_some(bs, 'wrongpw-t', 10)[:3])
    c0 = it.cpu_s(b5.proc.pid)
    time.sleep(5)
    used = it.cpu_s(b5.proc.pid) - c0
    figures.append(f'broker 5 (wrong password) used {used:.2f} s of CPU in 5 s while failing to authenticate')
    check(f'broker 5 backs off instead of spinning: {used:.2f} s of CPU in 5 s (< 2)', used < 2)
    eq('wrongpw-t ISR within 20 s: broker 1 only (broker 5 never authenticated)', (1,),
       it.isr_within(bs[0], 'wrongpw-t', (1,)))
    text = it.log_of(b5)
    fail = re.findall(r'broker-5-fetcher-\d+: SASL PLAIN authentication to broker 1 at \S+ as User:broker failed: '
                      r'SASL_AUTHENTICATION_FAILED[^\n]*retrying after 200 ms', text)
    check('broker 5 logs the failed PLAIN authentication to broker 1 and its back-off', bool(fail), text[-800:])
    if fail:
        figures.append(f'broker 5: {fail[0][:240]}')
    check('broker 5 never logs the password', 'not-the-password' not in text)
    eq('broker 5 never connected to brokers 1-3', [], [c for c in it.connections(b5) if c[1] in (1, 2, 3)][:3])


def salted(pw, salt, iters):
    return hashlib.pbkdf2_hmac('sha512', pw.encode(), salt, iters)


def t_scram(run, etcd, bs, st):
    """SASL_PLAINTEXT with SCRAM-SHA-512: two brokers whose credentials are added after start."""
    rnd = random.Random(st['seed'])
    bsc = [run.broker(i, overrides=it.overrides(etcd) + scram_overrides()) for i in (6, 7)]
    st['extra'] += bsc
    for b in bsc:
        salt = bytes(rnd.randrange(256) for _ in range(16))
        with k.Conn(b.bootstrap, timeout=10) as c:
            r = c.request('AlterUserScramCredentials', 0, {'deletions': [], 'upsertions': [
                {'name': 'broker', 'mechanism': 2, 'iterations': 8192, 'salt': salt,
                 'salted_password': salted(PW, salt, 8192)}]})
        eq(f'AlterUserScramCredentials on broker {b.node_id}: broker SCRAM-SHA-512 NONE', [('broker', 0)],
           [(x['user'], x['error_code']) for x in r['results']])
    eq('CreateTopics scram-t [6, 7] / [7, 6]: NONE', 0, it.create_assigned(bsc[0], 'scram-t', [[6, 7], [7, 6]]))
    h.wait_until(lambda: [v[2] for _, v in sorted((txn.parts_of(bsc[0], 'scram-t') or {}).items())]
                 in ([(6, 7), (7, 6)], [(6, 7), (6, 7)], [(7, 6), (7, 6)], [(7, 6), (6, 7)]), 25,
                 'scram-t ISR of both brokers', interval=0.5)
    from confluent_kafka import Consumer, Producer, TopicPartition
    boot = ','.join(b.bootstrap for b in bsc)
    p = Producer({'bootstrap.servers': boot, 'acks': 'all', 'linger.ms': 5, 'message.timeout.ms': 20000,
                  'log_level': 2})
    acked, errs = [], []
    for i in range(200):
        p.produce('scram-t', value=f'x{i}'.encode(), partition=i % 2,
                  on_delivery=lambda e, m: errs.append(str(e)) if e else acked.append(m.value().decode()))
    p.flush(25)
    eq('200 records acknowledged with acks=all (ISR 2, replicated over SCRAM-SHA-512)', (200, []),
       (len(acked), errs[:3]))
    c = Consumer({'bootstrap.servers': boot, 'group.id': 'scram-unused', 'enable.auto.commit': False,
                  'log_level': 2})
    c.assign([TopicPartition('scram-t', q, 0) for q in range(2)])
    got, end = [], time.monotonic() + 20
    try:
        while len(got) < 200 and time.monotonic() < end:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
    finally:
        c.close()
    eq('every acknowledged record read back', sorted(acked), sorted(got))
    for b in bsc:
        peers = sorted({x[1] for x in sasl_conns(b, 'SCRAM-SHA-512') if x[0] == 'fetcher'})
        eq(f'broker {b.node_id}: fetcher connected with SASL SCRAM-SHA-512 as User:broker', [13 - b.node_id], peers)
    line = next((x for x in it.log_of(bsc[0]).splitlines() if 'with SASL SCRAM-SHA-512' in x), '')
    figures.append(f'broker 6: {line[-160:]}')
    # KIP-368 with SCRAM: 3 s sessions on INTERNAL; each fetcher re-authenticates in band (a full SCRAM exchange
    # on the same connection) instead of letting its session expire
    reauth = re.compile(r'broker-\d+-fetcher-\d+: re-authenticated to broker \d+ with SASL SCRAM-SHA-512 as '
                        r'User:broker \(session lifetime 3000 ms\)')
    for b in bsc:
        end = time.monotonic() + 8
        while not reauth.search(it.log_of(b)) and time.monotonic() < end:
            time.sleep(0.5)
        text = it.log_of(b)
        check(f'broker {b.node_id}: a fetcher re-authenticated with SCRAM-SHA-512 in band (3 s sessions)',
              bool(reauth.search(text)))
        eq(f'broker {b.node_id}: no connection closed for an expired session', 0, text.count('SASL session expired'))


def t_refusals(run, etcd, bs, st):
    """Start-up refusals of the inter-broker SASL settings in a cluster: exit status 2, the message naming the key
    (a single node opens no inter-broker connection and needs none of them)."""
    d = st['certs']
    no_user = f'{PLAIN_MODULE} required password="{PW}" user_broker="{PW}";'
    no_pw = f'{PLAIN_MODULE} required username="broker" user_broker="{PW}";'
    cases = [(sasl_ssl_overrides(d, mech=None), 'sasl.mechanism.inter.broker.protocol', 'mechanism unset (GSSAPI)'),
             (sasl_ssl_overrides(d, mech='SCRAM-SHA-512'), 'sasl.mechanism.inter.broker.protocol',
              'SCRAM-SHA-512 not enabled on INTERNAL'),
             (sasl_ssl_overrides(d, jaas=no_user), 'listener.name.internal.plain.sasl.jaas.config', 'no username'),
             (sasl_ssl_overrides(d, jaas=no_pw), 'listener.name.internal.plain.sasl.jaas.config', 'no password')]
    for kvs, key, what in cases:
        kvs = ['listeners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0', 'node.id=99',
               f'log.dirs={os.path.join(run.dir, "refused-data")}'] + rp.overrides(etcd) + kvs
        argv = [h.GREGOR_BIN]
        for kv in kvs:
            argv += ['--override', kv]
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        out = p.stdout.decode(errors='replace')
        eq(f'{what}: the broker stops at start with exit status 2 naming {key}', (2, True),
           (p.returncode, key in out))
        check(f'{what}: the password is not in the message', PW not in out.replace(f'user_broker="{PW}"', ''))


def main():
    seed, deadline = h.cli(deadline_s=240.0)
    t0 = time.monotonic()
    st = {'seed': seed, 'extra': []}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-interbroker-sasl') as run:
        certs = os.path.join(run.dir, 'certs')
        os.makedirs(certs)
        try:
            it.mkcerts(certs)
        except subprocess.CalledProcessError as e:
            check(f'certificates made with openssl: {e}', False)
            print(f'cluster-interbroker-sasl: {testkit.passed} passed, {testkit.failed} failed', flush=True)
            sys.exit(1)
        st['certs'] = certs
        etcd = run.etcd(1)
        section('bad inter-broker SASL settings stop the broker at start', t_refusals, run, etcd, [], st)
        bs = [run.broker(i, overrides=it.overrides(etcd) + sasl_ssl_overrides(certs)) for i in (1, 2, 3)]
        it.internal_addrs(bs, st)
        section('the INTERNAL listener speaks TLS first', t_plain_refused, run, etcd, bs, st)
        section('RF 3 over SASL_SSL: produce acks=all, read back, replicas agree', rp.t_produce, run, etcd, bs, st)
        if 'lay' in st:
            section('kill -9 a leader, produce on, restart it', rp.t_kill_leader, run, etcd, bs, st)
        section('the fetchers connected with SASL PLAIN as User:broker', t_logs_sasl, run, etcd, bs, st)
        if all(b.alive() for b in bs):
            section('a transaction across partitions led by the three brokers', txn.t_cross, run, etcd, bs, st)
            section('markers and verification connected with SASL', t_logs_txn_sasl, run, etcd, bs, st)
        section('a leader where User:broker is no super user refuses its fetches', t_not_super, run, etcd, bs, st)
        section('a broker with a wrong password cannot replicate', t_wrong_password, run, etcd, bs, st)
        section('SASL_PLAINTEXT with SCRAM-SHA-512, credentials added after start', t_scram, run, etcd, bs, st)
    for f in rp.figures + figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-interbroker-sasl: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
