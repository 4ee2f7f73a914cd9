"""interbroker_tls_reload.py: certificate reload reaches the inter-broker client (issue #23): etcd and two gregor
brokers on the host (harness.py: everything started is stopped at the end), seeded and bounded in time.
Certificates are made here with openssl (a CA, a second CA, the brokers' certificate for 127.0.0.1 from each CA
with the same subject and SubjectAltName); no key is checked in.

Both brokers have INTERNAL (SSL, ssl.client.auth=required, PEM keystore and truststore of the first CA, the
inter-broker listener) and EXTERNAL (PLAINTEXT), num.replica.fetchers=2. What it checks:
  - topic A [2, 1] (broker 1 follows broker 2 on fetcher connection a): records acks=all, ISR {2, 1};
  - IncrementalAlterConfigs (confluent-kafka's AdminClient) with validate_only on BROKER 1 (its INTERNAL truststore
    to both CAs: nothing changes), then on BROKER 2 (its INTERNAL keystore to the second CA's certificate, same DN
    and SAN: allowed);
  - topic B [2, 1], whose partition maps to the other fetcher id b (Kafka's getFetcherId): broker 1 opens a new
    connection to broker 2, which now presents the second CA's certificate; broker 1's log shows the handshake
    refused ("certificate verify failed": validate_only left its client context alone);
  - the same change on BROKER 1 for real: broker 1's next attempt verifies broker 2 with the reloaded truststore
    in its client context: records acks=all on B, broker 1 in B's ISR and still there 6 s later (past
    replica.lag.time.max.ms: it fetches up to the leader's end), fetcher-b logged connected over TLS, at most one
    handshake failure after the new context (one under way at the swap). Without the client context's reload
    broker 1 stays out of B's ISR;
  - the established connection a kept its session: A still takes records acks=all with ISR {2, 1}.
Ends with `cluster-interbroker-tls-reload: N passed, N failed`; exit status 1 on any failure.
Usage: interbroker_tls_reload.py [--seed N] [--deadline SECONDS]
Read next: server/tls_reload.h, cluster/broker_client.h (gr_broker_client_set_tls_ctx), interbroker_tls.py.
"""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import interbroker_tls as ibt  # noqa: E402  (tls_overrides, create_assigned, connections, log_of)
import replication as rp  # noqa: E402
import testkit  # noqa: E402
import txn  # noqa: E402
from testkit import check, eq, section  # noqa: E402

FETCHERS = 2
figures = []


def mkcerts(d):
    """ca.pem and ca2.pem; broker-ks.pem (key + certificate of ca) and broker2-ks.pem (of ca2), both CN=broker with
    SAN IP:127.0.0.1; both.pem trusts the two CAs."""
    o = ['-days', '2', '-sha256']

    def sh(*argv):
        subprocess.run(list(argv), cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for ca, cn in (('ca', 'Gregor inter-broker test CA'), ('ca2', 'Gregor second CA')):
        sh('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{ca}.key', '-out', f'{ca}.pem',
           *o, '-subj', f'/CN={cn}')
    with open(os.path.join(d, 'san.ext'), 'w') as f:
        f.write('subjectAltName=IP:127.0.0.1\n')
    for name, ca in (('broker', 'ca'), ('broker2', 'ca2')):
        sh('openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{name}.key', '-out', f'{name}.csr',
           '-subj', '/CN=broker')
        sh('openssl', 'x509', '-req', '-in', f'{name}.csr', '-CA', f'{ca}.pem', '-CAkey', f'{ca}.key',
           '-CAcreateserial', '-out', f'{name}.pem', *o, '-extfile', 'san.ext')
        with open(os.path.join(d, f'{name}-ks.pem'), 'w') as f:
            for part in (f'{name}.key', f'{name}.pem'):
                f.write(open(os.path.join(d, part)).read())
    with open(os.path.join(d, 'both.pem'), 'w') as f:
        for ca in ('ca', 'ca2'):
            f.write(open(os.path.join(d, f'{ca}.pem')).read())


def java_hash(s):
    v = 0
    for ch in s:
        v = (31 * v + ord(ch)) & 0xffffffff
    return v - (1 << 32) if v >= 1 << 31 else v


def fetcher_id(topic, partition=0):
    """Kafka's AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode + partition) % num fetchers."""
    v = (31 * java_hash(topic) + partition) & 0xffffffff
    v = v - (1 << 32) if v >= 1 << 31 else v
    return (0 if v == -(1 << 31) else abs(v)) % FETCHERS


def alter(b, pairs, validate_only=False):
    """IncrementalAlterConfigs SET of pairs on BROKER b.node_id over EXTERNAL: None, or the error text."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    adm = AdminClient({'bootstrap.servers': b.bootstrap, 'log_level': 2})
    res = ConfigResource('broker', str(b.node_id), incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in pairs])
    try:
        for f in adm.incremental_alter_configs([res], validate_only=validate_only).values():
            f.result(timeout=30)
        return None
    except KafkaException as e:
        return str(e.args[0])


def produce_all(bs, topic, n):
    """n records acks=all to topic-0: the delivery errors (at most 3)."""
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all', 'linger.ms': 5,
                  'message.timeout.ms': 20000, 'log_level': 2})
    errs = []
    for i in range(n):
        p.produce(topic, value=f'{topic}-{i}'.encode(), partition=0,
                  on_delivery=lambda e, m: errs.append(str(e)) if e else None)
    left = p.flush(25)
    return errs[:3] + ([f'{left} not delivered'] if left else [])


def isr(b, topic):
    """topic-0's ISR at b, sorted (None when not known)."""
    v = (txn.parts_of(b, topic) or {}).get(0, (None, None, None))[2]
    return tuple(sorted(v)) if v is not None else None


def t_reload(run, etcd, bs, st):
    d = st['certs']
    ta = 'ibr-a'
    tb = next(f'ibr-b{i}' for i in range(100) if fetcher_id(f'ibr-b{i}') != fetcher_id(ta))
    fa, fb = fetcher_id(ta), fetcher_id(tb)
    eq(f'CreateTopics {ta} [2, 1] (fetcher {fa}): NONE', 0, ibt.create_assigned(bs[0], ta, [[2, 1]]))
    h.wait_until(lambda: (txn.parts_of(bs[0], ta) or {}).get(0, (-1,))[0] == 2, 20, f'{ta} led by 2')
    eq(f'10 records acks=all on {ta} before the reload', [], produce_all(bs, ta, 10))
    eq(f'{ta} ISR (2, 1) before the reload', (1, 2), isr(bs[0], ta))
    trust = [('listener.name.internal.ssl.truststore.location', os.path.join(d, 'both.pem'))]
    eq('broker 1: INTERNAL truststore to both CAs with validate_only', None, alter(bs[0], trust, validate_only=True))
    eq('broker 2: INTERNAL keystore reloaded to the second CA\'s certificate (same DN and SAN)', None,
       alter(bs[1], [('listener.name.internal.ssl.keystore.location', os.path.join(d, 'broker2-ks.pem'))]))
    eq(f'CreateTopics {tb} [2, 1] (fetcher {fb}, a new connection): NONE', 0,
       ibt.create_assigned(bs[0], tb, [[2, 1]]))
    refused = re.compile(rf'broker-1-fetcher-{fb}: TLS handshake with broker 2 at \S+ failed: '
                         r'[^\n]*certificate verify failed[^\n]*')
    try:
        h.wait_until(lambda: refused.search(ibt.log_of(bs[0])), 15, 'broker 1 refusing broker 2\'s new certificate')
    except h.HarnessError:
        pass
    m = refused.search(ibt.log_of(bs[0]))
    check(f'validate_only changed nothing: broker 1\'s fetcher {fb} refuses broker 2\'s new certificate', bool(m))
    if m:
        figures.append(f'broker 1 before its reload: {m.group(0)[:180]}')
    before = len(ibt.log_of(bs[0]))
    eq('broker 1: INTERNAL truststore reloaded to both CAs', None, alter(bs[0], trust))
    eq(f'10 records acks=all on {tb} after the reload', [], produce_all(bs, tb, 10))
    eq(f'10 records acks=all on {ta} (connection {fa} established before the reloads)', [],
       produce_all(bs, ta, 10))
    got = [None]

    def in_isr():
        got[0] = isr(bs[0], tb)
        return got[0] == (1, 2)
    try:
        h.wait_until(in_isr, 15, f'broker 1 in {tb}\'s ISR', interval=0.25)
    except h.HarnessError:
        pass
    eq(f'{tb} ISR (2, 1) after the reload (broker 1 caught up over a new connection)', (1, 2), got[0])
    time.sleep(6.0)  # past replica.lag.time.max.ms=5000: broker 1 keeps fetching
    eq(f'{tb} ISR still (2, 1) 6 s later', (1, 2), isr(bs[0], tb))
    eq(f'{ta} ISR still (2, 1)', (1, 2), isr(bs[0], ta))
    after = ibt.log_of(bs[0])[before:]
    new = [c for c in ibt.CONNECTED.finditer(after)
           if c.group(2) == 'fetcher' and int(c.group(3)) == 2 and c.group(6).strip().startswith('over TLSv1')]
    check(f'broker 1 logs fetcher connection {fb} to broker 2 over TLS after its reload',
          any(c.group(0).startswith(f'broker client: broker-1-fetcher-{fb}:') for c in new), after[-800:])
    mark = after.find('new inter-broker client TLS context')
    fails = re.findall(r'TLS handshake with broker 2 at \S+ failed: [^\n]*', after[mark:] if mark >= 0 else after)
    # a handshake already under way at the swap ends with the context it began with: at most one such failure
    check(f'broker 1 logs at most one TLS handshake failure towards broker 2 after its new client context '
          f'({len(fails)})', len(fails) <= 1, fails[:2])
    m = re.search(r'listener INTERNAL: new inter-broker client TLS context[^\n]*', after)
    check('broker 1 logs its new inter-broker client context', bool(m))


def main():
    seed, deadline = h.cli(deadline_s=120.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-interbroker-tls-reload') as run:
        certs = os.path.join(run.dir, 'certs')
        os.makedirs(certs)
        try:
            mkcerts(certs)
        except subprocess.CalledProcessError as e:
            check(f'certificates made with openssl: {e}', False)
            print(f'cluster-interbroker-tls-reload: {testkit.passed} passed, {testkit.failed} failed', flush=True)
            sys.exit(1)
        st['certs'] = certs
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=rp.overrides(etcd) + ibt.tls_overrides(certs) +
                         [f'num.replica.fetchers={FETCHERS}'], listeners=('INTERNAL', 'EXTERNAL')) for i in (1, 2)]
        section('a reload reaches the inter-broker client', t_reload, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-interbroker-tls-reload: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
