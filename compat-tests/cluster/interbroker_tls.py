"""interbroker_tls.py: a cluster whose inter-broker listener is SSL (issue #23): etcd and three gregor brokers on the
host (harness.py: everything started is stopped at the end), seeded and bounded in time. Certificates are made
here with openssl (a CA, the brokers' certificate for 127.0.0.1, a second CA, a certificate of ours for another
address); no key is checked in.

Each broker has INTERNAL (SSL, ssl.client.auth=required, PEM keystore and truststore, the inter-broker listener by
inter.broker.listener.name), EXTERNAL (PLAINTEXT, the clients') and SECURE (SSL for clients). What it checks:
  - a plaintext ApiVersions on INTERNAL is not answered (the listener speaks TLS only);
  - replication.py's RF 3 run over it: acks=all produce, every record read back, the replicas of every partition
    byte for byte equal up to the high watermark, the replication byte counters; kill -9 the leader of partition
    0: a new leader serves every acknowledged record, produce goes on, the restarted broker rejoins every ISR and
    the replicas agree again;
  - every broker's log shows its fetcher connections to both others made over TLS (broker_client's "connected
    to broker N at <N's INTERNAL address> over TLSv1.x" line), and no inter-broker connection without TLS;
  - txn.py's transaction across three partitions led by the three brokers (two commits, one abort; markers and
    the remote verification between brokers) reads back exactly with read_committed, and the logs show the
    txn-markers and verify connections over TLS;
  - clients over SSL as well: confluent-kafka on SECURE produces 300 records acks=all to three partitions led by
    the three brokers and reads them back; Metadata on SECURE names the brokers' SECURE addresses;
  - a fourth broker whose certificate and truststore come from another CA joins the membership (etcd carries no
    TLS) but cannot replicate: a partition it follows drops it from the ISR, its log names the certificate
    verification failure, and its failing reconnects back off instead of spinning (CPU under 2 s over 5 s);
  - a fifth broker with a certificate from our CA for 127.0.0.2 while it advertises 127.0.0.1: broker 1 refuses it
    as a leader (ssl.endpoint.identification.algorithm=https, Kafka's default: "IP address mismatch" in broker
    1's log), and a partition it leads drops broker 1 from its ISR;
  - start-up refusals: ssl.endpoint.identification.algorithm other than https or empty, and
    security.inter.broker.protocol=SSL with no listener named SSL (Kafka's rule), each stop the broker with exit
    status 2 and the key named.
Ends with `cluster-interbroker-tls: N passed, N failed`; exit status 1 on any failure.
Usage: interbroker_tls.py [--seed N] [--deadline SECONDS]
Read next: cluster/broker_client.h, server/tls.h, replication.py, txn.py.
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
import kafka_raw as k  # noqa: E402
import replication as rp  # noqa: E402  (its RF 3 sections, reused over TLS)
import testkit  # noqa: E402
import txn  # noqa: E402  (its cross-broker transaction section)
from testkit import check, eq, section  # noqa: E402

figures = []


def mkcerts(d):
    """A CA, the brokers' certificate (SAN IP:127.0.0.1), another CA with a broker certificate of its own, and a
    certificate of our CA for 127.0.0.2 only. Writes <name>-ks.pem (key + certificate) per broker kind."""
    o = ['-days', '2', '-sha256']

    def sh(*argv):
        subprocess.run(list(argv), cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for ca, cn in (('ca', 'Gregor inter-broker test CA'), ('other-ca', 'Other CA')):
        sh('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{ca}.key', '-out', f'{ca}.pem',
           *o, '-subj', f'/CN={cn}')
    for name, ca, ip in (('broker', 'ca', '127.0.0.1'), ('rogue', 'other-ca', '127.0.0.1'),
                         ('elsewhere', 'ca', '127.0.0.2')):
        with open(os.path.join(d, f'{name}.ext'), 'w') as f:
            f.write(f'subjectAltName=IP:{ip}\n')
        sh('openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{name}.key', '-out', f'{name}.csr',
           '-subj', f'/CN={name}')
        sh('openssl', 'x509', '-req', '-in', f'{name}.csr', '-CA', f'{ca}.pem', '-CAkey', f'{ca}.key',
           '-CAcreateserial', '-out', f'{name}.pem', *o, '-extfile', f'{name}.ext')
        with open(os.path.join(d, f'{name}-ks.pem'), 'w') as f:
            for part in (f'{name}.key', f'{name}.pem'):
                f.write(open(os.path.join(d, part)).read())


def tls_overrides(d, keystore='broker', truststore='ca', secure=False):
    """INTERNAL: SSL, the inter-broker listener, client certificates required; EXTERNAL: PLAINTEXT; with `secure`
    a third client listener SECURE over SSL too (broker-wide ssl.* keystore, no client certificate)."""
    pmap = 'INTERNAL:SSL,EXTERNAL:PLAINTEXT' + (',SECURE:SSL' if secure else '')
    ks = os.path.join(d, keystore + '-ks.pem')
    extra = ['ssl.keystore.type=PEM', f'ssl.keystore.location={ks}'] if secure else []
    return [f'listener.security.protocol.map={pmap}', 'inter.broker.listener.name=INTERNAL'] + extra + [
            'listener.name.internal.ssl.client.auth=required',
            'listener.name.internal.ssl.keystore.type=PEM',
            f'listener.name.internal.ssl.keystore.location={os.path.join(d, keystore + "-ks.pem")}',
            'listener.name.internal.ssl.truststore.type=PEM',
            f'listener.name.internal.ssl.truststore.location={os.path.join(d, truststore + ".pem")}']


def t_client_ssl(run, etcd, bs, st):
    """Clients over SSL too (the SECURE listener, its own context): confluent-kafka produces acks=all to an RF 3
    topic and reads it back over TLS; Metadata on SECURE names the other brokers' SECURE addresses."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    ca = os.path.join(st['certs'], 'ca.pem')
    tls = {'bootstrap.servers': ','.join(b.addrs['SECURE'] for b in bs), 'security.protocol': 'ssl',
           'ssl.ca.location': ca, 'log_level': 2}
    topic = 'secure-t'
    eq(f'CreateTopics {topic} [1, 2, 3] / [2, 3, 1] / [3, 1, 2]: NONE', 0,
       create_assigned(bs[0], topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]]))
    h.wait_until(lambda: [v[0] for _, v in sorted((txn.parts_of(bs[0], topic) or {}).items())] == [1, 2, 3], 20,
                 f'{topic} led by 1, 2, 3')
    p = Producer(dict(tls, acks='all', **{'linger.ms': 5, 'message.timeout.ms': 30000}))
    acked, errs = [], []
    for i in range(300):
        p.produce(topic, value=f's{i}'.encode(), partition=i % 3,
                  on_delivery=lambda e, m: errs.append(str(e)) if e else acked.append(m.value().decode()))
    p.flush(35)
    eq('300 records acknowledged with acks=all over SSL (leaders 1, 2, 3)', (300, []), (len(acked), errs[:3]))
    c = Consumer(dict(tls, **{'group.id': 'secure-unused', 'enable.auto.commit': False}))
    c.assign([TopicPartition(topic, q, 0) for q in range(3)])
    got, end = [], time.monotonic() + 30
    try:
        while len(got) < 300 and time.monotonic() < end:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
        md = c.list_topics(topic, timeout=10)
    finally:
        c.close()
    eq('every acknowledged record read back over SSL', sorted(acked), sorted(got))
    eq('Metadata on SECURE names every broker at its SECURE address',
       sorted(b.addrs['SECURE'] for b in bs), sorted(f'{x.host}:{x.port}' for x in md.brokers.values()))


def overrides(etcd):
    return rp.overrides(etcd) + [f'transaction.state.log.num.partitions={txn.TXN_PARTS}',
                                 f'offsets.topic.num.partitions={txn.OFFSETS_PARTS}']


def log_of(b):
    with open(b.proc.log_path, errors='replace') as f:
        return f.read()


CONNECTED = re.compile(r'broker client: broker-(\d+)-([a-z-]+)-\d+: connected to broker (\d+) at (\S+?):(\d+)(.*)')


def connections(b):
    """[(purpose, peer, 'host:port', rest of the line)] of b's broker client 'connected' log lines."""
    return [(m.group(2), int(m.group(3)), f'{m.group(4)}:{m.group(5)}', m.group(6).strip())
            for m in CONNECTED.finditer(log_of(b))]


def t_plain_refused(run, etcd, bs, st):
    try:
        bs[0].api_versions('INTERNAL', timeout=3)
        answered = True
    except Exception:  # noqa: BLE001 - the TLS listener closes or never answers a plaintext request
        answered = False
    check('a plaintext ApiVersions on the SSL INTERNAL listener is not answered', not answered)
    r, _ = bs[0].api_versions()
    eq('the PLAINTEXT EXTERNAL listener answers ApiVersions', 0, r['error_code'])


def internal_addrs(bs, st):
    """{node id: every INTERNAL address it had} (a broker restarted by replication.py gets new ports)."""
    for b in bs:
        st.setdefault('internal', {}).setdefault(b.node_id, set()).add(b.addrs['INTERNAL'])
    return st['internal']


def t_logs_tls(run, etcd, bs, st):
    """Each broker's fetcher reached both others over TLS at their INTERNAL address (while the three were up,
    each led a partition of rf3 that the two others follow); no connection without TLS."""
    internal = internal_addrs(bs, st)
    for b in bs:
        conns = connections(b)
        peers = sorted({p for pu, p, addr, rest in conns if pu == 'fetcher' and rest.startswith('over TLSv1')
                        and addr in internal.get(p, ())})
        eq(f'broker {b.node_id}: fetcher connected to both others over TLS at their INTERNAL address',
           sorted(x for x in internal if x != b.node_id), peers)
        plain = [c for c in conns if not c[3].startswith('over TLSv1')]
        eq(f'broker {b.node_id}: no inter-broker connection without TLS', [], plain[:3])


def t_logs_txn_tls(run, etcd, bs, st):
    """The transaction's markers and remote verification went over TLS connections (over the cluster)."""
    internal = internal_addrs(bs, st)
    seen = {}
    for b in bs:
        for pu, p, addr, rest in connections(b):
            if addr in internal.get(p, ()) and rest.startswith('over TLSv1'):
                seen.setdefault(pu, set()).add((b.node_id, p))
    for pu in ('txn-markers', 'verify'):
        check(f'{pu} connections over TLS between brokers: {sorted(seen.get(pu, ()))}', bool(seen.get(pu)),
              str(seen))


def cpu_s(pid):
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def create_assigned(b, topic, assignments):
    with k.Conn(b.bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': topic, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': p, 'broker_ids': ids}
                                                                      for p, ids in enumerate(assignments)],
                                                      'configs': []}], 'timeout_ms': 10000, 'validate_only': False})
    return r['topics'][0]['error_code']


def produce_some(bs, topic, n):
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 1, 'linger.ms': 5,
                  'message.timeout.ms': 20000, 'log_level': 2})
    errs = []
    for i in range(n):
        p.produce(topic, value=f'{topic}-{i}'.encode(), partition=0,
                  on_delivery=lambda e, m: errs.append(str(e)) if e else None)
    p.flush(25)
    return errs


def isr_within(b, topic, want, timeout=20):
    """The ISR of topic-0 at b once it is `want` (or the last seen after timeout s)."""
    seen = [None]

    def get():
        seen[0] = (txn.parts_of(b, topic) or {}).get(0, (None, None, None))[2]
        return seen[0] == want
    try:
        h.wait_until(get, timeout, f'{topic} ISR {want}', interval=0.5)
    except h.HarnessError:
        pass
    return seen[0]


def t_rogue(run, etcd, bs, st):
    d = st['certs']
    rogue = run.broker(4, overrides=overrides(etcd) + tls_overrides(d, 'rogue', 'other-ca'))
    st['extra'] = [rogue]
    eq('CreateTopics rogue-t [1, 4] (broker 4 a follower): NONE', 0, create_assigned(bs[0], 'rogue-t', [[1, 4]]))
    h.wait_until(lambda: (txn.parts_of(bs[0], 'rogue-t') or {}).get(0, (-1,))[0] == 1, 20, 'rogue-t led by 1')
    eq('10 records acknowledged on rogue-t (acks=1, leader 1)', [], produce_some(bs, 'rogue-t', 10)[:3])
    c0 = cpu_s(rogue.proc.pid)
    time.sleep(5)
    used = cpu_s(rogue.proc.pid) - c0
    figures.append(f'broker 4 (foreign CA) used {used:.2f} s of CPU in 5 s while failing to connect')
    check(f'broker 4 backs off instead of spinning: {used:.2f} s of CPU in 5 s (< 2)', used < 2)
    eq('rogue-t ISR within 20 s: broker 1 only (broker 4 never fetched, out after replica.lag.time.max.ms)', (1,),
       isr_within(bs[0], 'rogue-t', (1,)))
    text = log_of(rogue)
    fail = re.search(r'TLS handshake with broker 1 at \S+ failed: [^"]*certificate verify failed[^"]*', text)
    check('broker 4 logs the verification failure of broker 1\'s certificate', bool(fail), text[-600:])
    if fail:
        figures.append(f'broker 4: {fail.group(0)[:200]}')
    ready = [c for c in connections(rogue) if c[1] in (1, 2, 3)]
    eq('broker 4 never connected to brokers 1-3', [], ready[:3])


def t_elsewhere(run, etcd, bs, st):
    d = st['certs']
    other = run.broker(5, overrides=overrides(etcd) + tls_overrides(d, 'elsewhere', 'ca'))
    st['extra'].append(other)
    eq('CreateTopics elsewhere-t [5, 1] (broker 5 leads, 1 follows): NONE', 0,
       create_assigned(bs[0], 'elsewhere-t', [[5, 1]]))
    h.wait_until(lambda: (txn.parts_of(bs[0], 'elsewhere-t') or {}).get(0, (-1,))[0] == 5, 20, 'elsewhere-t led by 5')
    eq('10 records acknowledged on elsewhere-t (acks=1, leader 5)', [],
       produce_some(bs + [other], 'elsewhere-t', 10)[:3])
    eq('elsewhere-t ISR within 20 s: broker 5 only (broker 1 cannot verify 5\'s certificate for 127.0.0.1)', (5,),
       isr_within(bs[0], 'elsewhere-t', (5,)))
    m = re.search(r'broker-1-fetcher-\d+: TLS handshake with broker 5 at \S+ failed: '
                  r'[^"]*IP address mismatch[^"]*', log_of(bs[0]))
    check('broker 1 logs the host mismatch of broker 5\'s certificate', bool(m))
    if m:
        figures.append(f'broker 1: {m.group(0)[:200]}')


def t_refusals(run, etcd, bs, st):
    """Start-up refusals of the inter-broker client's settings: exit status 2, the message naming the key."""
    d = st['certs']
    for extra, key in (('listener.name.internal.ssl.endpoint.identification.algorithm=ldaps',
                        'ssl.endpoint.identification.algorithm'),
                       ('security.inter.broker.protocol=SSL', 'inter.broker.listener.name')):
        kvs = ['listeners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0',
               f'log.dirs={os.path.join(run.dir, "refused-data")}'] + tls_overrides(d) + [extra]
        if extra.startswith('security.inter.broker.protocol'):  # no listener is named SSL (setting both is refused)
            kvs.remove('inter.broker.listener.name=INTERNAL')
        argv = [h.GREGOR_BIN]
        for kv in kvs:
            argv += ['--override', kv]
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        out = p.stdout.decode(errors='replace')
        eq(f'{extra}: the broker stops at start with exit status 2 naming {key}', (2, True),
           (p.returncode, key in out))


def main():
    seed, deadline = h.cli(deadline_s=300.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-interbroker-tls') as run:
        certs = os.path.join(run.dir, 'certs')
        os.makedirs(certs)
        try:
            mkcerts(certs)
        except subprocess.CalledProcessError as e:
            check(f'certificates made with openssl: {e}', False)
            print(f'cluster-interbroker-tls: {testkit.passed} passed, {testkit.failed} failed', flush=True)
            sys.exit(1)
        st['certs'] = certs
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd) + tls_overrides(certs, secure=True),
                         listeners=('INTERNAL', 'EXTERNAL', 'SECURE')) for i in (1, 2, 3)]
        internal_addrs(bs, st)
        section('the INTERNAL listener speaks TLS only', t_plain_refused, run, etcd, bs, st)
        section('RF 3 over TLS: produce acks=all, read back, replicas agree', rp.t_produce, run, etcd, bs, st)
        if 'lay' in st:
            section('kill -9 a leader, produce on, restart it', rp.t_kill_leader, run, etcd, bs, st)
        section('the fetchers connected over TLS', t_logs_tls, run, etcd, bs, st)
        if all(b.alive() for b in bs):
            section('clients over SSL too (a SECURE listener beside the inter-broker one)', t_client_ssl, run, etcd,
                    bs, st)
        if all(b.alive() for b in bs):
            section('a transaction across partitions led by the three brokers', txn.t_cross, run, etcd, bs, st)
            section('markers and verification connected over TLS', t_logs_txn_tls, run, etcd, bs, st)
        section('a broker of another CA cannot replicate', t_rogue, run, etcd, bs, st)
        section('a certificate for another address is refused', t_elsewhere, run, etcd, bs, st)
        section('bad inter-broker TLS settings stop the broker at start', t_refusals, run, etcd, bs, st)
    for f in rp.figures + figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-interbroker-tls: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
